/**
 * One process of the semaphore chaos test (test/chaos/permits.test.ts): takes 1 of the CHAOS_LIMIT
 * permits of CHAOS_NAME again and again on Redis (SIMBA_REDIS_URL, SIMBA_REDIS_KEY_PREFIX,
 * SIMBA_LEASE_DURATION). Each body is a term: it prints `start`, then up to five times, every 20 ms,
 * checks `term.ensureValid()` and prints `v` if the term is still valid (the interval from `start` to
 * the last `v` is when the process knew it held the permit), then `end`; then a pause of 0–30 ms.
 *   {"ev":"start"|"v"|"end","tok","mono","pid"}    mono: ms on CLOCK_MONOTONIC, shared by the machine
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Config, Effect, Random } from "effect"
import { Simba, type Term } from "simba"
import { SimbaRedisLive } from "simba/redis"

const mono = () => Number(process.hrtime.bigint()) / 1e6
const say = (fields: Record<string, unknown>) =>
  Effect.sync(() => process.stdout.write(`${JSON.stringify({ ...fields, pid: process.pid })}\n`))

const program = Effect.gen(function*() {
  const name = yield* Config.string("CHAOS_NAME")
  const limit = yield* Config.integer("CHAOS_LIMIT")
  yield* say({ ev: "ready" })
  const body = (term: Term.Term) =>
    Effect.gen(function*() {
      const tok = String(term.token)
      yield* say({ ev: "start", tok, mono: mono() })
      for (let i = 0; i < 5; i++) {
        yield* Effect.sleep("20 millis")
        if ((yield* Effect.either(term.ensureValid()))._tag === "Left") break
        yield* say({ ev: "v", tok, mono: mono() })
      }
    }).pipe(Effect.ensuring(say({ ev: "end", tok: String(term.token), mono: mono() })))
  yield* Simba.withPermits(name, 1, body, { limit }).pipe(
    Effect.ignore,
    Effect.zipRight(Effect.flatMap(Random.nextIntBetween(0, 31), (ms) => Effect.sleep(`${ms} millis`))),
    Effect.forever
  )
})

program.pipe(
  Effect.provide(SimbaRedisLive),
  Effect.catchAllCause((cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.void
      : say({ ev: "fatal", message: Cause.pretty(cause).split("\n")[0] }).pipe(Effect.zipRight(Effect.sync(() => process.exit(1))))
  ),
  NodeRuntime.runMain
)

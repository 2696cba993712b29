/**
 * A leader-only job on Redis: run several copies, exactly one leads at a time.
 *
 *   npx tsx examples/redis-leader.ts            (SIMBA_REDIS_URL defaults to redis://127.0.0.1:6379)
 *
 * While it leads, the job appends token-stamped entries to a *fenced* Redis list: a small script
 * accepts a write only if its token is at least the highest token written so far, so a paused or
 * partitioned ex-leader can never interleave its writes with the new leader's. Ctrl-C (SIGINT) or
 * SIGTERM stops it gracefully: the job is interrupted first, then the lease is released and the next
 * leader starts at once (the `released` hint). The multi-process test (test/redis/multiprocess.test.ts)
 * runs three copies and kills them.
 *
 * Environment: LEADER_NAME (default `example-leader`), FENCED_LIST (default `simba-example:fenced`),
 * WRITE_EVERY_MS (default 50), and the SIMBA_* settings.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Redacted, Schedule } from "effect"
import { Redis } from "ioredis"
import { Simba, type Term } from "simba"
import { SimbaRedisLive } from "simba/redis"

// Accepts `entry` only when `token` >= the highest token accepted so far.
const fencedAppend = `
local top = redis.call('GET', KEYS[2])
if top and tonumber(top) > tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[2])
return 1`

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const name = yield* Config.string("LEADER_NAME").pipe(Config.withDefault("example-leader"))
  const list = yield* Config.string("FENCED_LIST").pipe(Config.withDefault("simba-example:fenced"))
  const every = yield* Config.integer("WRITE_EVERY_MS").pipe(Config.withDefault(50))
  const url = yield* Config.redacted("SIMBA_REDIS_URL").pipe(Config.withDefault(Redacted.make("redis://127.0.0.1:6379")))
  const redis = yield* Effect.acquireRelease(
    Effect.sync(() => new Redis(Redacted.value(url))),
    (client) => Effect.promise(() => client.quit())
  )
  const write = (term: Term.Term, seq: number) =>
    Effect.tryPromise(() =>
      redis.eval(fencedAppend, 2, list, `${list}:top`, term.token.toString(), `${term.token}:${process.pid}:${seq}`)
    ).pipe(
      Effect.flatMap((accepted) => say(`WRITE ${term.token} ${accepted === 1 ? "accepted" : "rejected"}`))
    )

  yield* say(`READY ${process.pid}`)
  yield* Simba.runWhileLeader(name, (term) =>
    Effect.gen(function*() {
      yield* say(`ELECTED ${term.token} ${process.pid}`)
      let seq = 0
      // Check the term before every write: a paused process reads isValid = false on waking.
      yield* Effect.flatMap(term.ensureValid(), () => write(term, seq++)).pipe(
        Effect.repeat(Schedule.spaced(`${every} millis`))
      )
    }).pipe(Effect.onInterrupt(() => say(`REVOKED ${term.token} ${process.pid}`))))
})

program.pipe(Effect.scoped, Effect.provide(SimbaRedisLive), NodeRuntime.runMain)

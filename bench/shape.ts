/**
 * Two floors under the uncontended Simba figure (issue 11: where the time of a `withLock` goes),
 * each run on the LeaseBackend and session of the "LeaseBackend alone" row, in the same process:
 *
 * - `scriptsBare`: Simba's own acquire and release scripts (the same `EVALSHA`, keys and arguments
 *   the backend sends) through a bare ioredis connection, no Effect: what the wire protocol costs
 *   with no client at all (the scripts' server time: their commands and their Lua).
 * - `shellShape`: the shape SPEC §5 prescribes for the client, with none of Simba's engine: one loop
 *   fiber taking events from a mailbox, each backend call (the LeaseBackend's `acquire` and
 *   `release`) in a fiber of its own, the body in a fiber of its own, the caller resumed once the
 *   release is sent (as `withLock` returns). Built from the primitives the client's shell uses (its
 *   `Mailbox`, `Runtime.runFork`, a resume callback rather than a `Deferred`): as cheap as we know how
 *   to build that shape, not a strawman. Simba minus this is the engine and its bookkeeping.
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import type { Redis } from "ioredis"
import type { LeaseBackendService } from "../src/LeaseBackend.js"
import * as Mailbox from "../src/internal/mailbox.js"
import { keys } from "../src/layers/redis/keys.js"
import * as Scripts from "../src/layers/redis/scripts.js"

/** One acquire + release on `name`, resolved when the release's reply came. */
export type BarePair = (name: string) => Promise<void>

/**
 * Simba's scripts through `redis` for the session `sessionId` of a backend on `keyPrefix` (mode
 * `node`, no lock-delay, the default idle expiry), after that backend has loaded them.
 */
export const scriptsBare = (redis: Redis, keyPrefix: string, sessionId: string): BarePair => {
  const k = keys(keyPrefix)
  const holder = { holder: k.session(sessionId), holderLeases: k.sessionLeases(sessionId), marker: k.boot }
  const shared = { sessionId, mode: "node", holderPrefix: k.sessionPrefix, idleMs: 3_600_000, delayMs: 0 }
  return async (name) => {
    const leaseKeys = { lease: k.lease(name), queue: k.leaseQueue(name), ...holder }
    const acquire = Scripts.acquire(leaseKeys, { ...shared, name, registration: "", homeRemaining: "" })
    const granted = await redis.evalsha(acquire.script.sha, acquire.keys.length, ...acquire.keys, ...acquire.args) as Array<unknown>
    if (granted[0] !== "granted") throw new Error(`scriptsBare: not granted: ${JSON.stringify(granted)}`)
    const release = Scripts.release(leaseKeys, { ...shared, name, token: String(granted[1]) })
    await redis.evalsha(release.script.sha, release.keys.length, ...release.keys, ...release.args)
  }
}

type Input =
  | { readonly _tag: "Start"; readonly name: string; readonly resume: (done: Effect.Effect<void>) => void }
  | { readonly _tag: "Granted"; readonly name: string; readonly token: bigint; readonly resume: (done: Effect.Effect<void>) => void }
  | { readonly _tag: "Exited"; readonly name: string; readonly token: bigint; readonly resume: (done: Effect.Effect<void>) => void }

/**
 * The SPEC §5 shape over `backend` for `sessionId`: returns its `withLock(name, Effect.void)`. The loop
 * fiber lives in the scope.
 */
export const shellShape = (
  backend: LeaseBackendService,
  sessionId: string
): Effect.Effect<(name: string) => Effect.Effect<void>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const box = Mailbox.make<Input>()
    const fork = Runtime.runFork(yield* Effect.runtime<never>())
    const handle = (input: Input): void => {
      switch (input._tag) {
        case "Start":
          fork(Effect.matchEffect(backend.acquire(sessionId, input.name), {
            onFailure: (error) => Effect.sync(() => input.resume(Effect.die(error))),
            onSuccess: (reply) =>
              Effect.sync(() =>
                reply._tag === "Granted"
                  ? Mailbox.offer(box, { _tag: "Granted", name: input.name, token: reply.token, resume: input.resume })
                  : input.resume(Effect.dieMessage(`shellShape: not granted: ${reply._tag}`))
              )
          }))
          return
        case "Granted":
          fork(Effect.ensuring(Effect.void, Effect.sync(() => Mailbox.offer(box, { ...input, _tag: "Exited" }))))
          return
        case "Exited":
          fork(Effect.ignore(backend.release(sessionId, input.name, input.token)))
          input.resume(Effect.void)
          return
      }
    }
    const drain = Effect.suspend(() => {
      while (Mailbox.size(box) > 0) handle(Mailbox.poll(box))
      return Mailbox.waitForItem(box)
    })
    yield* Effect.forkScoped(Effect.whileLoop({ while: () => true, body: () => drain, step: () => undefined }))
    return (name: string) => Effect.async<void>((resume) => Mailbox.offer(box, { _tag: "Start", name, resume }))
  })

/**
 * Floors under the Simba figures (where the time of a lock goes), each on a LeaseBackend's session
 * in the bench's own process:
 *
 * - `scriptsBare`: Simba's own acquire and release scripts (the same `EVALSHA`, keys and arguments
 *   the backend sends) through a bare ioredis connection, no Effect: what the wire protocol costs
 *   with no client at all (the scripts' server time: their commands and their Lua).
 *   `bareLocker` is the same with waiting: a refused acquire queues, and the hand-off message on the
 *   session's channel (a second connection, as the backend's subscriber) says when it holds: the
 *   fair hand-off of the contended and hand-over rows with no client.
 * - `shellShape`: the shape the design prescribes for the client (docs/design.md, "The shell"), with
 *   none of Simba's engine: one loop fiber taking events from a mailbox, each backend call (the
 *   LeaseBackend's `acquire` and `release`) in a fiber of its own, the body in a fiber of its own, the
 *   caller resumed once the release is sent (as `withLock` returns), a refused acquire waiting for the
 *   backend's `Granted` hint (heard in the backend's callback, as the client hears it). Built from the
 *   primitives the client's shell uses (its `Mailbox`, `Runtime.runFork`, a resume callback rather
 *   than a `Deferred`): as cheap as that shape can be built, not a strawman. Simba minus this is the
 *   engine and its bookkeeping.
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import type { Redis } from "ioredis"
import * as LeaseBackend from "../../src/LeaseBackend.js"
import type { LeaseBackendService } from "../../src/LeaseBackend.js"
import * as Mailbox from "../../src/internal/mailbox.js"
import { keys } from "../../src/layers/redis/keys.js"
import * as Scripts from "../../src/layers/redis/scripts.js"

/** One acquire + release on `name`, resolved when the release's reply came. */
export type BarePair = (name: string) => Promise<void>

/** Mode `node`, no lock-delay, the default idle expiry: as the bench's backends. */
const bareArgs = (keyPrefix: string, sessionId: string) => {
  const k = keys(keyPrefix)
  const holder = { holder: k.session(sessionId), holderLeases: k.sessionLeases(sessionId), marker: k.boot }
  const shared = { sessionId, mode: "node", holderPrefix: k.sessionPrefix, idleMs: 3_600_000, delayMs: 0 }
  return {
    leaseKeys: (name: string) => ({ lease: k.lease(name), queue: k.leaseQueue(name), ...holder }),
    shared,
    channel: k.session(sessionId)
  }
}

/** As the backend sends it: a function of the library the backend loaded (`FCALL`). */
const send = (redis: Redis, call: Scripts.Call<unknown>) => {
  const fn = Scripts.library.functionOf(call.script)
  if (fn === undefined) throw new Error(`script ${call.script.name} is not in the library`)
  return redis.fcall(fn, call.keys.length, ...call.keys, ...call.args) as Promise<unknown>
}

/**
 * Simba's scripts through `redis` for the session `sessionId` of a backend on `keyPrefix`, after
 * that backend has loaded them (its function library).
 */
export const scriptsBare = (redis: Redis, keyPrefix: string, sessionId: string): BarePair => {
  const { leaseKeys, shared } = bareArgs(keyPrefix, sessionId)
  return async (name) => {
    const acquire = Scripts.acquire(leaseKeys(name), { ...shared, name, registration: "", homeRemaining: "", pulse: "", margin: 0, block: 1 })
    const granted = await send(redis, acquire) as Array<unknown>
    if (granted[0] !== "granted") throw new Error(`scriptsBare: not granted: ${JSON.stringify(granted)}`)
    await send(redis, Scripts.release(leaseKeys(name), { ...shared, name, token: String(granted[1]) }))
  }
}

/** Locks with waiting on Simba's scripts, no client (see the module's comment). */
export interface BareLocker {
  /** Resolves with the token once the session holds `name`: at once, or when it is handed off. */
  readonly lock: (name: string) => Promise<string>
  /** Releases (handing off to the next in the queue); resolves when the reply came. */
  readonly unlock: (name: string, token: string) => Promise<void>
}

/**
 * `scriptsBare` with waiting, for the session `sessionId` (opened by a backend on `keyPrefix`, which
 * loaded the scripts): commands on `redis`, the session's channel heard on `subscriber`.
 */
export const bareLocker = async (
  redis: Redis,
  subscriber: Redis,
  keyPrefix: string,
  sessionId: string
): Promise<BareLocker> => {
  const { channel, leaseKeys, shared } = bareArgs(keyPrefix, sessionId)
  const waiting = new Map<string, (token: string) => void>()
  // A hand-off message heard before the refusal's reply (two connections: either may come first).
  const early = new Map<string, string>()
  subscriber.on("message", (from: string, message: string) => {
    if (from !== channel || !message.startsWith("granted:")) return
    const at = message.indexOf(":", 8)
    const name = message.slice(at + 1)
    const token = message.slice(8, at)
    const waiter = waiting.get(name)
    if (waiter === undefined) return void early.set(name, token)
    waiting.delete(name)
    waiter(token)
  })
  await subscriber.subscribe(channel)
  return {
    lock: async (name) => {
      const reply = await send(redis, Scripts.acquire(leaseKeys(name), { ...shared, name, registration: "", homeRemaining: "", pulse: "", margin: 0, block: 1 })) as Array<unknown>
      if (reply[0] === "granted") return String(reply[1])
      if (reply[0] !== "held") throw new Error(`bareLocker: ${JSON.stringify(reply)}`)
      const handed = early.get(name)
      if (handed !== undefined) {
        early.delete(name)
        return handed
      }
      return new Promise<string>((resolve) => waiting.set(name, resolve))
    },
    unlock: async (name, token) => {
      await send(redis, Scripts.release(leaseKeys(name), { ...shared, name, token }))
    }
  }
}

type Resume = (done: Effect.Effect<void>) => void

type Input =
  | { readonly _tag: "Start"; readonly name: string; readonly body: Effect.Effect<void>; readonly resume: Resume }
  | { readonly _tag: "Refused"; readonly name: string; readonly body: Effect.Effect<void>; readonly resume: Resume }
  | { readonly _tag: "Handed"; readonly name: string; readonly token: bigint }
  | { readonly _tag: "Granted"; readonly name: string; readonly token: bigint; readonly body: Effect.Effect<void>; readonly resume: Resume }
  | { readonly _tag: "Exited"; readonly name: string; readonly token: bigint; readonly resume: Resume }

/**
 * The prescribed shell shape over `backend` for `sessionId`: returns its `withLock(name, body)`. The loop fiber
 * and the hints' listener live in the scope.
 */
export const shellShape = (
  backend: LeaseBackendService,
  sessionId: string
): Effect.Effect<(name: string, body: Effect.Effect<void>) => Effect.Effect<void>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const box = Mailbox.make<Input>()
    const fork = Runtime.runFork(yield* Effect.runtime<never>())
    // Refused requests wait for their hand-off; a hand-off heard before the refusal waits for it.
    const waiting = new Map<string, Extract<Input, { _tag: "Refused" }>>()
    const early = new Map<string, bigint>()
    const handle = (input: Input): void => {
      switch (input._tag) {
        case "Start":
          fork(Effect.matchEffect(backend.acquire(sessionId, input.name), {
            onFailure: (error) => Effect.sync(() => input.resume(Effect.die(error))),
            onSuccess: (reply) =>
              Effect.sync(() =>
                reply._tag === "Granted"
                  ? Mailbox.offer(box, { ...input, _tag: "Granted", token: reply.token })
                  : reply._tag === "HeldBy"
                  ? Mailbox.offer(box, { ...input, _tag: "Refused" })
                  : input.resume(Effect.dieMessage(`shellShape: ${reply._tag}`))
              )
          }))
          return
        case "Refused": {
          const token = early.get(input.name)
          if (token === undefined) return void waiting.set(input.name, input)
          early.delete(input.name)
          return handle({ ...input, _tag: "Granted", token })
        }
        case "Handed": {
          const refused = waiting.get(input.name)
          if (refused === undefined) return void early.set(input.name, input.token)
          waiting.delete(input.name)
          return handle({ ...refused, _tag: "Granted", token: input.token })
        }
        case "Granted":
          fork(Effect.ensuring(
            input.body,
            Effect.sync(() => Mailbox.offer(box, { _tag: "Exited", name: input.name, token: input.token, resume: input.resume }))
          ))
          return
        case "Exited":
          fork(Effect.ignore(backend.release(sessionId, input.name, input.token)))
          input.resume(Effect.void)
          return
      }
    }
    const listen = LeaseBackend.listenerOf(backend.hints)
    if (listen === undefined) return yield* Effect.dieMessage("shellShape: a backend whose hints have no listener")
    yield* listen((hint) => {
      if (hint._tag === "Granted" && hint.to === sessionId) {
        Mailbox.offer(box, { _tag: "Handed", name: hint.name, token: hint.token })
      }
    })
    const drain = Effect.suspend(() => {
      while (Mailbox.size(box) > 0) handle(Mailbox.poll(box))
      return Mailbox.waitForItem(box)
    })
    yield* Effect.forkScoped(Effect.whileLoop({ while: () => true, body: () => drain, step: () => undefined }))
    return (name: string, body: Effect.Effect<void>) =>
      Effect.async<void>((resume) => Mailbox.offer(box, { _tag: "Start", name, body, resume }))
  })

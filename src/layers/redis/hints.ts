/**
 * Hints: the messages the scripts publish on lease and group channels, decoded into the SPI's
 * `Hint`s and offered to a stream.
 *
 * On a lease channel (named like the lease key): `granted:<sid>:<token>`, the lease was handed to
 * that session (mode `node`); `released:<sid>`, it is reserved for that session (mode `cluster`, and
 * takeovers); plain `released`, anyone may try. On a group channel (named like the group key):
 * `joined`, `left` or `expired`, all read as "the membership changed".
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import { type BackendError, Hint, makeHintHub } from "../../LeaseBackend.js"
import type { Subscriber } from "./connection.js"
import type { Keys } from "./keys.js"
import * as Watches from "./watches.js"

/** The hint a message on `channel` carries, or `undefined` for a message this backend does not send. */
export const decoder = (k: Keys) => {
  const leaseHead = k.leasePrefix
  const groupHead = k.groupPrefix
  return (channel: string, message: string): Hint | undefined => {
    if (!channel.endsWith("}")) return undefined
    if (channel.startsWith(leaseHead)) {
      const name = channel.slice(leaseHead.length, -1)
      if (message === "released") return Hint.Released({ name })
      if (message.startsWith("released:")) return Hint.Released({ name, to: message.slice(9) })
      if (message.startsWith("granted:")) {
        const [to, token] = message.slice(8).split(":")
        return to !== undefined && token !== undefined && /^[1-9][0-9]*$/.test(token)
          ? Hint.Granted({ name, to, token: BigInt(token) })
          : undefined
      }
      return undefined
    }
    if (channel.startsWith(groupHead)) return Hint.GroupChanged({ group: channel.slice(groupHead.length, -1) })
    return undefined
  }
}

/** The hints of a backend, and the lease channels its subscriber hears. */
export interface Heard {
  readonly hints: Stream.Stream<Hint>
  readonly watches: Watches.Watches
}

/**
 * The hints stream, fed by the subscriber's messages (synchronously, so hints keep the order of the
 * messages, without a fiber per message); the client hears them in that callback
 * (`LeaseBackend.listenerOf`). At most 4,096 unread hints are kept for a stream subscriber: older
 * ones are dropped, and the engine's retries cover them. Group channels are heard by pattern (every
 * member needs every change); a lease channel only while a session of this backend waits for the
 * lease (`Watches`).
 */
export const make = (
  k: Keys,
  subscriber: Subscriber,
  onError: (error: unknown) => void
): Effect.Effect<Heard, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const hub = yield* Effect.acquireRelease(makeHintHub(4096), (hub) => hub.shutdown)
    const watches = yield* Watches.make(k.lease, subscriber, hub.emit, onError)
    const decode = decoder(k)
    subscriber.listen((channel, message) => {
      const hint = decode(channel, message)
      if (hint === undefined) return
      if (hint._tag === "Granted") watches.done(hint.to, hint.name)
      hub.emit(hint)
    }, watches.reconnected)
    yield* subscriber.psubscribe([k.groupPattern])
    return { hints: hub.hints, watches }
  })

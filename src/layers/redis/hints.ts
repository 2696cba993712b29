/**
 * Hints: the messages the scripts publish on session, lease and group channels, decoded into the
 * SPI's `Hint`s and offered to a stream.
 *
 * On a session's channel (named like the session key, mode `node`; heard by that session's backend
 * alone, see `Watches`): `granted:<token>:<name>`, the lease was handed to the session;
 * `released:<name>`, it is reserved for the session (a takeover); `wanted:<name>`, another session
 * queued for a lease the session caches. On a lease channel (named like the
 * lease key): `released:<sid>`, it is reserved for that session (mode `cluster`); plain `released`,
 * anyone may try; `granted:<sid>:<token>`, the lease was handed to that session: in mode `cluster` a pool's hand-off
 * (a hold, on the channel named like the hold's one-node key, or a writer, on the pool's), and the
 * plain hand-off message of earlier versions of the scripts (a store shared with clients of an
 * earlier version during an upgrade). On a group channel (named
 * like the group key): `joined`, `left` or `expired`, all read as "the membership changed".
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import { type BackendError, Hint, makeHintHub } from "../../LeaseBackend.js"
import type { Subscriber } from "./connection.js"
import type { Keys } from "./keys.js"
import type { Mode } from "./options.js"
import * as Watches from "./watches.js"

/** The hint a message on `channel` carries, or `undefined` for a message this backend does not send. */
export const decoder = (k: Keys) => {
  const leaseHead = k.leasePrefix
  const groupHead = k.groupPrefix
  const sessionHead = k.sessionPrefix
  return (channel: string, message: string): Hint | undefined => {
    if (!channel.endsWith("}")) return undefined
    if (channel.startsWith(sessionHead)) {
      const to = channel.slice(sessionHead.length, -1)
      if (message.startsWith("released:")) return Hint.Released({ name: message.slice(9), to })
      if (message.startsWith("wanted:")) return Hint.Wanted({ name: message.slice(7), holder: to })
      if (message.startsWith("granted:")) {
        const at = message.indexOf(":", 8)
        const token = message.slice(8, at)
        return at > 8 && /^[1-9][0-9]*$/.test(token)
          ? Hint.Granted({ name: message.slice(at + 1), to, token: BigInt(token) })
          : undefined
      }
      return undefined
    }
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
 * lease, and (mode `node`) the channel of each session of this backend while it lives (`Watches`).
 */
export const make = (
  mode: Mode,
  k: Keys,
  subscriber: Subscriber,
  onError: (error: unknown) => void
): Effect.Effect<Heard, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const hub = yield* Effect.acquireRelease(makeHintHub(4096), (hub) => hub.shutdown)
    const watches = yield* Watches.make(k.lease, mode === "node" ? k.session : undefined, subscriber, hub.emit, onError)
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

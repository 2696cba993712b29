/**
 * Which lease channels the subscriber hears. A client needs the messages of a lease only while one
 * of its sessions waits for it (refused, and neither granted nor withdrawn since): the hand-off grant,
 * the reservation or the plain `released` that ends its wait. So a lease's channel is subscribed when
 * an acquire is refused, not every lease's channel by pattern: an uncontended lock's release publishes
 * to a channel nobody hears (no wake-up of its own client for its own message), and a client does not
 * hear every release of every other client of the store.
 *
 * A message published between the refusing script and the subscription's taking effect is not heard.
 * So when the subscription was confirmed after the refused acquire was sent (or is still pending), the
 * backend emits `Released { name }` once it is confirmed: the candidate asks once more (its place in
 * the queue is kept), and the reply carries a hand-off it missed. A candidate whose acquire is still
 * in flight when the hint comes asks again right after the reply (`Engine`), so the hint may come
 * before the refusal reaches the client. After the first wait, a contended name costs nothing more:
 * the channel stays subscribed.
 *
 * A channel no session waits for stays subscribed for one to two `lingerMillis` (a contender that just
 * got the lease will likely wait for it again soon), then is unsubscribed. A waiting session that ends
 * (closed, or found expired) stops waiting. After the subscriber reconnects (ioredis subscribes again)
 * every waited name gets a `Released`, since messages published meanwhile were lost.
 *
 * What a client no longer hears: the release of a name it holds or led, by someone else (a store that
 * lost the client's session). Its renewal finds the lease gone, as it would after a lost message.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { Hint } from "../../LeaseBackend.js"
import type { Subscriber } from "./connection.js"

/** What the watches need of the subscriber connection: to subscribe and unsubscribe lease channels. */
export type Channels = Pick<Subscriber, "subscribe" | "unsubscribe">

export interface Watches {
  /** Before an acquire is sent: its turn, to compare with when its channel was confirmed. */
  readonly sent: () => number
  /** An acquire sent at `sentAt` was refused: hear the lease's channel while `sessionId` waits. */
  readonly refused: (sessionId: string, name: string, sentAt: number) => void
  /** `sessionId` no longer waits for `name`: granted (by a reply or a hand-off) or withdrawn. */
  readonly done: (sessionId: string, name: string) => void
  /** `sessionId` waits for nothing any more (closed, or found expired). */
  readonly ended: (sessionId: string) => void
  /** The subscriber connected again: every subscription is new, and what was published meanwhile lost. */
  readonly reconnected: () => void
  /** Channels subscribed or being subscribed (0: no wait to end, whatever a renewal lists). */
  readonly size: () => number
}

/** A lease channel: who waits for the lease, and since when the subscription is confirmed. */
interface Channel {
  readonly waiting: Set<string>
  /** The turn of the confirmation; `undefined` while `SUBSCRIBE` is in flight. */
  heardSince: number | undefined
  /** Nobody waited since the last sweep. */
  idle: boolean
}

/** How long an unwaited channel stays subscribed, at least (at most twice that). */
export const lingerMillis = 10_000

export const make = (
  channelOf: (name: string) => string,
  channels: Channels,
  emit: (hint: Hint) => void,
  onError: (error: unknown) => void
): Effect.Effect<Watches, never, Scope.Scope> =>
  Effect.gen(function*() {
    const byName = new Map<string, Channel>()
    // One counter orders sends and confirmations: all of them happen on the event loop's thread.
    let turn = 0
    const nudge = (name: string) => emit(Hint.Released({ name }))

    const subscribe = (name: string, channel: Channel) =>
      channels.subscribe(channelOf(name)).then(
        () => {
          if (byName.get(name) !== channel) return // unsubscribed meanwhile
          channel.heardSince = ++turn
          if (channel.waiting.size > 0) nudge(name)
        },
        (error: unknown) => {
          // The waiters fall back on their retries; the next refusal subscribes again. (No hint: a
          // candidate asking again at once would be refused at once, as often as the subscriber fails.)
          if (byName.get(name) === channel) byName.delete(name)
          onError(error)
        }
      )

    const sweep = Effect.sync(() => {
      for (const [name, channel] of byName) {
        if (channel.waiting.size > 0) channel.idle = false
        else if (!channel.idle) channel.idle = true
        else {
          byName.delete(name)
          channels.unsubscribe(channelOf(name)).catch(onError)
        }
      }
    })
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(lingerMillis)))

    return {
      sent: () => ++turn,
      refused: (sessionId, name, sentAt) => {
        const channel = byName.get(name)
        if (channel === undefined) {
          const created: Channel = { waiting: new Set([sessionId]), heardSince: undefined, idle: false }
          byName.set(name, created)
          subscribe(name, created)
          return
        }
        channel.waiting.add(sessionId)
        channel.idle = false
        // Confirmed after the acquire was sent: a message between its script and the confirmation
        // may be lost. (Still pending: the confirmation nudges.)
        if (channel.heardSince !== undefined && channel.heardSince > sentAt) nudge(name)
      },
      done: (sessionId, name) => {
        byName.get(name)?.waiting.delete(sessionId)
      },
      ended: (sessionId) => {
        for (const channel of byName.values()) channel.waiting.delete(sessionId)
      },
      reconnected: () => {
        for (const [name, channel] of byName) {
          if (channel.heardSince === undefined) continue // its confirmation nudges
          channel.heardSince = ++turn
          if (channel.waiting.size > 0) nudge(name)
        }
      },
      size: () => byName.size
    }
  })

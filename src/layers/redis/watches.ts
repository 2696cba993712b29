/**
 * Which lease and session channels the subscriber hears. A client needs the messages of a lease only
 * while one of its sessions waits for it (refused, and neither granted nor withdrawn since): the plain
 * `released` and (mode `cluster`) the reservation that end its wait; in mode `node` the hand-off grant
 * and the reservation come on the session's channel (below). So a lease's channel is subscribed when
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
 *
 * Mode `node` tells a waiter its hand-off grant (or a reservation) on the channel of its session, not
 * the lease's: each contended release wakes the one client it is for, not every client waiting for the
 * name (with 8 contenders in one process, 8 messages per section before, 1 now). A session's channel
 * is subscribed when the session opens, and `openSession` waits for the confirmation while the
 * subscriber is up (not while it is down: that must not keep sessions from opening); it is
 * unsubscribed when the session ends. A grant published before the subscription took effect is not
 * heard, so the same rule as for a lease channel applies: a refusal of an acquire sent before the
 * session's channel was confirmed is nudged (at once if it is confirmed, by the confirmation if it is
 * pending). If the subscription fails, the session still works: a grant it does not hear shows in
 * its next renewal.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { Hint } from "../../LeaseBackend.js"
import type { Subscriber } from "./connection.js"

/** What the watches need of the subscriber connection: to subscribe and unsubscribe channels. */
export type Channels = Pick<Subscriber, "subscribe" | "unsubscribe" | "isReady">

export interface Watches {
  /** Before an acquire is sent: its turn, to compare with when its channel was confirmed. */
  readonly sent: () => number
  /** An acquire sent at `sentAt` was refused: hear the lease's channel while `sessionId` waits. */
  readonly refused: (sessionId: string, name: string, sentAt: number) => void
  /** `sessionId` no longer waits for `name`: granted (by a reply or a hand-off) or withdrawn. */
  readonly done: (sessionId: string, name: string) => void
  /** `sessionId` waits for nothing any more (closed, or found expired). */
  readonly ended: (sessionId: string) => void
  /**
   * `sessionId` was opened: hear its session's channel (mode `node`). Resolves when the server
   * confirmed it or it failed (told to `onError`); at once when the subscriber is not up.
   */
  readonly opened: (sessionId: string) => Promise<void>
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
  /** The channel of a session's own messages (mode `node`); `undefined`: none (mode `cluster`). */
  sessionChannelOf: ((sessionId: string) => string) | undefined,
  channels: Channels,
  emit: (hint: Hint) => void,
  onError: (error: unknown) => void
): Effect.Effect<Watches, never, Scope.Scope> =>
  Effect.gen(function*() {
    const byName = new Map<string, Channel>()
    /** Sessions whose channel is subscribed: the turn of its confirmation (`undefined`: in flight). */
    const sessions = new Map<string, number | undefined>()
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
        if (channel.heardSince !== undefined && channel.heardSince > sentAt) return nudge(name)
        const sessionSince = sessions.get(sessionId)
        if (sessionSince !== undefined && sessionSince > sentAt) nudge(name)
      },
      done: (sessionId, name) => {
        byName.get(name)?.waiting.delete(sessionId)
      },
      ended: (sessionId) => {
        for (const channel of byName.values()) channel.waiting.delete(sessionId)
        if (sessionChannelOf !== undefined && sessions.delete(sessionId)) {
          channels.unsubscribe(sessionChannelOf(sessionId)).catch(onError)
        }
      },
      opened: (sessionId) => {
        if (sessionChannelOf === undefined) return Promise.resolve()
        sessions.set(sessionId, undefined)
        const ready = channels.isReady()
        const confirmed = channels.subscribe(sessionChannelOf(sessionId)).then(
          () => {
            if (!sessions.has(sessionId)) return // ended meanwhile
            sessions.set(sessionId, ++turn)
            for (const [name, channel] of byName) if (channel.waiting.has(sessionId)) nudge(name)
          },
          onError
        )
        return ready ? confirmed : Promise.resolve()
      },
      reconnected: () => {
        for (const [sessionId, since] of sessions) if (since !== undefined) sessions.set(sessionId, ++turn)
        for (const [name, channel] of byName) {
          if (channel.heardSince === undefined) continue // its confirmation nudges
          channel.heardSince = ++turn
          if (channel.waiting.size > 0) nudge(name)
        }
      },
      size: () => byName.size
    }
  })

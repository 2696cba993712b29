/**
 * PostgreSQL hints: the routines `pg_notify` one channel (`<prefix>hints`) in the transaction of the
 * change, with `r:<lease>` for a release whose queued waiters were all gone or had to wait out a
 * lock-delay (a release with nobody queued notifies nothing) and for each lease of a closed session,
 * `h:<session>:<token>:<lease>` for a release that handed the lease to a waiter, and `g:<group>`
 * for a membership change. They are received on one dedicated connection of the raw `pg` driver
 * (`@effect/sql-pg`'s own `listen` stops silently after a lost connection), which reconnects with a
 * capped backoff. Notifications sent while it was disconnected are lost: after each (re)connection
 * it emits a `Released` hint for every name an acquire of this backend was refused since the last
 * connection (the names a local candidate may be waiting on), so no waiter sleeps through a release
 * it missed.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { sessionIdSource } from "../../internal/sessionId.js"
import { Hint, makeHintHub } from "../../LeaseBackend.js"
import type { Waiting } from "./waiting.js"

/** The part of a `pg` `Client` the listener uses. */
export interface ListenClient {
  connect(): Promise<unknown>
  query(text: string): Promise<unknown>
  end(): Promise<unknown>
  on(event: "notification", listener: (message: { readonly channel: string; readonly payload?: string }) => void): unknown
  on(event: "error", listener: (error: Error) => void): unknown
  on(event: "end", listener: () => void): unknown
}

const grantedPattern = new RegExp(`^(${sessionIdSource}):([1-9][0-9]{0,18}):(.+)$`)
const wantedPattern = new RegExp(`^(${sessionIdSource}):(.+)$`)

/** The hint a notification payload carries, or `undefined` for one this backend does not send. */
export const decode = (payload: string | undefined): Hint | undefined => {
  if (payload === undefined || payload.length < 3 || payload[1] !== ":") return undefined
  const subject = payload.slice(2)
  switch (payload[0]) {
    case "r":
      return Hint.Released({ name: subject })
    case "g":
      return Hint.GroupChanged({ group: subject })
    case "w": {
      // `w:<holder>:<name>`: a session was refused the lease `holder` caches.
      const match = wantedPattern.exec(subject)
      return match === null ? undefined : Hint.Wanted({ name: match[2]!, holder: match[1]! })
    }
    case "h": {
      // `h:<session>:<token>:<name>`: the name last, since it may contain `:`.
      const match = grantedPattern.exec(subject)
      return match === null ? undefined : Hint.Granted({ name: match[3]!, to: match[1]!, token: BigInt(match[2]!) })
    }
    default:
      return undefined
  }
}

/**
 * Starts the listener in the scope and returns the hints stream. `connect` makes a new, unconnected
 * client each time.
 */
export const make = (
  connect: () => ListenClient,
  channel: string,
  waiting: Waiting,
  reconnectAfter: Duration.DurationInput = "100 millis"
): Effect.Effect<Stream.Stream<Hint>, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Straight from the driver's callback to the client (`LeaseBackend.listenerOf`), and to any
    // stream subscriber: no fiber and no stream hop on the hand-over's path.
    const hub = yield* Effect.acquireRelease(makeHintHub(4096), (hub) => hub.shutdown)
    const publish = hub.emit
    // The connection as a stream that emits nothing: it fails on a connection error, which restarts it.
    const connection = Stream.asyncScoped<never, unknown>((emit) =>
      Effect.gen(function*() {
        const client = yield* Effect.acquireRelease(
          Effect.sync(connect),
          (client) => Effect.promise(() => client.end().catch(() => undefined))
        )
        client.on("notification", (message) => {
          const hint = message.channel === channel ? decode(message.payload) : undefined
          if (hint !== undefined) publish(hint)
        })
        client.on("error", (error) => void emit.fail(error))
        client.on("end", () => void emit.fail(new Error("the LISTEN connection ended")))
        yield* Effect.tryPromise(() => client.connect())
        yield* Effect.tryPromise(() => client.query(`LISTEN "${channel}"`))
        for (const name of yield* waiting.drain) publish(Hint.Released({ name }))
      })
    )
    const backoff = Schedule.union(
      Schedule.exponential(Duration.decode(reconnectAfter)),
      Schedule.spaced(Duration.seconds(5))
    )
    yield* connection.pipe(Stream.retry(backoff), Stream.runDrain, Effect.forkScoped)
    return hub.hints
  })

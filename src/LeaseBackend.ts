/**
 * The LeaseBackend SPI: everything the client needs from a store, as a `Context.Tag` of functions.
 *
 * Rules every implementation keeps (checked by the TCK in `test/tck/`):
 * - each method makes a bounded number of round trips, independent of how many leases or groups exist;
 * - every time in a reply is a *duration* measured on the backend's own clock, never a timestamp;
 * - a session the backend expired is never revived: `keepAlive` and `acquire` answer `Expired`;
 * - session ids are never reused; tokens of one name only rise, forever, for a given store;
 * - a timed-out or failed call fails with `BackendError`, never succeeds silently.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"

/** A backend call failed, timed out or answered something the client cannot read. */
export class BackendError extends Data.TaggedError("BackendError")<{
  readonly backend: string
  readonly operation: string
  readonly cause: unknown
}> {
  override get message() {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `${this.backend} ${this.operation} failed: ${cause}`
  }
}

/** A session the backend opened, with its time to live on the backend's clock. */
export interface OpenedSession {
  readonly sessionId: string
  readonly remaining: Duration.Duration
}

/** A lease a session holds. */
export interface HeldLease {
  readonly name: string
  readonly token: bigint
}

/** The live members of a group the session belongs to, as of the renewal. */
export interface GroupView {
  readonly group: string
  readonly members: ReadonlyArray<string>
}

/** Answer to `keepAlive`. */
export type KeepAliveReply = Data.TaggedEnum<{
  /** The session lives on for `remaining` (backend clock); it holds exactly `leases` and belongs to `groups`. */
  Live: {
    readonly remaining: Duration.Duration
    readonly leases: ReadonlyArray<HeldLease>
    readonly groups: ReadonlyArray<GroupView>
  }
  /** The session is gone for good; open a new one. */
  Expired: {}
}>
export const KeepAliveReply = Data.taggedEnum<KeepAliveReply>()

/** Answer to `acquire`. */
export type AcquireReply = Data.TaggedEnum<{
  /** The session now holds the lease with this fencing token (> 0, above every earlier token of the name). */
  Granted: { readonly token: bigint }
  /**
   * Another session holds it. `remaining`, where the backend knows it, is how long the holder's
   * session has left on the backend's clock (so a candidate can try again just after it).
   */
  HeldBy: { readonly token: bigint | undefined; readonly remaining: Duration.Duration | undefined }
  /** The requesting session is gone for good. */
  Expired: {}
}>
export const AcquireReply = Data.taggedEnum<AcquireReply>()

/** Answer to `join`. */
export type JoinReply = "Joined" | "Expired"

/** Pushes from the backend that let a client act before its next poll. */
export type Hint = Data.TaggedEnum<{
  /**
   * The lease `name` was released (or its session closed, or its holder was found gone): candidates
   * may try at once. `to`, when present, is the session id the backend reserved the lease for (the
   * head of its waiter queue, for a fair FIFO hand-off): only that session should try now, the others
   * would only be told `HeldBy` (and queued) until the reservation is taken or runs out. Absent when
   * anyone may try (no queue, or a backend without reservations).
   */
  Released: { readonly name: string; readonly to?: string | undefined }
  /**
   * The backend gave the freed lease `name` straight to the waiting session `to`, with `token` (a
   * server-side hand-off: the waiter holds it without another round trip). The session `to` adopts it
   * if one of its candidates still wants it and releases it otherwise; a lost message costs a delay
   * only, since the next renewal lists the lease among the session's own.
   */
  Granted: { readonly name: string; readonly to: string; readonly token: bigint }
  /** The membership of `group` changed. */
  GroupChanged: { readonly group: string }
}>
export const Hint = Data.taggedEnum<Hint>()

/** The store behind the client. */
export interface LeaseBackendService {
  /** A short name for errors, metrics and spans: `memory`, `redis`, `postgres`, `mysql`, `zookeeper`. */
  readonly backend: string
  /** Open a new session that expires after `ttl` of silence. The backend may grant less. */
  readonly openSession: (ttl: Duration.Duration) => Effect.Effect<OpenedSession, BackendError>
  /** Renew the session for `ttl`, in one round trip per node whatever the number of leases. */
  readonly keepAlive: (sessionId: string, ttl: Duration.Duration) => Effect.Effect<KeepAliveReply, BackendError>
  /** Close the session: release all its leases and leave all its groups. A no-op for an unknown session. */
  readonly closeSession: (sessionId: string) => Effect.Effect<void, BackendError>
  /** Try to take the lease `name` for the session. */
  readonly acquire: (sessionId: string, name: string) => Effect.Effect<AcquireReply, BackendError>
  /** Release the lease `name`: a no-op unless the session still holds it with exactly `token`. */
  readonly release: (sessionId: string, name: string, token: bigint) => Effect.Effect<void, BackendError>
  /** Make the session a member of `group` for as long as it lives. */
  readonly join: (sessionId: string, group: string) => Effect.Effect<JoinReply, BackendError>
  /** Remove the session from `group`. */
  readonly leave: (sessionId: string, group: string) => Effect.Effect<void, BackendError>
  /** The live members (session ids) of `group`, expired sessions excluded. */
  readonly members: (group: string) => Effect.Effect<ReadonlyArray<string>, BackendError>
  /** Released, granted and group-change pushes; `Stream.empty` for a backend that has none. */
  readonly hints: Stream.Stream<Hint>
}

export class LeaseBackend extends Context.Tag("simba/LeaseBackend")<LeaseBackend, LeaseBackendService>() {}

/**
 * Loads a backend's driver (an optional peer dependency) when its layer is built, never when the
 * library is imported: `import("ioredis")` inside the layer, not at the top of a module. A missing
 * package fails with a `BackendError` that names the package and the install line, so a user who
 * chose Redis but did not install `ioredis` is told exactly what to do.
 */
export const loadDriver = <A>(
  backend: string,
  packageName: string,
  install: string,
  load: () => Promise<A>
): Effect.Effect<A, BackendError> =>
  Effect.tryPromise({
    try: load,
    catch: (cause) =>
      new BackendError({
        backend,
        operation: "loadDriver",
        cause: isModuleNotFound(cause)
          ? `the ${backend} backend needs the package ${packageName}, which is not installed: ${install}`
          : cause
      })
  })

const isModuleNotFound = (cause: unknown): boolean =>
  typeof cause === "object" && cause !== null && "code" in cause &&
  (cause.code === "ERR_MODULE_NOT_FOUND" || cause.code === "MODULE_NOT_FOUND")

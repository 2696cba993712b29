/**
 * The LeaseBackend SPI: everything the client needs from a store, as a `Context.Tag` of functions,
 * and `make(store)`, the one constructor every backend is built with, which adds the rules the
 * backends share (checked input, unknown sessions, `BackendError`, spans and metrics) so a backend
 * writes only its store operations. The rules every implementation keeps (bounded round trips,
 * durations on the backend's clock, sessions never revived, tokens that only rise, failures never
 * silent) are in docs/design.md, "The SPI"; the TCK in `test/tck/` checks them. The error type is
 * in `internal/backendError.ts`, the spans and metrics of every call in `internal/instrumentCall.ts`.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as MetricLabel from "effect/MetricLabel"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Tracer from "effect/Tracer"
import { BackendError } from "./internal/backendError.js"
import { instrumentCall, isDefaultTracer } from "./internal/instrumentCall.js"
import { brokenRule, brokenSpiRule } from "./LeaseName.js"

export { BackendError } from "./internal/backendError.js"

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

/** A session the store knows, as `inspect` lists it. */
export interface SessionStatus {
  readonly sessionId: string
  /** How long the session lives unless renewed, on the backend's clock; `undefined` where the store cannot tell. */
  readonly remaining: Duration.Duration | undefined
}

/** A lease name the store has seen, held or free, as `inspect` lists it. */
export interface LeaseStatus {
  readonly name: string
  /** The session holding it, or `undefined` when it is free. */
  readonly holder: string | undefined
  /** The holder's token, or for a free lease the last token granted (the floor of the next one). */
  readonly token: bigint
  /** The sessions queued for it, first in line first (empty for a store without a queue). */
  readonly waiters: ReadonlyArray<string>
}

/**
 * What a store holds, for operators (`simba status`): its live sessions, every lease name it keeps
 * (held or free) and every group with live members. A read: it changes nothing, and what it lists
 * may have moved on by the time it is printed.
 */
export interface Inventory {
  readonly sessions: ReadonlyArray<SessionStatus>
  readonly leases: ReadonlyArray<LeaseStatus>
  readonly groups: ReadonlyArray<GroupView>
}

/** Answer to `keepAlive`. */
export type KeepAliveReply = Data.TaggedEnum<{
  /**
   * The session lives on for `remaining` (backend clock). `version` names the session's set of
   * leases as of this reply: the backend changes it whenever that set changes (a grant, a hand-off
   * grant, a release, a lease taken away), never otherwise. `leases` is the set, or `undefined` when
   * it is unchanged since the version the client passed as `known`, so renewing a session that holds
   * 1,000 unchanged leases sends none of them. `groups` are the views of the groups the session
   * belongs to, always listed (their members change with other sessions).
   */
  Live: {
    readonly remaining: Duration.Duration
    readonly version: string
    readonly leases: ReadonlyArray<HeldLease> | undefined
    readonly groups: ReadonlyArray<GroupView>
  }
  /** The session is gone for good; open a new one. */
  Expired: {}
}>
export const KeepAliveReply = Data.taggedEnum<KeepAliveReply>()

/** Answer to `acquire`. */
export type AcquireReply = Data.TaggedEnum<{
  /**
   * The session now holds the lease with this fencing token (> 0, above every earlier token of the
   * name). `reserved` (an acquire that asked to `reserve` tokens): the grant's block, the tokens
   * `token - reserved + 1` to `token`, all above every earlier token of the name and below every
   * later one, for a client that caches the lease to give its bodies without a round trip (the lease
   * is held, released and listed with `token`, the block's last). Absent: a block of one.
   */
  Granted: { readonly token: bigint; readonly reserved?: number | undefined }
  /**
   * Another session holds it. `remaining`, where the backend knows it, is how long the holder's
   * session has left on the backend's clock (so a candidate can try again just after it).
   */
  HeldBy: { readonly token: bigint | undefined; readonly remaining: Duration.Duration | undefined }
  /** The requesting session is gone for good. */
  Expired: {}
  /**
   * Never granted as asked: the name is held (or waited for) as another kind, a semaphore of another
   * limit, or a lock, and stays so while it has holders or waiters. `held` and `asked` describe both,
   * as the error the caller gets prints them (`semaphore of 3 permits`, `read-write lock`).
   */
  Conflict: { readonly held: string; readonly asked: string }
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
   * if one of its candidates still wants it and `token` is above every token that candidate has seen
   * (so a waiter's `HeldBy` carries a token below any later grant to it: the holder's, or the pool's
   * counter); a candidate that has seen none asks again (acquire is idempotent); any other such lease
   * is released. A lost message costs a delay only, since the next renewal lists the lease among the
   * session's own.
   */
  Granted: { readonly name: string; readonly to: string; readonly token: bigint }
  /** The membership of `group` changed. */
  GroupChanged: { readonly group: string }
  /**
   * Another session queued for the lease `name` that the session `holder` holds with a reservation
   * (a cached lease): its client gives the lease up as soon as no body of its own runs. Advisory: a
   * lost message costs the waiter at most the cache's `keep`.
   */
  Wanted: { readonly name: string; readonly holder: string }
}>
export const Hint = Data.taggedEnum<Hint>()

/** The store behind the client. */
export interface LeaseBackendService {
  /** A short name for errors, metrics and spans: `memory`, `redis`, `postgres`, `mysql`, `zookeeper`. */
  readonly backend: string
  /**
   * Whether the store grants holds (`LeaseName.Hold`: semaphore permits and read holds, leases named
   * by `LeaseName.holdName`); a store without them refuses such names as bad input.
   */
  readonly holds: boolean
  /** Open a new session that expires after `ttl` of silence. The backend may grant less. */
  readonly openSession: (ttl: Duration.Duration) => Effect.Effect<OpenedSession, BackendError>
  /**
   * Renew the session for `ttl`, in one round trip per node whatever the number of leases. `known` is
   * the `version` of the last `Live` reply the client read: the reply omits the lease list when the
   * set is still that one. Without `known` the list is always sent.
   */
  readonly keepAlive: (
    sessionId: string,
    ttl: Duration.Duration,
    known?: string | undefined
  ) => Effect.Effect<KeepAliveReply, BackendError>
  /** Close the session: release all its leases and leave all its groups. A no-op for an unknown session. */
  readonly closeSession: (sessionId: string) => Effect.Effect<void, BackendError>
  /**
   * Try to take the lease `name` for the session. `reserve` (1 to `maxReserve`, default 1): reserve
   * a block of that many tokens with a grant (see `AcquireReply.Granted`); a store may grant fewer,
   * down to one. A session that already holds the lease is answered its token, with no new block.
   */
  readonly acquire: (sessionId: string, name: string, reserve?: number) => Effect.Effect<AcquireReply, BackendError>
  /** Release the lease `name`: a no-op unless the session still holds it with exactly `token`. */
  readonly release: (sessionId: string, name: string, token: bigint) => Effect.Effect<void, BackendError>
  /**
   * The session no longer waits for the lease `name` (its candidate stopped, timed out or was
   * interrupted): take it out of the name's waiter queue, so a release does not hand the lease to it
   * and nobody waits behind it. A no-op when it does not wait (or the backend keeps no queue), and
   * never a release: a lease the session holds stays held.
   */
  readonly withdraw: (sessionId: string, name: string) => Effect.Effect<void, BackendError>
  /** Make the session a member of `group` for as long as it lives. */
  readonly join: (sessionId: string, group: string) => Effect.Effect<JoinReply, BackendError>
  /** Remove the session from `group`. */
  readonly leave: (sessionId: string, group: string) => Effect.Effect<void, BackendError>
  /** The live members (session ids) of `group`, expired sessions excluded. */
  readonly members: (group: string) => Effect.Effect<ReadonlyArray<string>, BackendError>
  /** Released, granted and group-change pushes; `Stream.empty` for a backend that has none. */
  readonly hints: Stream.Stream<Hint>
  /**
   * The `remaining` this backend answers for a session the store granted the whole `ttl` asked, for
   * a backend whose own rule answers less (ZooKeeper: a renewal proves 5/12 of the session timeout).
   * The engine then publishes `SessionLeaseShortened` only for a grant below it: the store granted
   * less than asked. Absent: every shortened cadence is published.
   */
  readonly remainingFor?: ((ttl: Duration.Duration) => Duration.Duration) | undefined
  /**
   * Optional, read-only: what the store holds (`Inventory`), sorted by session id, lease name and
   * group. Its cost grows with the store's contents, so it is for operators, never for the client's
   * own path. Absent for a store that cannot list itself.
   */
  readonly inspect?: Effect.Effect<Inventory, BackendError> | undefined
}

export class LeaseBackend extends Context.Tag("simba/LeaseBackend")<LeaseBackend, LeaseBackendService>() {}

// ---------------------------------------------------------------------------------------------------
// Hints heard without the stream
// ---------------------------------------------------------------------------------------------------

/** Calls `onHint` for every hint from now until the scope closes, in the producer's own callback. */
export type ListenHints = (onHint: (hint: Hint) => void) => Effect.Effect<void, never, Scope.Scope>

const listenKey: unique symbol = Symbol.for("simba/LeaseBackend/listenHints")

/**
 * The direct way to hear `hints`, when the backend that made the stream offers one: the client's
 * shell then gets each hint in the driver's callback, without a subscription fiber and a stream
 * hop between the message and its loop (a hop on every hand-over's path). A stream that a wrapper
 * replaced (a test kit delaying or dropping hints) has none, and is read as a stream.
 */
export const listenerOf = (hints: Stream.Stream<Hint>): ListenHints | undefined =>
  (hints as Stream.Stream<Hint> & { readonly [listenKey]?: ListenHints })[listenKey]

/** A backend's hints: `emit` offers one to the stream's subscribers and to the direct listeners. */
export interface HintHub {
  readonly emit: (hint: Hint) => void
  readonly hints: Stream.Stream<Hint>
  /** Ends the stream's subscriptions (a backend whose scope closes). */
  readonly shutdown: Effect.Effect<void>
}

/**
 * Makes a backend's hint hub. `capacity`: unread hints a slow stream subscriber may keep (later ones
 * drop the oldest: hints are advisory, the engine's retries cover a lost one); unbounded without it.
 */
export const makeHintHub = (capacity?: number): Effect.Effect<HintHub> =>
  Effect.map(capacity === undefined ? PubSub.unbounded<Hint>() : PubSub.sliding<Hint>(capacity), (pubsub) => {
    const listeners = new Set<(hint: Hint) => void>()
    const listen: ListenHints = (onHint) =>
      Effect.acquireRelease(Effect.sync(() => void listeners.add(onHint)), () => Effect.sync(() => void listeners.delete(onHint)))
    return {
      emit: (hint) => {
        // Never throws, even once the PubSub is shut down.
        pubsub.unsafeOffer(hint)
        for (const onHint of listeners) onHint(hint)
      },
      hints: Object.assign(Stream.fromPubSub(pubsub), { [listenKey]: listen }),
      shutdown: PubSub.shutdown(pubsub)
    }
  })

// ---------------------------------------------------------------------------------------------------
// Calls without a fiber
// ---------------------------------------------------------------------------------------------------

/** The answer of a direct call, given to its callback once. */
export type Done<A> = (answer: Either.Either<A, BackendError>) => void

/** What a direct call takes from its caller's fiber: the clock and metric labels its metrics use. */
export interface CallContext {
  readonly clock: Clock.Clock
  readonly metricLabels: ReadonlyArray<MetricLabel.MetricLabel>
}

/**
 * The operations on a client's every lock and renewal, started without a fiber: the caller (the
 * client's loop) starts the call and the driver's callback answers `done`. Same rules, metrics and
 * answers as the service's Effects; no span (the client uses these only while no tracer is installed).
 */
export interface DirectCalls {
  readonly keepAlive?:
    | ((context: CallContext, sessionId: string, ttlMillis: number, known: string | undefined, done: Done<KeepAliveReply>) => void)
    | undefined
  readonly acquire?:
    | ((context: CallContext, sessionId: string, name: string, reserve: number, done: Done<AcquireReply>) => void)
    | undefined
  readonly release?: ((context: CallContext, sessionId: string, name: string, token: bigint, done: Done<void>) => void) | undefined
}

/** A store's direct operations: its Effects' arguments (checked, as `Store` says) and a callback. */
export interface StoreDirect {
  readonly keepAlive?:
    | ((sessionId: string, ttlMillis: number, known: string | undefined, done: (answer: Either.Either<KeepAliveReply, unknown>) => void) => void)
    | undefined
  readonly acquire?:
    | ((sessionId: string, name: string, reserve: number, done: (answer: Either.Either<AcquireReply, unknown>) => void) => void)
    | undefined
  readonly release?: ((sessionId: string, name: string, token: bigint, done: (answer: Either.Either<void, unknown>) => void) => void) | undefined
}

const directKey: unique symbol = Symbol.for("simba/LeaseBackend/direct")

/**
 * The direct form of the service's operations, where the backend offers one and a caller whose
 * fiber has `tracer` may use it (only without a tracer installed: a direct call opens no span).
 * Each is found on its operation's own function, so a wrapper that replaces an operation (a test kit
 * counting or delaying acquires) replaces its direct form too, and the client calls the wrapper.
 */
export const directOf = (service: LeaseBackendService, tracer: Tracer.Tracer): DirectCalls | undefined => {
  if (!isDefaultTracer(tracer)) return undefined
  type Marked<F> = F & { readonly [directKey]?: unknown }
  const keepAlive = (service.keepAlive as Marked<typeof service.keepAlive>)[directKey] as DirectCalls["keepAlive"]
  const acquire = (service.acquire as Marked<typeof service.acquire>)[directKey] as DirectCalls["acquire"]
  const release = (service.release as Marked<typeof service.release>)[directKey] as DirectCalls["release"]
  return keepAlive === undefined && acquire === undefined && release === undefined ? undefined : { keepAlive, acquire, release }
}

/** `operation` with its direct form attached (see `directOf`). */
const withDirect = <F extends object>(operation: F, direct: unknown): F =>
  direct === undefined ? operation : Object.assign(operation, { [directKey]: direct })

// ---------------------------------------------------------------------------------------------------
// The constructor every backend is built with
// ---------------------------------------------------------------------------------------------------

/**
 * What a backend author writes: the store's own operations. `make` adds every rule the backends
 * share, so a store operation is only ever called with checked input:
 * - ttls arrive as whole milliseconds, finite and at least 1 (a bad ttl fails before the store);
 * - lease and group names keep the naming rules (`LeaseName`); a bad one fails before the store;
 * - a session id `isSessionId` refuses names no session of this store: `keepAlive`, `acquire` and
 *   `join` answer `Expired`, `release`, `leave` and `closeSession` do nothing, without a round trip;
 *   so does a release of a token that no grant can have (`<= 0`);
 * - any failure becomes `BackendError { backend, operation, cause }` (a store may fail with its own
 *   `BackendError` to choose the message); a `Live` reply that omits the lease list although the
 *   client did not name that version is refused as a `BackendError`;
 * - each call gets a span `simba.<operation>` and the metrics `simba_backend_calls_total` (by backend,
 *   operation and outcome) and `simba_backend_call_duration` (`_seconds` at `/metrics`).
 */
export interface Store {
  /** A short name for errors, metrics and spans: `memory`, `redis`, `postgres`, `mysql`, `zookeeper`. */
  readonly backend: string
  /** Whether the store grants holds (see `LeaseBackendService.holds`). Default: `false`. */
  readonly holds?: boolean | undefined
  /** Whether `sessionId` has the form of this store's session ids. Default: any non-empty string. */
  readonly isSessionId?: ((sessionId: string) => boolean) | undefined
  readonly openSession: (ttlMillis: number) => Effect.Effect<OpenedSession, unknown>
  readonly keepAlive: (
    sessionId: string,
    ttlMillis: number,
    known: string | undefined
  ) => Effect.Effect<KeepAliveReply, unknown>
  readonly closeSession: (sessionId: string) => Effect.Effect<void, unknown>
  /** `reserve`: checked, 1 when the caller asked for none; a store that keeps no blocks ignores it. */
  readonly acquire: (sessionId: string, name: string, reserve: number) => Effect.Effect<AcquireReply, unknown>
  readonly release: (sessionId: string, name: string, token: bigint) => Effect.Effect<void, unknown>
  /** See `LeaseBackendService.withdraw`. Default: a no-op, for a store that keeps no waiter queue. */
  readonly withdraw?: ((sessionId: string, name: string) => Effect.Effect<void, unknown>) | undefined
  readonly join: (sessionId: string, group: string) => Effect.Effect<JoinReply, unknown>
  readonly leave: (sessionId: string, group: string) => Effect.Effect<void, unknown>
  readonly members: (group: string) => Effect.Effect<ReadonlyArray<string>, unknown>
  readonly hints: Stream.Stream<Hint>
  /**
   * Optional: the same operations started from a driver's callback, without an Effect (see
   * "Calls without a fiber"). Each must answer `done` exactly once, as its Effect would have.
   */
  readonly direct?: StoreDirect | undefined
  /** See `LeaseBackendService.inspect`; any order (`make` sorts). Default: absent. */
  readonly inspect?: Effect.Effect<Inventory, unknown> | undefined
}

/**
 * The most tokens one grant may reserve (`acquire`'s `reserve`): a crash of a caching client wastes
 * at most this many, and tokens (about 2^51 now, floored by the stores' clocks in microseconds) stay
 * far below 2^63, the limit of the SQL `bigint` fence columns.
 */
export const maxReserve = 1024

/** The operations of the SPI, as named in errors, spans and metrics. */
export type Operation = Exclude<keyof LeaseBackendService, "backend" | "hints">

/** Builds the `LeaseBackend` service from a store's operations (see `Store` for what it adds). */
export const make = (store: Store): LeaseBackendService => {
  const backend = store.backend
  const isSessionId = store.isSessionId ?? ((sessionId: string) => sessionId.length > 0)
  const instrument = instrumentCall(backend)
  const open = instrument("openSession")
  const renew = instrument("keepAlive")
  const closing = instrument("closeSession")
  const acquiring = instrument("acquire")
  const releasing = instrument("release")
  const withdrawing = instrument("withdraw")
  const storeWithdraw = store.withdraw
  const joining = instrument("join")
  const leaving = instrument("leave")
  const listing = instrument("members")
  const inspecting = instrument("inspect")

  const problem = (operation: Operation, cause: string) => new BackendError({ backend, operation, cause })
  const invalid = (operation: Operation, cause: string) => Effect.fail(problem(operation, cause))
  const ttlRule = (millis: number, shown: string): string | undefined =>
    Number.isFinite(millis) && millis >= 1 ? undefined : `ttl must be a finite duration of at least 1 ms (got ${shown})`
  const withTtl = <A>(
    operation: Operation,
    ttl: Duration.Duration,
    f: (ttlMillis: number) => Effect.Effect<A, unknown>
  ): Effect.Effect<A, unknown> => {
    const millis = Duration.toMillis(ttl)
    const rule = ttlRule(millis, Duration.format(ttl))
    return rule === undefined ? f(Math.ceil(millis)) : invalid(operation, rule)
  }
  const holds = store.holds === true
  const named = (name: string, rule: string | undefined): string | undefined =>
    rule === undefined ? undefined : `invalid name ${JSON.stringify(name)}: ${rule}`
  /** A lease name, or a hold name where the store grants holds. */
  const nameRule = (name: string): string | undefined =>
    named(name, holds ? brokenSpiRule(name) : brokenRule(name))
  const withName = <A>(operation: Operation, name: string, f: () => Effect.Effect<A, unknown>): Effect.Effect<A, unknown> => {
    const rule = nameRule(name)
    return rule === undefined ? f() : invalid(operation, rule)
  }
  const withGroupName = <A>(operation: Operation, group: string, f: () => Effect.Effect<A, unknown>): Effect.Effect<A, unknown> => {
    const rule = named(group, brokenRule(group))
    return rule === undefined ? f() : invalid(operation, rule)
  }
  const reserveRule = (reserve: number): string | undefined =>
    Number.isInteger(reserve) && reserve >= 1 && reserve <= maxReserve
      ? undefined
      : `reserve must be a whole number from 1 to ${maxReserve} (got ${reserve})`
  /** What is wrong with a grant's block (`undefined`: nothing): never more than asked, at least one. */
  const overReserved = (reply: AcquireReply, reserve: number): string | undefined => {
    if (reply._tag !== "Granted" || reply.reserved === undefined) return undefined
    const { reserved } = reply
    return Number.isInteger(reserved) && reserved >= 1 && reserved <= reserve && BigInt(reserved) <= reply.token
      ? undefined
      : `the grant reserves ${reserved} tokens up to ${reply.token}, but ${reserve} were asked for`
  }
  /** What is wrong with a `Live` reply that omits a lease list the client needs (`undefined`: nothing). */
  const omitsLeases = (reply: KeepAliveReply, known: string | undefined): string | undefined =>
    reply._tag === "Live" && reply.leases === undefined && (known === undefined || known !== reply.version)
      ? `the reply omits the lease list of version ${reply.version}, but the client knows ${known ?? "none"}`
      : undefined
  const expired = Effect.succeed(KeepAliveReply.Expired())
  const acquireExpired = Effect.succeed(AcquireReply.Expired())
  const joinExpired = Effect.succeed<JoinReply>("Expired")

  // The direct forms (see `directOf`): the same checks and answers, then the store's callback.
  const direct = store.direct
  const storeKeepAlive = direct?.keepAlive
  const keepAliveDirect: DirectCalls["keepAlive"] = storeKeepAlive === undefined ? undefined : (
    context,
    sessionId,
    ttlMillis,
    known,
    done
  ) =>
    renew.direct(context, done, (answer) => {
      const rule = ttlRule(ttlMillis, `${ttlMillis} millis`)
      if (rule !== undefined) return answer(Either.left(problem("keepAlive", rule)))
      if (!isSessionId(sessionId)) return answer(Either.right(KeepAliveReply.Expired()))
      storeKeepAlive(sessionId, Math.ceil(ttlMillis), known, (reply) => {
        const omitted = Either.isRight(reply) ? omitsLeases(reply.right, known) : undefined
        answer(omitted === undefined ? reply : Either.left(problem("keepAlive", omitted)))
      })
    })
  const storeAcquire = direct?.acquire
  const acquireDirect: DirectCalls["acquire"] = storeAcquire === undefined ? undefined : (
    context,
    sessionId,
    name,
    reserve,
    done
  ) =>
    acquiring.direct(context, done, (answer) => {
      const rule = nameRule(name) ?? reserveRule(reserve)
      if (rule !== undefined) return answer(Either.left(problem("acquire", rule)))
      if (!isSessionId(sessionId)) return answer(Either.right(AcquireReply.Expired()))
      storeAcquire(sessionId, name, reserve, (reply) => {
        const wrong = Either.isRight(reply) ? overReserved(reply.right, reserve) : undefined
        answer(wrong === undefined ? reply : Either.left(problem("acquire", wrong)))
      })
    })
  const storeRelease = direct?.release
  const releaseDirect: DirectCalls["release"] = storeRelease === undefined ? undefined : (context, sessionId, name, token, done) =>
    releasing.direct(context, done, (answer) => {
      const rule = nameRule(name)
      if (rule !== undefined) return answer(Either.left(problem("release", rule)))
      if (!isSessionId(sessionId) || token <= 0n) return answer(Either.void)
      storeRelease(sessionId, name, token, answer)
    })

  return {
    backend,
    holds,
    openSession: (ttl) => open.effect(withTtl("openSession", ttl, store.openSession)),
    keepAlive: withDirect(
      (sessionId: string, ttl: Duration.Duration, known?: string | undefined) =>
        renew.effect(withTtl("keepAlive", ttl, (ttlMillis) =>
          isSessionId(sessionId)
            ? Effect.flatMap(store.keepAlive(sessionId, ttlMillis, known), (reply) => {
              const omitted = omitsLeases(reply, known)
              return omitted === undefined ? Effect.succeed(reply) : invalid("keepAlive", omitted)
            })
            : expired)),
      keepAliveDirect
    ),
    closeSession: (sessionId) => closing.effect(isSessionId(sessionId) ? store.closeSession(sessionId) : Effect.void),
    acquire: withDirect(
      (sessionId: string, name: string, reserve = 1) =>
        acquiring.effect(withName("acquire", name, () => {
          const rule = reserveRule(reserve)
          if (rule !== undefined) return invalid("acquire", rule)
          if (!isSessionId(sessionId)) return acquireExpired
          return Effect.flatMap(store.acquire(sessionId, name, reserve), (reply) => {
            const wrong = overReserved(reply, reserve)
            return wrong === undefined ? Effect.succeed(reply) : invalid("acquire", wrong)
          })
        })),
      acquireDirect
    ),
    release: withDirect(
      (sessionId: string, name: string, token: bigint) =>
        releasing.effect(withName("release", name, () =>
          isSessionId(sessionId) && token > 0n ? store.release(sessionId, name, token) : Effect.void)),
      releaseDirect
    ),
    withdraw: (sessionId, name) =>
      withdrawing.effect(withName("withdraw", name, () =>
        storeWithdraw !== undefined && isSessionId(sessionId) ? storeWithdraw(sessionId, name) : Effect.void)),
    join: (sessionId, group) =>
      joining.effect(withGroupName("join", group, () => isSessionId(sessionId) ? store.join(sessionId, group) : joinExpired)),
    leave: (sessionId, group) =>
      leaving.effect(withGroupName("leave", group, () => isSessionId(sessionId) ? store.leave(sessionId, group) : Effect.void)),
    members: (group) => listing.effect(withGroupName("members", group, () => store.members(group))),
    hints: store.hints,
    ...(store.inspect === undefined ? {} : { inspect: inspecting.effect(Effect.map(store.inspect, sortInventory)) })
  }
}

const byKey = <A>(key: (a: A) => string) => (a: A, b: A): number => {
  const x = key(a)
  const y = key(b)
  return x < y ? -1 : x > y ? 1 : 0
}

/** An inventory in a stable order: sessions by id, leases by name, groups by name, members sorted. */
const sortInventory = (inventory: Inventory): Inventory => ({
  sessions: [...inventory.sessions].sort(byKey((s) => s.sessionId)),
  leases: [...inventory.leases].sort(byKey((l) => l.name)),
  groups: [...inventory.groups].sort(byKey((g) => g.group)).map((g) => ({ group: g.group, members: [...g.members].sort() }))
})

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

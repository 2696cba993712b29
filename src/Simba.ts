/**
 * The user API: the `Simba` service, its accessors, `make` and `layer`.
 *
 * ```ts
 * yield* Simba.withLock("orders", (term) => charge(order, term.token))
 * yield* Effect.forkScoped(Simba.runWhileLeader("billing", (term) => billingLoop))
 * ```
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { ElectionKind } from "./Engine.js"
import type {
  ElectionAlreadyStartedError,
  InvalidLeaseNameError,
  InvalidLockRequestError,
  LockConflictError,
  LockLostError,
  LockReentryError,
  LockTimeoutError,
  NotSupportedError,
  SimbaClosedError,
  SimbaConfigError
} from "./Errors.js"
import type * as Cron from "effect/Cron"
import * as Client from "./internal/client.js"
import * as CronWork from "./internal/cron.js"
import type { LeaseBackend } from "./LeaseBackend.js"
import * as SimbaConfig from "./SimbaConfig.js"
import type { ElectionStatus, SessionStatus, SimbaEvent } from "./SimbaEvent.js"
import type { Term } from "./Term.js"

export type { ElectionKind } from "./Engine.js"

// Public shapes ---------------------------------------------------------------------------------------

/** Errors of acquiring a lock. */
export type LockError =
  | InvalidLeaseNameError
  | LockTimeoutError
  | LockLostError
  | LockReentryError
  | ElectionAlreadyStartedError
  | SimbaClosedError
  | LockConflictError

/** Errors of semaphores and read locks: a lock's, and a request the store or its arguments cannot serve. */
export type HoldError = LockError | NotSupportedError | InvalidLockRequestError

/** Errors of starting an election. */
export type ElectionError = InvalidLeaseNameError | ElectionAlreadyStartedError | SimbaClosedError

export interface LockOptions {
  /**
   * Give up waiting after this long with `LockTimeoutError`; the attempt is then abandoned for good.
   * Zero is a try-lock on every backend: one acquire round trip, no waiting (see `tryWithLock`).
   */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * `withLock` (or `lock`'s scope) returns only once the store answered the release: one more round
   * trip, after which another client can be granted the lock. Default `false`: it returns as soon as
   * the body has exited and the term is revoked, and the release is sent without waiting (nothing of
   * this client acts on the lease any more; a later lock of the name here is ordered after it; `close`
   * waits for it). Ask for it when what the caller does next must come after another client can hold
   * the lock, such as telling it to go ahead.
   */
  readonly awaitRelease?: boolean | undefined
  /**
   * Lock caching (docs/locks.md, "Lock caching"): after the body, keep the lease for up to this long
   * while no other session asks for it, so the next lock of this name in this client starts its body
   * without a round trip, with its own term and a fencing token above every earlier one. Another
   * session that asks is queued and the lease goes to it as soon as no body of this client runs.
   * Default: the client's `lockKeep` (0: off); capped at the lease duration; ignored with
   * `awaitRelease`, which asks for the release itself.
   */
  readonly keep?: Duration.DurationInput | undefined
}

/** Options of `withPermits` / `permits`. */
export interface PermitOptions {
  /**
   * The semaphore's permits in all (1 to 1,000,000). Every client must ask with the same limit: the
   * store keeps the first while the name has holders or waiters, and refuses another with
   * `LockConflictError`.
   */
  readonly limit: number
  /** As `LockOptions.timeout`: zero is a try (one round trip, never queued). */
  readonly timeout?: Duration.DurationInput | undefined
  /** As `LockOptions.awaitRelease`: return only once the store answered the release of the permits. */
  readonly awaitRelease?: boolean | undefined
}

/** Options of `withReadLock` / `readLock`. */
export interface ReadLockOptions {
  /** As `LockOptions.timeout`: zero is a try (one round trip, never queued). */
  readonly timeout?: Duration.DurationInput | undefined
  /** As `LockOptions.awaitRelease`: return only once the store answered the release of the read hold. */
  readonly awaitRelease?: boolean | undefined
}

/**
 * What happens when a leader's work fails or dies (an interruption by revocation is not a failure).
 * By default the term ends: the lease is given up with handover (the work has already exited), and
 * the election competes again after `backoff`, so another node can take over.
 */
export interface WorkFailureOptions {
  /**
   * `"stepDown"` (default): give the term up. `{ restart: schedule }`: run the work again on this
   * leader as the schedule allows (its input is the failure's `Cause`; counted per term); once the
   * schedule is done, step down.
   */
  readonly onFailure?: "stepDown" | { readonly restart: Schedule.Schedule<unknown, unknown> } | undefined
  /**
   * How long a stepped-down election stays out of the race: `initial` (default 1 second), doubled for
   * each consecutive failure, capped at `max` (default 30 seconds); a term that ran for `resetAfter`
   * (default 1 minute) before failing starts again from `initial`.
   */
  readonly backoff?: {
    readonly initial?: Duration.DurationInput | undefined
    readonly max?: Duration.DurationInput | undefined
    readonly resetAfter?: Duration.DurationInput | undefined
  } | undefined
}

export interface ElectionOptions extends WorkFailureOptions {
  /** Work run in a fiber for each term, interrupted when the term is revoked. */
  readonly work?: ((term: Term) => Effect.Effect<unknown, unknown>) | undefined
}

export interface ScheduleOptions {
  /**
   * Run the task once as soon as elected, then on the schedule. Default `false`: the first run waits
   * for the schedule's first recurrence (as `Effect.schedule`), so an election (a deploy, a failover)
   * does not rerun a cron job.
   */
  readonly immediate?: boolean | undefined
}

/** A handle on one election of this client. */
export interface Election {
  readonly name: string
  /** `CANDIDATE`, `LEADER`, `HANDOVER`, `COOLDOWN`, or `STOPPED` once stopped. */
  readonly status: Effect.Effect<ElectionStatus | "STOPPED">
  /** The current term, if this client leads. */
  readonly term: Effect.Effect<Option.Option<Term>>
  /** The current term (if any) and every later one, as they are won. */
  readonly terms: Stream.Stream<Term>
  /** Waits until this client leads, and returns the term. */
  readonly awaitLeader: Effect.Effect<Term>
  /** Gives the lease up (with handover) and stays out of the race for `cooldown`. */
  readonly stepDown: (cooldown: Duration.DurationInput) => Effect.Effect<void>
  /** Ends the election (with handover); nothing is delivered after it completes. */
  readonly stop: Effect.Effect<void>
}

export interface SimbaSnapshot {
  readonly session: {
    readonly id: string | undefined
    readonly status: SessionStatus
    readonly remaining: Duration.Duration
  }
  readonly elections: ReadonlyArray<{
    readonly name: string
    readonly kind: ElectionKind
    readonly status: ElectionStatus
    readonly token: bigint | undefined
    readonly remaining: Duration.Duration
  }>
  readonly groups: ReadonlyArray<{
    readonly group: string
    readonly partitions: number
    readonly members: ReadonlyArray<string>
    readonly owned: ReadonlyArray<number>
  }>
  /**
   * Leases kept after their lock's body (`keep`): held on the store with `token` (its block's last),
   * released when `remaining` has passed unless a lock of the name takes it first.
   */
  readonly cached: ReadonlyArray<{
    readonly name: string
    readonly token: bigint
    readonly remaining: Duration.Duration
  }>
}

/** One client: a session on the backend and everything competing through it. */
export interface SimbaClient {
  /**
   * Runs `body` while holding the lock `name`. Same-name calls of one client queue FIFO; the body is
   * interrupted, with `LockLostError`, if the term ends involuntarily.
   */
  readonly withLock: <A, E, R>(
    name: string,
    body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
    options?: LockOptions
  ) => Effect.Effect<A, E | LockError, R>
  /**
   * Runs `body` if the lock `name` is free: one acquire round trip (once the session is live), no
   * waiting. `Some` of the body's result, or `None` (body not run) if another holder has it.
   */
  readonly tryWithLock: <A, E, R>(
    name: string,
    body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>)
  ) => Effect.Effect<Option.Option<A>, E | Exclude<LockError, LockTimeoutError>, R>
  /** Holds the lock `name` until the scope closes. */
  readonly lock: (name: string, options?: LockOptions) => Effect.Effect<Term, LockError, Scope.Scope>
  /**
   * Runs `body` holding every lock of `names`, or none: `body` gets the terms in the order of `names`
   * and is interrupted, with `LockLostError` naming the lock, if any of them ends involuntarily. No
   * deadlock between clients locking overlapping sets in different orders: the names are taken in one
   * global order (docs/locks.md, "Multi-name locks"). `timeout` bounds the whole; zero is a try.
   */
  readonly withLocks: <A, E, R>(
    names: ReadonlyArray<string>,
    body: Effect.Effect<A, E, R> | ((terms: ReadonlyArray<Term>) => Effect.Effect<A, E, R>),
    options?: LockOptions
  ) => Effect.Effect<A, E | LockError, R>
  /**
   * Runs `body` holding `permits` of the `limit` permits of the semaphore `name` (docs/locks.md,
   * "Semaphores and read-write locks"). Served in arrival order on the store; the permits live and
   * die with the session; the term's token rises across every grant of the name.
   */
  readonly withPermits: <A, E, R>(
    name: string,
    permits: number,
    body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
    options: PermitOptions
  ) => Effect.Effect<A, E | HoldError, R>
  /** Holds `permits` of the semaphore `name` until the scope closes. */
  readonly permits: (name: string, permits: number, options: PermitOptions) => Effect.Effect<Term, HoldError, Scope.Scope>
  /**
   * Runs `body` holding a read lock of `name`: any number of readers together, or one writer (the
   * write lock is `withWriteLock`, which is `withLock`). A reader arriving after a waiting writer waits
   * behind it.
   */
  readonly withReadLock: <A, E, R>(
    name: string,
    body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
    options?: ReadLockOptions
  ) => Effect.Effect<A, E | HoldError, R>
  /** Holds a read lock of `name` until the scope closes. */
  readonly readLock: (name: string, options?: ReadLockOptions) => Effect.Effect<Term, HoldError, Scope.Scope>
  /** The write lock of the read-write lock `name`: `withLock` itself. */
  readonly withWriteLock: <A, E, R>(
    name: string,
    body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
    options?: LockOptions
  ) => Effect.Effect<A, E | LockError, R>
  /** The write lock of the read-write lock `name`, held until the scope closes: `lock` itself. */
  readonly writeLock: (name: string, options?: LockOptions) => Effect.Effect<Term, LockError, Scope.Scope>
  /** Holds every lock of `names` until the scope closes, or none; the terms in the order of `names`. */
  readonly locks: (
    names: ReadonlyArray<string>,
    options?: LockOptions
  ) => Effect.Effect<ReadonlyArray<Term>, LockError, Scope.Scope>
  /** Competes for `name` forever, running `work` for each term; interrupt to stop (with handover). */
  readonly runWhileLeader: <E, R>(
    name: string,
    work: (term: Term) => Effect.Effect<unknown, E, R>,
    options?: WorkFailureOptions
  ) => Effect.Effect<never, ElectionError, R>
  /** Starts an election; it stops when the scope closes. */
  readonly election: (name: string, options?: ElectionOptions) => Effect.Effect<Election, ElectionError, Scope.Scope>
  /**
   * Runs `task` on `schedule` while this client leads `name`, the first run at the schedule's first
   * recurrence (`options.immediate` for one at once); a failing run is logged.
   */
  readonly schedule: <Out, E, R, R2>(
    name: string,
    schedule: Schedule.Schedule<Out, unknown, R2>,
    task: (term: Term) => Effect.Effect<unknown, E, R>,
    options?: ScheduleOptions
  ) => Effect.Effect<never, ElectionError, R | R2>
  /** Joins `group` and runs `work(partition, term)` for each of its `partitions` this client leads. */
  readonly partitionGroup: <E, R>(
    group: string,
    partitions: number,
    work: (partition: number, term: Term) => Effect.Effect<unknown, E, R>,
    options?: WorkFailureOptions
  ) => Effect.Effect<never, ElectionError | SimbaConfigError, R>
  /** Everything that happens, for any number of subscribers. */
  readonly events: Stream.Stream<SimbaEvent>
  /**
   * The current state as events (the session's `SessionOpened`, each term's `Elected`, each
   * election's `StatusChanged`, each group's view and partitions), then every live event: nothing
   * published after the client started is missed, however late the subscriber comes.
   */
  readonly observe: Stream.Stream<SimbaEvent>
  readonly snapshot: Effect.Effect<SimbaSnapshot>
  /** Closes the session: revokes every term (`STOPPED`), hands over, releases everything. */
  readonly close: Effect.Effect<void>
}

// Service ---------------------------------------------------------------------------------------------

/** The client service. */
export class Simba extends Context.Tag("simba/Simba")<Simba, SimbaClient>() {}

/**
 * Builds one client on the `LeaseBackend` in context, living in the current scope. Several clients
 * can share one backend (tests, demos).
 */
export const make: (
  config?: SimbaConfig.SimbaConfigInput
) => Effect.Effect<SimbaClient, SimbaConfigError, LeaseBackend | Scope.Scope> = Client.make

/** A layer providing `Simba` from the `LeaseBackend` in context; the session closes with the layer. */
export const layer = (
  config?: SimbaConfig.SimbaConfigInput
): Layer.Layer<Simba, SimbaConfigError, LeaseBackend> => Layer.scoped(Simba, Client.make(config))

/** Like `layer`, with the timing read from the environment (`SIMBA_*`). */
export const layerConfig: Layer.Layer<Simba, SimbaConfigError, LeaseBackend> = Layer.scoped(
  Simba,
  Effect.flatMap(SimbaConfig.fromEnv, (config) => Client.make(config))
)

// Accessors ------------------------------------------------------------------------------------------

/** `withLock` on the `Simba` in context. */
export const withLock = <A, E, R>(
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
  options?: LockOptions
): Effect.Effect<A, E | LockError, R | Simba> => Effect.flatMap(Simba, (simba) => simba.withLock(name, body, options))

/** `tryWithLock` on the `Simba` in context. */
export const tryWithLock = <A, E, R>(
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>)
): Effect.Effect<Option.Option<A>, E | Exclude<LockError, LockTimeoutError>, R | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.tryWithLock(name, body))

/** `lock` on the `Simba` in context. */
export const lock = (
  name: string,
  options?: LockOptions
): Effect.Effect<Term, LockError, Simba | Scope.Scope> => Effect.flatMap(Simba, (simba) => simba.lock(name, options))

/** `withLocks` on the `Simba` in context. */
export const withLocks = <A, E, R>(
  names: ReadonlyArray<string>,
  body: Effect.Effect<A, E, R> | ((terms: ReadonlyArray<Term>) => Effect.Effect<A, E, R>),
  options?: LockOptions
): Effect.Effect<A, E | LockError, R | Simba> => Effect.flatMap(Simba, (simba) => simba.withLocks(names, body, options))

/** `locks` on the `Simba` in context. */
export const locks = (
  names: ReadonlyArray<string>,
  options?: LockOptions
): Effect.Effect<ReadonlyArray<Term>, LockError, Simba | Scope.Scope> =>
  Effect.flatMap(Simba, (simba) => simba.locks(names, options))

/** `withPermits` on the `Simba` in context. */
export const withPermits = <A, E, R>(
  name: string,
  permits: number,
  body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
  options: PermitOptions
): Effect.Effect<A, E | HoldError, R | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.withPermits(name, permits, body, options))

/** `permits` on the `Simba` in context. */
export const permits = (
  name: string,
  permits: number,
  options: PermitOptions
): Effect.Effect<Term, HoldError, Simba | Scope.Scope> => Effect.flatMap(Simba, (simba) => simba.permits(name, permits, options))

/** `withReadLock` on the `Simba` in context. */
export const withReadLock = <A, E, R>(
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
  options?: ReadLockOptions
): Effect.Effect<A, E | HoldError, R | Simba> => Effect.flatMap(Simba, (simba) => simba.withReadLock(name, body, options))

/** `readLock` on the `Simba` in context. */
export const readLock = (
  name: string,
  options?: ReadLockOptions
): Effect.Effect<Term, HoldError, Simba | Scope.Scope> => Effect.flatMap(Simba, (simba) => simba.readLock(name, options))

/** `withWriteLock` on the `Simba` in context. */
export const withWriteLock = <A, E, R>(
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term) => Effect.Effect<A, E, R>),
  options?: LockOptions
): Effect.Effect<A, E | LockError, R | Simba> => Effect.flatMap(Simba, (simba) => simba.withWriteLock(name, body, options))

/** `writeLock` on the `Simba` in context. */
export const writeLock = (
  name: string,
  options?: LockOptions
): Effect.Effect<Term, LockError, Simba | Scope.Scope> => Effect.flatMap(Simba, (simba) => simba.writeLock(name, options))

/** `runWhileLeader` on the `Simba` in context. */
export const runWhileLeader = <E, R>(
  name: string,
  work: (term: Term) => Effect.Effect<unknown, E, R>,
  options?: WorkFailureOptions
): Effect.Effect<never, ElectionError, R | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.runWhileLeader(name, work, options))

/** `election` on the `Simba` in context. */
export const election = (
  name: string,
  options?: ElectionOptions
): Effect.Effect<Election, ElectionError, Simba | Scope.Scope> =>
  Effect.flatMap(Simba, (simba) => simba.election(name, options))

/** `schedule` on the `Simba` in context. */
export const schedule = <Out, E, R, R2>(
  name: string,
  schedule: Schedule.Schedule<Out, unknown, R2>,
  task: (term: Term) => Effect.Effect<unknown, E, R>,
  options?: ScheduleOptions
): Effect.Effect<never, ElectionError, R | R2 | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.schedule(name, schedule, task, options))

/** `partitionGroup` on the `Simba` in context. */
export const partitionGroup = <E, R>(
  group: string,
  partitions: number,
  work: (partition: number, term: Term) => Effect.Effect<unknown, E, R>,
  options?: WorkFailureOptions
): Effect.Effect<never, ElectionError | SimbaConfigError, R | Simba> =>
  Effect.flatMap(Simba, (simba) => simba.partitionGroup(group, partitions, work, options))

/** `events` of the `Simba` in context. */
export const events: Stream.Stream<SimbaEvent, never, Simba> = Stream.unwrap(Effect.map(Simba, (simba) => simba.events))

/** `observe` of the `Simba` in context: the current state as events, then live events. */
export const observe: Stream.Stream<SimbaEvent, never, Simba> = Stream.unwrap(Effect.map(Simba, (simba) => simba.observe))

/** `snapshot` of the `Simba` in context. */
export const snapshot: Effect.Effect<SimbaSnapshot, never, Simba> = Effect.flatMap(Simba, (simba) => simba.snapshot)

/** `close` the `Simba` in context. */
export const close: Effect.Effect<void, never, Simba> = Effect.flatMap(Simba, (simba) => simba.close)

// Leader-only jobs as layers (as `@effect/cluster`'s `Singleton.make` and `ClusterCron.make`) -------

/** A leader-only cron job: `Simba.cron` (a layer) and `Simba.runCron`. */
export interface CronOptions<E, R> {
  /** The lease name the job's election competes for. */
  readonly name: string
  /** When to run, e.g. `Cron.unsafeParse("0 3 * * *", "UTC")`. */
  readonly cron: Cron.Cron
  /** The job (or `(term) => job`); a failure is logged and the next tick still runs. */
  readonly execute: Effect.Effect<unknown, E, R> | ((term: Term) => Effect.Effect<unknown, E, R>)
  /**
   * A tick that came before this client was elected (e.g. during a failover) runs at once if it is at
   * most this old; older ones are skipped. Default 0: missed ticks are skipped. Nothing records which
   * ticks a previous leader ran, so a tick inside the window may run twice (see the README).
   */
  readonly skipIfOlderThan?: Duration.DurationInput | undefined
}

/** Runs `options.execute` at each tick of `options.cron` while this client leads `options.name`. */
export const runCron = <E, R>(options: CronOptions<E, R>): Effect.Effect<never, ElectionError, R | Simba> =>
  Effect.flatMap(
    Effect.zip(Simba, CronWork.work(options)),
    ([simba, work]) => simba.runWhileLeader(options.name, work)
  )

/**
 * `runCron` as a layer: merge it into the app's layers; the election starts when the layer is built
 * (a bad name fails the build) and stops, with handover, when its scope closes.
 */
export const cron = <E, R>(options: CronOptions<E, R>): Layer.Layer<never, ElectionError, Simba | R> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const simba = yield* Simba
    const context = yield* Effect.context<R>()
    const work = yield* CronWork.work(options)
    yield* simba.election(options.name, { work: (term) => Effect.provide(work(term), context) })
  }))

/**
 * A leader-only singleton as a layer: `run` (an `Effect` or `(term) => Effect`) runs while this client
 * leads `name`, is interrupted when the term ends, and fails or dies as `options` say (see
 * `WorkFailureOptions`). The election starts when the layer is built and stops when its scope closes.
 */
export const singleton = <E, R>(
  name: string,
  run: Effect.Effect<unknown, E, R> | ((term: Term) => Effect.Effect<unknown, E, R>),
  options?: WorkFailureOptions
): Layer.Layer<never, ElectionError, Simba | R> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const simba = yield* Simba
    const context = yield* Effect.context<R>()
    yield* simba.election(name, {
      ...options,
      work: (term) => Effect.provide(Effect.isEffect(run) ? run : run(term), context)
    })
  }))

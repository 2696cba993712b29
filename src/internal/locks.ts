/**
 * Locks: `lock` (scoped), `withLock` (the body in a child fiber that revocation interrupts) and
 * `tryWithLock` (one attempt, no waiting).
 *
 * A `timeout` of zero (or less) is a try-lock on every backend: one acquire round trip once the
 * session is live, then the lock is held or the attempt ends (`LockTimeoutError`, or `None` from
 * `tryWithLock`). A timer racing the round trip would make the answer depend on the backend's latency.
 *
 * Locks are not re-entrant: a fiber that holds a lock (and every fiber forked from it while it does)
 * carries the name in `heldLocks`, and asking the same client for it again fails at once with
 * `LockReentryError` instead of waiting for itself forever.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { LockLostError, LockReentryError, LockTimeoutError, SimbaClosedError } from "../Errors.js"
import type { LockError, LockOptions } from "../Simba.js"
import type * as Term from "../Term.js"
import * as Handles from "./handles.js"
import { interruptSignal } from "./interrupt.js"
import type { Shell } from "./shell.js"

/** The locks the current fiber (or a fiber it was forked from) holds, per client. */
const heldLocks = FiberRef.unsafeMake<ReadonlyArray<{ readonly shell: Shell; readonly name: string }>>([])

const holds = (shell: Shell, name: string) =>
  Effect.map(FiberRef.get(heldLocks), (held) => held.some((lock) => lock.shell === shell && lock.name === name))

const tryOnce = (options: LockOptions | undefined): boolean =>
  options?.timeout !== undefined && Duration.lessThanOrEqualTo(Duration.decode(options.timeout), Duration.zero)

/**
 * A value completed once (by the loop) and awaited by the caller, before or after: a `Deferred`
 * without the cost of making one (it copies Effect's prototype into every instance).
 */
const awaitable = <A>() => {
  let value: Option.Option<A> = Option.none()
  let resume: ((effect: Effect.Effect<A>) => void) | undefined
  return {
    complete: (a: A): Option.Option<never> => {
      value = Option.some(a)
      resume?.(Effect.succeed(a))
      return Option.none()
    },
    await: Effect.suspend(() =>
      Option.isSome(value) ? Effect.succeed(value.value) : Effect.async<A>((callback) => {
        resume = callback
        return Effect.sync(() => {
          resume = undefined
        })
      })
    )
  }
}

/**
 * Holds the lock `name` until the scope closes (`None`: a try-lock that did not get it); `onRevoked`
 * runs (in the loop) when the term ends.
 */
const acquire = (
  shell: Shell,
  name: string,
  options: LockOptions | undefined,
  onRevoked: () => Effect.Effect<void>
): Effect.Effect<Option.Option<Term.Term>, LockError, Scope.Scope> =>
  Effect.gen(function*() {
    if (yield* holds(shell, name)) return yield* new LockReentryError({ lease: name })
    const won = awaitable<Term.Term>()
    const single = tryOnce(options)
    const { tried } = yield* Handles.start(shell, name, "lock", false, {
      onElected: (term) => Effect.sync(() => won.complete(term)),
      onRevoked
    }, single)
    if (single) {
      const outcome = yield* tried
      if (outcome._tag === "Closed") return yield* new SimbaClosedError()
      if (outcome._tag !== "Ok") return Option.none()
      return Option.some(yield* won.await)
    }
    const timeout = options?.timeout
    if (timeout === undefined) return Option.some(yield* won.await)
    return Option.some(
      yield* won.await.pipe(
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () => notAcquired(name, timeout)
        })
      )
    )
  })

const notAcquired = (name: string, timeout: Duration.DurationInput) =>
  new LockTimeoutError({ lease: name, timeout: Duration.format(Duration.decode(timeout)) })

/** A try-lock's `None` as the `LockTimeoutError` of `lock` and `withLock`. */
const orTimeout = (name: string, options: LockOptions | undefined) => <A>(acquired: Option.Option<A>) =>
  Option.isSome(acquired) ? Effect.succeed(acquired.value) : Effect.fail(notAcquired(name, options?.timeout ?? 0))

const nothingToInterrupt = () => Effect.void

export const lock = (shell: Shell, name: string, options?: LockOptions): Effect.Effect<Term.Term, LockError, Scope.Scope> =>
  acquire(shell, name, options, nothingToInterrupt).pipe(
    Effect.flatMap(orTimeout(name, options)),
    // The rest of the scope runs holding the lock: asking for it again there must not wait forever.
    Effect.tap(() => FiberRef.getWith(heldLocks, (held) => Effect.locallyScoped(heldLocks, [...held, { shell, name }])))
  )

/** Runs `body` holding the lock; `None` when a try-lock did not get it (the body did not run). */
const runLocked = <A, E, R>(
  shell: Shell,
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>),
  options: LockOptions | undefined
): Effect.Effect<Option.Option<A>, E | LockError, R> =>
  Effect.scoped(
    Effect.gen(function*() {
      // The body runs in a child fiber that the term's revocation interrupts (no race fiber).
      let running: Fiber.RuntimeFiber<A, E> | undefined
      const acquired = yield* acquire(
        shell,
        name,
        options,
        () => running === undefined ? Effect.void : interruptSignal(running)
      )
      if (Option.isNone(acquired)) return Option.none()
      const term = acquired.value
      const held = yield* FiberRef.get(heldLocks)
      // Set in the child, not `Effect.locally`: nothing to restore in a fiber that ends with the body
      // (and `Fiber.await` takes none of its fiber refs back).
      const fiber = yield* Effect.fork(
        Effect.zipRight(FiberRef.set(heldLocks, [...held, { shell, name }]), Effect.suspend(() => Effect.isEffect(body) ? body : body(term)))
      )
      running = fiber
      // Revoked between the grant and the fork: the hook found no fiber to interrupt.
      if (Option.isSome(yield* term.revokedReason)) yield* interruptSignal(fiber)
      const exit = yield* Fiber.await(fiber)
      if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) {
        const reason = yield* term.revokedReason
        if (Option.isSome(reason)) return yield* new LockLostError({ lease: name, token: term.token, reason: reason.value })
      }
      return Option.some(yield* exit)
    })
  )

export const withLock = <A, E, R>(
  shell: Shell,
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>),
  options?: LockOptions
): Effect.Effect<A, E | LockError, R> =>
  Effect.flatMap(runLocked(shell, name, body, options), orTimeout(name, options))

/** One attempt: `Some(result)` of `body` if the lock was free, `None` (and `body` not run) if not. */
export const tryWithLock = <A, E, R>(
  shell: Shell,
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>)
): Effect.Effect<Option.Option<A>, E | Exclude<LockError, LockTimeoutError>, R> =>
  // A try-lock reports "not acquired" as `None`, never as `LockTimeoutError` (only `withLock` maps it).
  runLocked(shell, name, body, { timeout: 0 }) as Effect.Effect<
    Option.Option<A>,
    E | Exclude<LockError, LockTimeoutError>,
    R
  >

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
import * as Scope from "effect/Scope"
import {
  InvalidLeaseNameError,
  LockConflictError,
  LockLostError,
  LockReentryError,
  LockTimeoutError,
  SimbaClosedError
} from "../Errors.js"
import * as LeaseName from "../LeaseName.js"
import type { ElectionError, LockError, LockOptions } from "../Simba.js"
import type * as Term from "../Term.js"
import * as Handles from "./handles.js"
import { interruptSignal, interruptSignalNow } from "./interrupt.js"
import { offerNow, type Shell } from "./shell.js"

/** The locks the current fiber (or a fiber it was forked from) holds, per client. */
export const heldLocks = FiberRef.unsafeMake<ReadonlyArray<{ readonly shell: Shell; readonly name: string }>>([])

const holdsIn = (held: ReadonlyArray<{ readonly shell: Shell; readonly name: string }>, shell: Shell, name: string) =>
  held.some((lock) => lock.shell === shell && lock.name === name)

export const tryOnce = (options: LockOptions | undefined): boolean =>
  options?.timeout !== undefined && Duration.lessThanOrEqualTo(Duration.decode(options.timeout), Duration.zero)

/** What a lock request ends with: the term, or `undefined` for a try-lock that did not get it. */
type Acquired = Effect.Effect<Term.Term | undefined, ElectionError | LockConflictError>

/**
 * A value set once, by a callback, and awaited by one fiber (or one callback), before or after it is
 * set. The wait has no canceler: the runtime ignores a resumption of a wait it interrupted, and a
 * canceler would wrap every wait in an interruption handler (several runtime operations per lock).
 */
const oneShot = <A, E>() => {
  let value: Effect.Effect<A, E> | undefined
  let waiter: ((value: Effect.Effect<A, E>) => void) | undefined
  /** Calls `callback` with the value once it is set (at once if it is); replaces an earlier waiter. */
  const whenSet = (callback: (value: Effect.Effect<A, E>) => void): void => {
    if (value !== undefined) callback(value)
    else waiter = callback
  }
  return {
    set: (next: Effect.Effect<A, E>): void => {
      if (value !== undefined) return
      value = next
      const waiting = waiter
      waiter = undefined
      waiting?.(next)
    },
    whenSet,
    await: Effect.suspend(() => value ?? Effect.async<A, E>(whenSet))
  }
}

/**
 * One lock request on the engine, driven by callbacks rather than fibers: the `Start` event, its
 * completion, the handle's `Elected` hook and (for a try-lock) the attempt's completion all settle
 * one value, which the caller awaits once. `stop` ends the handle (releasing a held lease) and
 * forgets its hooks; the engine answers it in the step that handles it. `stopNow` sends the stop
 * without waiting (once: `stop` then only waits for the answer), so a body's exit can release the
 * lock from its own fiber, one scheduler hop before its caller resumes.
 */
export interface LockRequest {
  readonly acquired: Acquired
  readonly stop: Effect.Effect<void>
  readonly stopNow: () => void
  /** Calls `callback` once the engine answered the stop (at once if it has). */
  readonly afterStop: (callback: () => void) => void
}

const closed: Acquired = Effect.fail(new SimbaClosedError())
const notHeld: Acquired = Effect.succeed(undefined)
const stoppedAtClose: LockRequest = {
  acquired: closed,
  stop: Effect.void,
  stopNow: () => undefined,
  afterStop: (callback) => callback()
}

/**
 * Registers the hooks of a new lock handle and queues its `Start` (at once: call it where the caller
 * cannot be interrupted before `stop` is sure to run). `onRevoked` runs in the loop when the term ends.
 */
export const startLock = (
  shell: Shell,
  name: string,
  single: boolean,
  onRevoked: () => Effect.Effect<void> | undefined,
  options: LockOptions | undefined
): LockRequest => {
  const awaitRelease = options?.awaitRelease === true
  const keep = keepOf(shell, options)
  if (shell.isShutDown) return stoppedAtClose
  const acquired = oneShot<Term.Term | undefined, ElectionError | LockConflictError>()
  const stopped = oneShot<void, never>()
  const handle = shell.nextId++
  // Answered only if the store refuses the name as another kind or limit (`Conflict`).
  const refusal = shell.nextId++
  shell.completions.set(refusal, (outcome) => {
    if (outcome._tag === "Conflict") {
      acquired.set(Effect.fail(new LockConflictError({ lease: LeaseName.poolOf(name), held: outcome.held, asked: outcome.asked })))
    }
  })
  let stopSent = false
  const stopNow = (): void => {
    if (stopSent) return
    stopSent = true
    const forget = () => {
      shell.hooks.delete(handle)
      shell.completions.delete(refusal)
      stopped.set(Effect.void)
    }
    if (shell.isShutDown) return forget()
    const completion = shell.nextId++
    shell.completions.set(completion, forget)
    offerNow(shell, awaitRelease ? { _tag: "Stop", handle, completion, awaitRelease } : { _tag: "Stop", handle, completion })
  }
  shell.hooks.set(handle, {
    onElected: (term) => {
      acquired.set(Effect.succeed(term))
      return undefined
    },
    onRevoked
  })
  const completion = shell.nextId++
  shell.completions.set(completion, (outcome) => {
    if (outcome._tag === "Ok" || outcome._tag === "NotAcquired") return
    shell.hooks.delete(handle)
    acquired.set(Effect.as(Handles.failStart(name, outcome), undefined))
  })
  let tryCompletion: number | undefined
  if (single) {
    tryCompletion = shell.nextId++
    shell.completions.set(tryCompletion, (outcome) => {
      if (outcome._tag === "NotAcquired") acquired.set(notHeld)
      else if (outcome._tag === "Closed") acquired.set(closed)
    })
  }
  offerNow(shell, { _tag: "Start", handle, name, kind: "lock", hasWork: false, completion, tryCompletion, keep, refusal })
  return {
    acquired: acquired.await,
    stop: Effect.suspend(() => {
      stopNow()
      return stopped.await
    }),
    stopNow,
    afterStop: (callback) => stopped.whenSet(callback)
  }
}

/**
 * A lock's `keep` in millis (0: no caching): its own, or the client's `lockKeep`; at most the lease
 * duration (a waiter whose `Wanted` message is lost waits for it); none with `awaitRelease`.
 */
const keepOf = (shell: Shell, options: LockOptions | undefined): number => {
  if (options?.awaitRelease === true) return 0
  const keep = options?.keep === undefined ? shell.lockKeep : Duration.toMillis(Duration.decode(options.keep))
  return keep > 0 ? Math.min(keep, shell.state.timing.leaseDuration) : 0
}

/** Waits for the term: at most `timeout` unless a try-lock (whose one attempt the engine answers). */
const awaitTerm = (request: LockRequest, name: string, options: LockOptions | undefined, single: boolean) => {
  const timeout = options?.timeout
  if (single || timeout === undefined) return request.acquired
  return request.acquired.pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => notAcquired(name, timeout) }))
}

export const notAcquired = (name: string, timeout: Duration.DurationInput) =>
  new LockTimeoutError({ lease: name, timeout: Duration.format(Duration.decode(timeout)) })

/** Fails at once for a bad name, or for a lock the calling fiber already holds. */
export const refused = (
  shell: Shell,
  name: string,
  held: ReadonlyArray<{ readonly shell: Shell; readonly name: string }>
): Effect.Effect<never, LockError> | undefined => {
  const rule = LeaseName.brokenRule(name)
  if (rule !== undefined) return Effect.fail(new InvalidLeaseNameError({ lease: name, rule }))
  return holdsIn(held, shell, name) ? Effect.fail(new LockReentryError({ lease: name })) : undefined
}

export const nothingToInterrupt = () => undefined

/** `lease`: the name on the store, when it is not `name` itself (a hold of `name`: `holds.ts`). */
export const lock = (
  shell: Shell,
  name: string,
  options?: LockOptions,
  lease = name
): Effect.Effect<Term.Term, LockError, Scope.Scope> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<Term.Term, LockError, Scope.Scope>((caller) => {
      const held = caller.getFiberRef(heldLocks)
      const refusal = refused(shell, name, held)
      if (refusal !== undefined) return refusal
      const single = tryOnce(options)
      const request = startLock(shell, lease, single, nothingToInterrupt, options)
      // One finalizer: the fiber that closes the scope gets its lock list back (as `locallyScoped`
      // would restore it), then the lock is released.
      return Effect.flatMap(Effect.scope, (scope) =>
        Effect.zipRight(
          Scope.addFinalizer(scope, Effect.zipRight(FiberRef.set(heldLocks, held), request.stop)),
          Effect.flatMap(restore(awaitTerm(request, name, options, single)), (term) =>
            term === undefined
              ? Effect.fail(notAcquired(name, options?.timeout ?? 0))
              // The rest of the scope runs holding the lock: asking for it again there must not wait forever.
              : Effect.as(FiberRef.set(heldLocks, [...held, { shell, name }]), term))
        ))
    })
  )

/**
 * Waits for the body's fiber to end and its lock's stop to be answered (the caller is resumed once,
 * after both). No canceler (it would wrap the wait in an interruption handler): an interrupted caller
 * stops the body in `runLocked`'s failure handler, before the lock is released.
 */
export const awaitBody = <A, E>(
  fiber: Fiber.RuntimeFiber<A, E>,
  request: Pick<LockRequest, "afterStop">
): Effect.Effect<Exit.Exit<A, E>> =>
  Effect.async<Exit.Exit<A, E>>((resume) => {
    // The body's exit has sent the stop already (`runLocked` observes it first).
    fiber.addObserver((exit) => request.afterStop(() => resume(Effect.succeed(exit))))
  })

/** Runs `body` holding the lock; `None` when a try-lock did not get it (the body did not run). */
const runLocked = <A, E, R>(
  shell: Shell,
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>),
  options: LockOptions | undefined,
  lease = name
): Effect.Effect<Option.Option<A>, E | LockError, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<Option.Option<A>, E | LockError, R>((caller) => {
      const held = caller.getFiberRef(heldLocks)
      const refusal = refused(shell, name, held)
      if (refusal !== undefined) return refusal
      const single = tryOnce(options)
      // The body runs in a child fiber that the term's revocation interrupts (no race fiber).
      let running: Fiber.RuntimeFiber<A, E> | undefined
      // Revoked between the grant and the fork: the hook found no fiber to interrupt.
      let revokedEarly = false
      const request = startLock(shell, lease, single, () => {
        if (running === undefined) revokedEarly = true
        // A body that already ended has nothing to interrupt.
        return running === undefined || running.unsafePoll() !== null ? undefined : interruptSignal(running)
      }, options)
      const holding = [...held, { shell, name }]
      const run = (term: Term.Term): Effect.Effect<Option.Option<A>, E | LockError, R> =>
        Effect.flatMap(
          // Set in the child: nothing to restore in a fiber that ends with the body.
          Effect.fork(restore(Effect.zipRight(
            FiberRef.set(heldLocks, holding),
            Effect.suspend(() => Effect.isEffect(body) ? body : body(term))
          ))),
          (fiber) => {
            running = fiber
            // The lock is released as soon as the body ends, not when its caller next runs.
            fiber.addObserver(request.stopNow)
            if (revokedEarly) interruptSignalNow(fiber, caller.id())
            return Effect.flatMap(restore(awaitBody(fiber, request)), (exit) => outcome(name, term, exit))
          }
        )
      return Effect.matchCauseEffect(
        Effect.flatMap(
          restore(awaitTerm(request, name, options, single)),
          (term) => term === undefined ? Effect.succeed(Option.none()) : run(term)
        ),
        stoppingAfter(request.stop, () => running)
      )
    })
  )

/**
 * How a call running a body under a lock (or a set of them) ends, as `ensuring(stop)`: the region is
 * uninterruptible already, so the match needs no mask of its own. An interrupted or failed caller
 * stops the body (and waits for it) before the lock is released.
 */
export const stoppingAfter = <A, E, R>(
  stop: Effect.Effect<void>,
  running: () => Fiber.RuntimeFiber<unknown, unknown> | undefined
) => ({
  onFailure: (cause: Cause.Cause<E>): Effect.Effect<A, E, R> => {
    const body = running()
    const stopped = body === undefined || body.unsafePoll() !== null ? stop : Effect.zipRight(Fiber.interrupt(body), stop)
    return Effect.zipRight(stopped, Effect.failCause(cause))
  },
  onSuccess: (result: A): Effect.Effect<A, E, R> => Effect.as(stop, result)
})

/** The body's exit as the lock's result: an interruption by the term's end is `LockLostError`. */
export const outcome = <A, E>(name: string, term: Term.Term, exit: Exit.Exit<A, E>): Effect.Effect<Option.Option<A>, E | LockError> => {
  if (Exit.isSuccess(exit)) return Effect.succeed(Option.some(exit.value))
  if (Cause.isInterruptedOnly(exit.cause)) {
    return Effect.flatMap(term.revokedReason, (reason): Effect.Effect<never, E | LockError> =>
      Option.isSome(reason)
        ? Effect.fail(new LockLostError({ lease: name, token: term.token, reason: reason.value }))
        : Effect.failCause(exit.cause))
  }
  return Effect.failCause(exit.cause)
}

/** A try-lock's `None` as the `LockTimeoutError` of `withLock`. */
const orTimeout = (name: string, options: LockOptions | undefined) => <A>(acquired: Option.Option<A>) =>
  Option.isSome(acquired) ? Effect.succeed(acquired.value) : Effect.fail(notAcquired(name, options?.timeout ?? 0))

export const withLock = <A, E, R>(
  shell: Shell,
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>),
  options?: LockOptions,
  lease = name
): Effect.Effect<A, E | LockError, R> =>
  Effect.flatMap(runLocked(shell, name, body, options, lease), orTimeout(name, options))

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

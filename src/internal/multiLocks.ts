/**
 * Multi-name locks: `locks` (scoped) and `withLocks`: every name of a set, or none.
 *
 * No deadlock, by one global order: the names are taken in the code-unit order of their strings, the
 * same in every client, and a request waits for a name only while every name it holds comes before
 * that name. Two clients locking overlapping sets, listed in any order, can never wait for each other
 * in a cycle. The first attempt asks for every name at once, as try-locks (nobody waits on a try, so
 * holding them out of order is harmless): one round trip when all are free. From the first name
 * refused on, the names after it that were granted are given back and the rest are taken one by one
 * in that order, each queued on the store as `withLock` queues, so the wait is fair per name.
 *
 * `timeout` bounds the whole; zero is a try: the one attempt, then all of the names or none. Every
 * name keeps the rules of `withLock`: its own term and fencing token, queued release (or
 * `awaitRelease`), `keep`, no re-entry. On a Redis Cluster the names may lie in different hash slots:
 * each is a lease of its own, taken in the order above.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import { InvalidLeaseNameError, LockLostError } from "../Errors.js"
import type { LockError, LockOptions } from "../Simba.js"
import * as Term from "../Term.js"
import { interruptSignal, interruptSignalNow } from "./interrupt.js"
import {
  awaitBody,
  heldLocks,
  type LockRequest,
  notAcquired,
  nothingToInterrupt,
  refused,
  startLock,
  stoppingAfter,
  tryOnce
} from "./locks.js"
import type { Shell } from "./shell.js"

type Held = ReadonlyArray<{ readonly shell: Shell; readonly name: string }>

/** Fails at once for a bad or repeated name, or for a name the calling fiber holds already. */
const refusedAll = (shell: Shell, names: ReadonlyArray<string>, held: Held): Effect.Effect<never, LockError> | undefined => {
  const seen = new Set<string>()
  for (const name of names) {
    const refusal = refused(shell, name, held)
    if (refusal !== undefined) return refusal
    if (seen.has(name)) {
      return Effect.fail(new InvalidLeaseNameError({ lease: name, rule: "listed more than once in one multi-name lock" }))
    }
    seen.add(name)
  }
  return undefined
}

/** The requests of one multi-name lock: the terms once all are held, and the stop of all of them. */
interface MultiRequest {
  /** The terms in the order of the names asked for. */
  readonly acquired: Effect.Effect<ReadonlyArray<Term.Term>, LockError>
  /** Stops every request started (releasing what is held) and waits for the engine's answers. */
  readonly stop: Effect.Effect<void>
  readonly stopNow: () => void
  /** Calls `callback` once every stop is answered. */
  readonly afterStop: (callback: () => void) => void
}

/**
 * Starts taking `names` (see the module comment). `onRevoked` runs in the loop when a term of the set
 * ends, once the set is taken or while it is being taken; never for a name given back on the way.
 */
const startAll = (
  shell: Shell,
  names: ReadonlyArray<string>,
  onRevoked: () => Effect.Effect<void> | undefined,
  options: LockOptions | undefined
): MultiRequest => {
  const order = [...names].sort()
  const started: Array<LockRequest> = []
  const kept = new Map<string, { readonly request: LockRequest; readonly term: Term.Term }>()
  /** Requests given back (or refused) are inactive: their revocation interrupts nothing. */
  const start = (name: string, single: boolean) => {
    const entry = { active: true }
    const request = startLock(shell, name, single, () => entry.active ? onRevoked() : undefined, options)
    started.push(request)
    return {
      request,
      giveBack: () => {
        entry.active = false
        request.stopNow()
      }
    }
  }
  const single = tryOnce(options)
  let waitingOn = order[0] ?? ""

  const attempt = Effect.suspend(() => {
    const tries = order.map((name) => start(name, true))
    return Effect.flatMap(
      Effect.all(tries.map((taken) => taken.request.acquired), { concurrency: "unbounded" }),
      (terms) => {
        const refusedAt = terms.findIndex((term) => term === undefined)
        terms.forEach((term, i) => {
          if (term === undefined || (refusedAt >= 0 && i > refusedAt)) tries[i].giveBack()
          else kept.set(order[i], { request: tries[i].request, term })
        })
        return refusedAt < 0 ? Effect.void : single ? Effect.fail(notAcquired(order[refusedAt], 0)) : inOrder(order.slice(refusedAt))
      }
    )
  })
  const inOrder = (rest: ReadonlyArray<string>): Effect.Effect<void, LockError> =>
    Effect.forEach(rest, (name) =>
      Effect.suspend(() => {
        waitingOn = name
        const { request } = start(name, false)
        return Effect.flatMap(request.acquired, (term) =>
          term === undefined
            ? Effect.fail(notAcquired(name, options?.timeout ?? 0))
            : Effect.sync(() => kept.set(name, { request, term })))
      }), { discard: true })

  const timeout = options?.timeout
  const all = single || timeout === undefined
    ? attempt
    : attempt.pipe(Effect.timeoutFail({ duration: timeout, onTimeout: () => notAcquired(waitingOn, timeout) }))

  const stopNow = () => {
    for (const request of started) request.stopNow()
  }
  const afterStop = (callback: () => void) => {
    let waiting = started.length
    if (waiting === 0) return callback()
    for (const request of started) {
      request.afterStop(() => {
        if (--waiting === 0) callback()
      })
    }
  }
  return {
    acquired: Effect.map(all, () => names.map((name) => termOf(kept, name))),
    stop: Effect.suspend(() => {
      stopNow()
      return Effect.async<void>((resume) => afterStop(() => resume(Effect.void)))
    }),
    stopNow,
    afterStop
  }
}

const termOf = (kept: ReadonlyMap<string, { readonly term: Term.Term }>, name: string): Term.Term => {
  const held = kept.get(name)
  // Unreachable: `acquired` succeeds only once every name is kept.
  if (held === undefined) throw new Error(`multi-name lock: ${name} not held`)
  return held.term
}

const holding = (held: Held, shell: Shell, names: ReadonlyArray<string>): Held => [
  ...held,
  ...names.map((name) => ({ shell, name }))
]

export const locks = (
  shell: Shell,
  names: ReadonlyArray<string>,
  options?: LockOptions
): Effect.Effect<ReadonlyArray<Term.Term>, LockError, Scope.Scope> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<ReadonlyArray<Term.Term>, LockError, Scope.Scope>((caller) => {
      const held = caller.getFiberRef(heldLocks)
      const refusal = refusedAll(shell, names, held)
      if (refusal !== undefined) return refusal
      const request = startAll(shell, names, nothingToInterrupt, options)
      return Effect.flatMap(Effect.scope, (scope) =>
        Effect.zipRight(
          Scope.addFinalizer(scope, Effect.zipRight(FiberRef.set(heldLocks, held), request.stop)),
          Effect.flatMap(
            restore(request.acquired),
            (terms) => Effect.as(FiberRef.set(heldLocks, holding(held, shell, names)), terms)
          )
        ))
    })
  )

export const withLocks = <A, E, R>(
  shell: Shell,
  names: ReadonlyArray<string>,
  body: Effect.Effect<A, E, R> | ((terms: ReadonlyArray<Term.Term>) => Effect.Effect<A, E, R>),
  options?: LockOptions
): Effect.Effect<A, E | LockError, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<A, E | LockError, R>((caller) => {
      const held = caller.getFiberRef(heldLocks)
      const refusal = refusedAll(shell, names, held)
      if (refusal !== undefined) return refusal
      let running: Fiber.RuntimeFiber<A, E> | undefined
      let revokedEarly = false
      const request = startAll(shell, names, () => {
        if (running === undefined) revokedEarly = true
        return running === undefined || running.unsafePoll() !== null ? undefined : interruptSignal(running)
      }, options)
      const run = (terms: ReadonlyArray<Term.Term>): Effect.Effect<A, E | LockError, R> =>
        Effect.flatMap(
          Effect.fork(restore(Effect.zipRight(
            FiberRef.set(heldLocks, holding(held, shell, names)),
            Effect.suspend(() => Effect.isEffect(body) ? body : body(terms))
          ))),
          (fiber) => {
            running = fiber
            fiber.addObserver(request.stopNow)
            if (revokedEarly) interruptSignalNow(fiber, caller.id())
            return Effect.flatMap(restore(awaitBody(fiber, request)), (exit) => outcomeAll(terms, exit))
          }
        )
      return Effect.matchCauseEffect(
        Effect.flatMap(restore(request.acquired), run),
        stoppingAfter<A, E | LockError, R>(request.stop, () => running)
      )
    })
  )

/** The body's exit: an interruption by the end of a term of the set is `LockLostError` naming it. */
const outcomeAll = <A, E>(terms: ReadonlyArray<Term.Term>, exit: Exit.Exit<A, E>): Effect.Effect<A, E | LockError> => {
  if (Exit.isSuccess(exit)) return Effect.succeed(exit.value)
  if (!Cause.isInterruptedOnly(exit.cause)) return Effect.failCause(exit.cause)
  return Effect.flatMap(
    Effect.forEach(terms, (term) => Effect.map(term.revokedReason, (reason) => ({ term, reason }))),
    (ends): Effect.Effect<never, E | LockError> => {
      // The term whose involuntary end interrupted the body; the others were stopped as it ended.
      const lost = ends.find((end) => Option.isSome(end.reason) && Term.isInvoluntary(end.reason.value)) ??
        ends.find((end) => Option.isSome(end.reason))
      return lost === undefined || Option.isNone(lost.reason)
        ? Effect.failCause(exit.cause)
        : Effect.fail(new LockLostError({ lease: lost.term.name, token: lost.term.token, reason: lost.reason.value }))
    }
  )
}

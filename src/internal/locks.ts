/** Locks: `lock` (scoped) and `withLock` (the body in a child fiber that revocation interrupts). */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { LockLostError, LockTimeoutError } from "../Errors.js"
import type { LockError, LockOptions } from "../Simba.js"
import type * as Term from "../Term.js"
import * as Handles from "./handles.js"
import { interruptSignal } from "./interrupt.js"
import type { Shell } from "./shell.js"

/** Holds the lock `name` until the scope closes; `onRevoked` runs (in the loop) when the term ends. */
const lockWith = (
  shell: Shell,
  name: string,
  options: LockOptions | undefined,
  onRevoked: () => Effect.Effect<void>
): Effect.Effect<Term.Term, LockError, Scope.Scope> =>
  Effect.gen(function*() {
    const won = yield* Deferred.make<Term.Term>()
    yield* Handles.start(shell, name, "lock", false, {
      onElected: (term) => Effect.as(Deferred.succeed(won, term), Option.none()),
      onRevoked
    })
    const timeout = options?.timeout
    if (timeout === undefined) return yield* Deferred.await(won)
    return yield* Deferred.await(won).pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () => new LockTimeoutError({ lease: name, timeout: Duration.format(Duration.decode(timeout)) })
      })
    )
  })

const nothingToInterrupt = () => Effect.void

export const lock = (shell: Shell, name: string, options?: LockOptions): Effect.Effect<Term.Term, LockError, Scope.Scope> =>
  lockWith(shell, name, options, nothingToInterrupt)

export const withLock = <A, E, R>(
  shell: Shell,
  name: string,
  body: Effect.Effect<A, E, R> | ((term: Term.Term) => Effect.Effect<A, E, R>),
  options?: LockOptions
): Effect.Effect<A, E | LockError, R> =>
  Effect.scoped(
    Effect.gen(function*() {
      // The body runs in a child fiber that the term's revocation interrupts (no race fiber).
      let running: Fiber.RuntimeFiber<A, E> | undefined
      const term = yield* lockWith(
        shell,
        name,
        options,
        () => running === undefined ? Effect.void : interruptSignal(running)
      )
      const fiber = yield* Effect.fork(Effect.isEffect(body) ? body : body(term))
      running = fiber
      // Revoked between the grant and the fork: the hook found no fiber to interrupt.
      if (Option.isSome(yield* term.revokedReason)) yield* interruptSignal(fiber)
      const exit = yield* Fiber.await(fiber)
      if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) {
        const reason = yield* term.revokedReason
        if (Option.isSome(reason)) return yield* new LockLostError({ lease: name, token: term.token, reason: reason.value })
      }
      return yield* exit
    })
  )

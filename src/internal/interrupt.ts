import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"

/** `interruptSignal` done at once, as the fiber `by` (for the loop's synchronous commands). */
export const interruptSignalNow = (fiber: Fiber.RuntimeFiber<unknown, unknown>, by: FiberId.FiberId): void => {
  fiber.unsafeInterruptAsFork(by)
}

/**
 * Asks `fiber` to stop without waiting for it, like `Fiber.interruptFork` but without forking a fiber
 * to do the asking (the shell does this on every revocation, timeout and re-armed timer).
 */
export const interruptSignal = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Effect.fiberId, (id) => Effect.sync(() => interruptSignalNow(fiber, id)))

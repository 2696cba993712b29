import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"

/**
 * Asks `fiber` to stop without waiting for it, like `Fiber.interruptFork` but without forking a fiber
 * to do the asking (the shell does this on every revocation, timeout and re-armed timer).
 */
export const interruptSignal = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Effect.fiberId, (id) => Effect.sync(() => fiber.unsafeInterruptAsFork(id)))

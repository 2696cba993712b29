/** The engine's timers: each a sleeping fiber that queues `Timer { key, id }` when it wakes. */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as FiberId from "effect/FiberId"
import { interruptSignalNow } from "./interrupt.js"
import { offer, type Shell } from "./shell.js"

/** Cancels the timer armed under `key`, if any (the `Disarm` effect), as the loop fiber `by`. */
export const cancel = (shell: Shell, key: string, by: FiberId.FiberId): void => {
  const fiber = shell.timers.get(key)
  shell.timers.delete(key)
  if (fiber !== undefined) interruptSignalNow(fiber, by)
}

/** Delivers `Timer { key, id }` at `at`, replacing the timer armed under `key` (the `Arm` effect). */
export const arm = (shell: Shell, key: string, id: number, at: number, now: number, by: FiberId.FiberId): Effect.Effect<void> =>
  Effect.suspend(() => {
    cancel(shell, key, by)
    // Whole millis: TestClock cannot represent fractional instants as nanoseconds.
    return Effect.sleep(Duration.millis(Math.max(0, Math.ceil(at - now)))).pipe(
      Effect.zipRight(offer(shell, { _tag: "Timer", key, id })),
      Effect.forkIn(shell.scope),
      Effect.map((fiber) => {
        shell.timers.set(key, fiber)
      })
    )
  })

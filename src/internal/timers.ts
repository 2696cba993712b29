/** The engine's timers: each a sleeping fiber that queues `Timer { key, id }` when it wakes. */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { interruptSignal } from "./interrupt.js"
import { offer, type Shell } from "./shell.js"

/** Cancels the timer armed under `key`, if any (the `Disarm` effect). */
export const cancel = (shell: Shell, key: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    const fiber = shell.timers.get(key)
    shell.timers.delete(key)
    return fiber === undefined ? Effect.void : interruptSignal(fiber)
  })

/** Delivers `Timer { key, id }` at `at`, replacing the timer armed under `key` (the `Arm` effect). */
export const arm = (shell: Shell, key: string, id: number, at: number, now: number): Effect.Effect<void> =>
  cancel(shell, key).pipe(
    Effect.zipRight(
      // Whole millis: TestClock cannot represent fractional instants as nanoseconds.
      Effect.sleep(Duration.millis(Math.max(0, Math.ceil(at - now)))).pipe(
        Effect.zipRight(offer(shell, { _tag: "Timer", key, id })),
        Effect.asVoid,
        Effect.forkIn(shell.scope)
      )
    ),
    Effect.map((fiber) => {
      shell.timers.set(key, fiber)
    })
  )

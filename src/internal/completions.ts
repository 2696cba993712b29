/**
 * Requests to the engine that a caller waits for (`start`, `stop`, `stepDown`, `join`, `leave`,
 * `close`): the event carries a completion id, the engine's `Complete` command answers it.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Engine from "../Engine.js"
import { offerNow, type Shell } from "./shell.js"

const closed: Engine.Outcome = { _tag: "Closed" }

/** Queues an event carrying a fresh completion and waits for the engine to complete it. */
export const request = (shell: Shell, make: (completion: number) => Engine.Event): Effect.Effect<Engine.Outcome> =>
  Effect.suspend(() => {
    if (shell.isShutDown) return Effect.succeed(closed)
    const completion = shell.nextId++
    // No `Deferred`: the caller is resumed directly (an interrupted caller leaves its entry to the
    // engine's answer, which always comes).
    return Effect.async<Engine.Outcome>((resume) => {
      shell.completions.set(completion, (outcome) => resume(Effect.succeed(outcome)))
      offerNow(shell, make(completion))
    })
  })

/** The `Complete` command (the loop's, done at once). */
export const complete = (shell: Shell, completion: number, outcome: Engine.Outcome): void => {
  const answer = shell.completions.get(completion)
  shell.completions.delete(completion)
  answer?.(outcome)
}

/**
 * After the client's scope closed nobody will complete anything: answer every waiter `Closed`.
 * The waiters are listed when it runs: an iterator made earlier would live as long as the client and
 * keep every table the map ever outgrew (V8 chains them for live iterators), a leak per call.
 */
export const shutDown = (shell: Shell): Effect.Effect<void> =>
  Effect.zipRight(
    Deferred.succeed(shell.shutdown, undefined),
    Effect.sync(() => {
      shell.isShutDown = true
      const waiting = Array.from(shell.completions.values())
      shell.completions.clear()
      for (const answer of waiting) answer(closed)
    })
  )

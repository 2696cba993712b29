/**
 * Requests to the engine that a caller waits for (`start`, `stop`, `stepDown`, `join`, `leave`,
 * `close`): the event carries a completion id, the engine's `Complete` effect answers it.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Engine from "../Engine.js"
import { offer, type Shell } from "./shell.js"

/** Queues an event carrying a fresh completion and waits for the engine to complete it. */
export const request = (shell: Shell, make: (completion: number) => Engine.Event): Effect.Effect<Engine.Outcome> =>
  Effect.gen(function*() {
    if (yield* Deferred.isDone(shell.shutdown)) return { _tag: "Closed" } as const
    const completion = shell.nextId++
    const deferred = yield* Deferred.make<Engine.Outcome>()
    shell.completions.set(completion, deferred)
    yield* offer(shell, make(completion))
    return yield* Deferred.await(deferred)
  })

/**
 * A completion the engine answers later (a try-lock's attempt): its id, to put in an event, and
 * the wait for it. The engine answers every completion it was given, so the entry never outlives it.
 */
export const register = (shell: Shell): Effect.Effect<{ readonly id: number; readonly outcome: Effect.Effect<Engine.Outcome> }> =>
  Effect.gen(function*() {
    const id = shell.nextId++
    const deferred = yield* Deferred.make<Engine.Outcome>()
    if (yield* Deferred.isDone(shell.shutdown)) yield* Deferred.succeed(deferred, { _tag: "Closed" })
    else shell.completions.set(id, deferred)
    return { id, outcome: Deferred.await(deferred) }
  })

/** The `Complete` effect. */
export const complete = (shell: Shell, completion: number, outcome: Engine.Outcome): Effect.Effect<void> =>
  Effect.suspend(() => {
    const deferred = shell.completions.get(completion)
    shell.completions.delete(completion)
    return deferred === undefined ? Effect.void : Deferred.succeed(deferred, outcome)
  })

/**
 * After the client's scope closed nobody will complete anything: answer every waiter `Closed`.
 * The waiters are listed when it runs: an iterator made earlier would live as long as the client and
 * keep every table the map ever outgrew (V8 chains them for live iterators), a leak per call.
 */
export const shutDown = (shell: Shell): Effect.Effect<void> =>
  Effect.zipRight(
    Deferred.succeed(shell.shutdown, undefined),
    Effect.suspend(() =>
      Effect.forEach(
        Array.from(shell.completions.values()),
        (deferred) => Deferred.succeed(deferred, { _tag: "Closed" }),
        { discard: true }
      )
    )
  )

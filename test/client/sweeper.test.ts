/**
 * The call sweeper on its own (TestClock): every call is answered exactly once, by its reply or, at
 * its deadline, by a timeout; one sweeper fiber sleeps until the earliest deadline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber, Option, Ref, Runtime } from "effect"
import * as CallSweeper from "../../src/internal/callSweeper.js"
import { advance, settle } from "./helpers.js"

interface Answer {
  readonly at: number
  readonly call: string
  readonly answer: string
}

/** A sweeper whose answers are recorded with the virtual time, and a way to send calls through it. */
const makeSweeper = Effect.gen(function*() {
  const answers = yield* Ref.make<ReadonlyArray<Answer>>([])
  const record = (call: string, answer: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(answers, (all) => [...all, { at, call, answer }]))
  const calls = CallSweeper.make<string, string>({
    onReply: record,
    onTimeout: (call) => record(call, "timed out")
  })
  // As the client does: calls start on this fiber's runtime, and are stopped when the scope closes.
  const fork = Runtime.runFork(yield* Effect.runtime<never>())
  const by = yield* Effect.fiberId
  yield* Effect.addFinalizer(() => CallSweeper.interruptAll(calls))
  let nextId = 1
  /** Sends `call` now, due `timeout` millis later, answered by `attempt` unless it times out first. */
  const send = (call: string, timeout: number, attempt: Effect.Effect<string>) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) => Effect.sync(() => CallSweeper.start(calls, nextId++, call, now + timeout, now, attempt, fork, by))
    )
  return { calls, send, answers: Ref.get(answers) }
})

describe("call sweeper", () => {
  it.scoped("a call that gets no reply times out exactly at its deadline, and its fiber is interrupted", () =>
    Effect.gen(function*() {
      const { answers, calls, send } = yield* makeSweeper
      const interrupted = yield* Ref.make(false)
      yield* send("hung", 1000, Effect.never.pipe(Effect.onInterrupt(() => Ref.set(interrupted, true))))
      yield* advance("999 millis", "333 millis")
      expect(yield* answers).toEqual([])
      yield* advance("1 millis")
      expect(yield* answers).toEqual([{ at: 1000, call: "hung", answer: "timed out" }])
      expect(yield* Ref.get(interrupted)).toBe(true)
      // Nothing left: the sweeper is gone until the next call.
      expect(calls.inFlight.size).toBe(0)
      expect(calls.sweeper).toBeUndefined()
    }))

  it.scoped("several calls each time out at their own deadline", () =>
    Effect.gen(function*() {
      const { answers, send } = yield* makeSweeper
      yield* send("a", 1000, Effect.never)
      yield* advance("300 millis")
      yield* send("b", 1000, Effect.never)
      yield* advance("200 millis")
      yield* send("c", 300, Effect.never)
      yield* advance("2 seconds")
      expect(yield* answers).toEqual([
        { at: 800, call: "c", answer: "timed out" },
        { at: 1000, call: "a", answer: "timed out" },
        { at: 1300, call: "b", answer: "timed out" }
      ])
    }))

  it.scoped("a reply before the deadline is delivered and cancels the timeout", () =>
    Effect.gen(function*() {
      const { answers, calls, send } = yield* makeSweeper
      yield* send("quick", 1000, Effect.as(Effect.sleep("400 millis"), "done"))
      yield* advance("3 seconds")
      expect(yield* answers).toEqual([{ at: 400, call: "quick", answer: "done" }])
      expect(calls.inFlight.size).toBe(0)
      expect(calls.sweeper).toBeUndefined()
    }))

  it.scoped("an earlier deadline replaces a sweeper that would wake later; a later one does not", () =>
    Effect.gen(function*() {
      const { answers, calls, send } = yield* makeSweeper
      yield* send("late", 1000, Effect.never)
      yield* settle
      const first = calls.sweeper!
      expect(first.at).toBe(1000)
      yield* send("early", 200, Effect.never)
      yield* settle
      const second = calls.sweeper!
      expect(second.generation).toBeGreaterThan(first.generation)
      expect(second.at).toBe(200)
      // The replaced sweeper was told to stop.
      const replaced = yield* Fiber.poll(first.fiber!)
      expect(Option.isSome(replaced) && Exit.isInterrupted(replaced.value)).toBe(true)
      // A call due later than the current sweeper's wake-up keeps that sweeper.
      yield* send("later", 5000, Effect.never)
      expect(calls.sweeper).toBe(second)
      yield* advance("6 seconds")
      expect(yield* answers).toEqual([
        { at: 200, call: "early", answer: "timed out" },
        { at: 1000, call: "late", answer: "timed out" },
        { at: 5000, call: "later", answer: "timed out" }
      ])
    }))

  it.scoped("a reply that comes after its call timed out is dropped", () =>
    Effect.gen(function*() {
      const { answers, calls, send } = yield* makeSweeper
      // Uninterruptible: the reply still comes, 500 ms after the timeout.
      yield* send("slow", 1000, Effect.uninterruptible(Effect.as(Effect.sleep("1500 millis"), "too late")))
      yield* advance("3 seconds")
      expect(yield* answers).toEqual([{ at: 1000, call: "slow", answer: "timed out" }])
      expect(calls.inFlight.size).toBe(0)
    }))
})

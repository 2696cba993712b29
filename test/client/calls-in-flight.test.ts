/**
 * Backend calls in flight on their own (TestClock): every call is answered exactly once, by its reply
 * or, at its deadline, by a timeout; the deadlines live in the client's timer heap, so a call due
 * when an engine timer is due wakes the one sleeping fiber once for both.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Ref, Runtime } from "effect"
import * as CallsInFlight from "../../src/internal/callsInFlight.js"
import * as Timers from "../../src/internal/timers.js"
import { advance, settle } from "./helpers.js"

interface Answer {
  readonly at: number
  readonly call: string
  readonly answer: string
}

/** Calls whose answers (and the engine timers delivered beside them) are recorded with the virtual time. */
const makeCalls = Effect.gen(function*() {
  const answers = yield* Ref.make<ReadonlyArray<Answer>>([])
  const fork = Runtime.runFork(yield* Effect.runtime<never>())
  const record = (call: string, answer: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (at) => Ref.update(answers, (all) => [...all, { at, call, answer }]))
  const recordNow = (call: string, answer: string) => void fork(record(call, answer))
  const by = yield* Effect.fiberId
  const calls = CallsInFlight.make<string, string>({
    onReply: recordNow,
    onTimeout: (call) => recordNow(call, "timed out")
  })
  // As the client wires them: a call's deadline answered in the sleeping fiber's turn, other keys are the engine's.
  const timers = Timers.make(yield* Effect.scope, (key, id) =>
    CallsInFlight.isCallKey(key) ? CallsInFlight.timeOut(calls, id, by) : recordNow(key, "timer"))
  yield* Effect.addFinalizer(() => CallsInFlight.interruptAll(calls))
  let nextId = 1
  /** Sends `call` now, due `timeout` millis later, answered by `attempt` unless it times out first. */
  const send = (call: string, timeout: number, attempt: Effect.Effect<string>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.suspend(() => CallsInFlight.startWith(calls, timers, nextId++, call, now + timeout, (answered) => fork(Effect.map(attempt, answered)), by) ?? Effect.void))
  /** Sends `call` now without a fiber: `answers` gets the callback that answers it. */
  const sendDirect = (call: string, timeout: number, answers: Array<(reply: string) => void>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.suspend(() =>
        CallsInFlight.startWith(calls, timers, nextId++, call, now + timeout, (answered) => {
          answers.push(answered)
          return undefined
        }, by) ?? Effect.void
      ))
  /** Arms an engine timer `key` at `at`, as the loop does. */
  const arm = (key: string, at: number) => Effect.suspend(() => Timers.arm(timers, key, 0, at, by) ?? Effect.void)
  return { calls, timers, send, sendDirect, arm, answers: Ref.get(answers) }
})

describe("calls in flight", () => {
  it.scoped("a call that gets no reply times out exactly at its deadline, and its fiber is interrupted", () =>
    Effect.gen(function*() {
      const { answers, calls, send, timers } = yield* makeCalls
      const interrupted = yield* Ref.make(false)
      yield* send("hung", 1000, Effect.never.pipe(Effect.onInterrupt(() => Ref.set(interrupted, true))))
      yield* advance("999 millis", "333 millis")
      expect(yield* answers).toEqual([])
      yield* advance("1 millis")
      expect(yield* answers).toEqual([{ at: 1000, call: "hung", answer: "timed out" }])
      expect(yield* Ref.get(interrupted)).toBe(true)
      // Nothing left: no call, no deadline armed, no sleeping fiber.
      expect(calls.pending.size).toBe(0)
      expect(timers.armed.size).toBe(0)
      expect(timers.sleeper).toBeUndefined()
    }))

  it.scoped("several calls each time out at their own deadline", () =>
    Effect.gen(function*() {
      const { answers, send } = yield* makeCalls
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

  it.scoped("a reply before the deadline is delivered and cancels the deadline", () =>
    Effect.gen(function*() {
      const { answers, calls, send, timers } = yield* makeCalls
      yield* send("quick", 1000, Effect.as(Effect.sleep("400 millis"), "done"))
      yield* advance("3 seconds")
      expect(yield* answers).toEqual([{ at: 400, call: "quick", answer: "done" }])
      expect(calls.pending.size).toBe(0)
      expect(timers.armed.size).toBe(0)
    }))

  it.scoped("a call due with an engine timer is served by the same sleeping fiber: no second one", () =>
    Effect.gen(function*() {
      const { answers, send, arm, timers } = yield* makeCalls
      // A renewal: the next renewal's timer and the call's deadline one renewal period later, together.
      yield* arm("renew", 1000)
      yield* settle
      const sleeper = timers.sleeper
      expect(sleeper?.until).toBe(1000)
      yield* send("renewal", 1000, Effect.as(Effect.sleep("5 millis"), "renewed"))
      yield* settle
      expect(timers.sleeper).toBe(sleeper)
      yield* advance("1 second")
      expect(yield* answers).toEqual([{ at: 5, call: "renewal", answer: "renewed" }, { at: 1000, call: "renew", answer: "timer" }])
    }))

  it.scoped("an earlier deadline wakes the sleeping fiber earlier; a later one leaves it", () =>
    Effect.gen(function*() {
      const { answers, send, timers } = yield* makeCalls
      yield* send("late", 1000, Effect.never)
      yield* settle
      expect(timers.sleeper?.until).toBe(1000)
      yield* send("early", 200, Effect.never)
      yield* settle
      expect(timers.sleeper?.until).toBe(200)
      yield* send("later", 5000, Effect.never)
      expect(timers.sleeper?.until).toBe(200)
      yield* advance("6 seconds")
      expect(yield* answers).toEqual([
        { at: 200, call: "early", answer: "timed out" },
        { at: 1000, call: "late", answer: "timed out" },
        { at: 5000, call: "later", answer: "timed out" }
      ])
    }))

  it.scoped("a reply that comes after its call timed out is dropped", () =>
    Effect.gen(function*() {
      const { answers, calls, send } = yield* makeCalls
      // Uninterruptible: the reply still comes, 500 ms after the timeout.
      yield* send("slow", 1000, Effect.uninterruptible(Effect.as(Effect.sleep("1500 millis"), "too late")))
      yield* advance("3 seconds")
      expect(yield* answers).toEqual([{ at: 1000, call: "slow", answer: "timed out" }])
      expect(calls.pending.size).toBe(0)
    }))

  it.scoped("a call without a fiber: answered once by its callback, or at its deadline; a late answer is dropped", () =>
    Effect.gen(function*() {
      const { answers, calls, sendDirect, timers } = yield* makeCalls
      const callbacks: Array<(reply: string) => void> = []
      yield* sendDirect("quick", 1000, callbacks)
      yield* sendDirect("hung", 1000, callbacks)
      yield* advance("300 millis")
      callbacks[0]!("granted")
      callbacks[0]!("again")
      yield* settle
      yield* advance("700 millis")
      callbacks[1]!("too late")
      yield* settle
      expect(yield* answers).toEqual([
        { at: 300, call: "quick", answer: "granted" },
        { at: 1000, call: "hung", answer: "timed out" }
      ])
      expect(calls.pending.size).toBe(0)
      expect(timers.armed.size).toBe(0)
    }))

  it.scoped("a call without a fiber answered before its start returns arms no deadline", () =>
    Effect.gen(function*() {
      const { answers, calls, timers } = yield* makeCalls
      const by = yield* Effect.fiberId
      const now = yield* Clock.currentTimeMillis
      const arming = CallsInFlight.startWith(calls, timers, 99, "at once", now + 1000, (answered) => {
        answered("done")
        return undefined
      }, by)
      expect(arming).toBeUndefined()
      yield* settle
      expect(yield* answers).toEqual([{ at: 0, call: "at once", answer: "done" }])
      expect(calls.pending.size).toBe(0)
      expect(timers.armed.size).toBe(0)
    }))
})

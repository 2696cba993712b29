/**
 * Backend calls in flight and their timeouts. Each call has a deadline (one renewal period after it
 * was sent); a single sweeper fiber, sleeping until the earliest deadline, answers every overdue call
 * as timed out and interrupts it: a timeout per call would cost two more fibers and a sleep for every
 * call. Each call is answered exactly once, by its reply or by its timeout, whichever comes first; a
 * reply that comes after the timeout is dropped.
 *
 * Times are milliseconds on the monotonic clock (`Term.monotonicMillis`), as the engine's.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import * as Term from "../Term.js"
import { interruptSignal, interruptSignalNow } from "./interrupt.js"

interface InFlight<Call> {
  readonly call: Call
  readonly deadline: number
  fiber: Fiber.RuntimeFiber<unknown> | undefined
}

/** The sweeper fiber of the moment; a new one (a higher generation) replaces it for an earlier deadline. */
interface Sweeper {
  readonly generation: number
  /** When it wakes next. */
  at: number
  fiber: Fiber.RuntimeFiber<void> | undefined
}

export interface CallSweeper<Call, Reply> {
  /** Delivers the reply of a call that has not timed out. */
  readonly onReply: (call: Call, reply: Reply) => Effect.Effect<unknown>
  /** Answers a call whose deadline passed (its fiber has been told to stop). */
  readonly onTimeout: (call: Call) => Effect.Effect<unknown>
  /** The calls not answered yet, by id. */
  readonly inFlight: Map<number, InFlight<Call>>
  sweeper: Sweeper | undefined
  generation: number
}

/**
 * How the sweeper starts a fiber: at once, in the caller's turn, on the runtime of the fiber that
 * starts calls (the client's loop: `Runtime.runFork` of its runtime). Not `Effect.forkIn` a scope,
 * which costs the loop a few runtime operations and a scope entry per call: the fibers are
 * not in a scope, `interruptAll` stops them when the client closes.
 */
export type Fork = <A>(effect: Effect.Effect<A>) => Fiber.RuntimeFiber<A>

export const make = <Call, Reply>(options: {
  readonly onReply: (call: Call, reply: Reply) => Effect.Effect<unknown>
  readonly onTimeout: (call: Call) => Effect.Effect<unknown>
}): CallSweeper<Call, Reply> => ({
  onReply: options.onReply,
  onTimeout: options.onTimeout,
  inFlight: new Map(),
  sweeper: undefined,
  generation: 0
})

/**
 * Registers the call `id`, sent at `now` and due by `deadline`, and starts `attempt` (which must not
 * fail) for it in a fiber of its own, at once (`fork`; `by` is who interrupts a replaced sweeper).
 * A call that answers at once (a backend without I/O) is done before this returns.
 */
export const start = <Call, Reply>(
  calls: CallSweeper<Call, Reply>,
  id: number,
  call: Call,
  deadline: number,
  now: number,
  attempt: Effect.Effect<Reply>,
  fork: Fork,
  by: FiberId.FiberId
): void => {
  const pending: InFlight<Call> = { call, deadline, fiber: undefined }
  calls.inFlight.set(id, pending)
  // The sweeper may have answered for it already.
  const fiber = fork(Effect.flatMap(attempt, (reply) => calls.inFlight.delete(id) ? calls.onReply(call, reply) : Effect.void))
  if (calls.inFlight.get(id) !== pending) return
  pending.fiber = fiber
  sweepBy(calls, deadline, now, fork, by)
}

/**
 * Interrupts every call in flight and the sweeper, and waits for them (the client's scope closing,
 * after its session was closed). Calls started later are not tracked: nothing starts any after.
 */
export const interruptAll = <Call, Reply>(calls: CallSweeper<Call, Reply>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const fibers: Array<Fiber.RuntimeFiber<unknown>> = []
    for (const pending of calls.inFlight.values()) if (pending.fiber !== undefined) fibers.push(pending.fiber)
    if (calls.sweeper?.fiber !== undefined) fibers.push(calls.sweeper.fiber)
    calls.sweeper = undefined
    return Fiber.interruptAll(fibers)
  })

/**
 * Times out every call whose deadline has passed and returns how long to sleep until the next one
 * (undefined: none left, or this sweeper was replaced). Uninterruptible: a call taken out of
 * `inFlight` always gets its answer.
 */
const sweepOnce = <Call, Reply>(calls: CallSweeper<Call, Reply>, generation: number): Effect.Effect<number | undefined> =>
  Effect.uninterruptible(Effect.gen(function*() {
    const sweeper = calls.sweeper
    if (sweeper?.generation !== generation) return undefined
    const now = yield* Term.monotonicMillis
    let next = Number.POSITIVE_INFINITY
    for (const [id, pending] of calls.inFlight) {
      if (pending.deadline > now) {
        next = Math.min(next, pending.deadline)
        continue
      }
      calls.inFlight.delete(id)
      if (pending.fiber !== undefined) yield* interruptSignal(pending.fiber)
      yield* calls.onTimeout(pending.call)
    }
    // Replaced while it swept (an earlier deadline came in): the new sweeper sweeps from now on.
    if (calls.sweeper !== sweeper) return undefined
    if (next === Number.POSITIVE_INFINITY) {
      calls.sweeper = undefined
      return undefined
    }
    sweeper.at = next
    return Math.max(0, Math.ceil(next - now))
  }))

const runSweeper = <Call, Reply>(calls: CallSweeper<Call, Reply>, generation: number, firstWait: number) =>
  Effect.gen(function*() {
    let wait: number | undefined = firstWait
    while (wait !== undefined) {
      yield* Effect.sleep(Duration.millis(wait))
      wait = yield* sweepOnce(calls, generation)
    }
  })

/** Makes sure a sweeper wakes by `at`, replacing one that would wake later. */
const sweepBy = <Call, Reply>(calls: CallSweeper<Call, Reply>, at: number, now: number, fork: Fork, by: FiberId.FiberId): void => {
  if (calls.sweeper !== undefined && calls.sweeper.at <= at) return
  const previous = calls.sweeper?.fiber
  const current: Sweeper = { generation: ++calls.generation, at, fiber: undefined }
  calls.sweeper = current
  current.fiber = fork(runSweeper(calls, current.generation, Math.max(0, Math.ceil(at - now))))
  if (previous !== undefined) interruptSignalNow(previous, by)
}

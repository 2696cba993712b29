/**
 * Backend calls in flight and their timeouts. A call runs in a fiber of its own, or, where the
 * backend offers it (`LeaseBackend.directOf`), is started from the loop with a callback that answers
 * it: no fiber at all. Each call has a deadline (one renewal period after it
 * was sent), armed in the client's timer heap (`timers.ts`) under `callKey(id)`: the one sleeping
 * fiber that wakes for the engine's timers also answers an overdue call as timed out and interrupts
 * it, so a renewal's deadline and the next renewal's timer, due at the same instant, cost one wake-up.
 * Each call is answered exactly once, by its reply or by its timeout, whichever comes first; a reply
 * that comes after the timeout is dropped, and a reply cancels the deadline.
 *
 * Times are milliseconds on the monotonic clock (`Term.monotonicMillis`), as the engine's.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as FiberId from "effect/FiberId"
import { interruptSignalNow } from "./interrupt.js"
import * as Timers from "./timers.js"

interface Pending<Call> {
  readonly call: Call
  fiber: Fiber.RuntimeFiber<unknown> | undefined
}

export interface CallsInFlight<Call, Reply> {
  /** Delivers the reply of a call that has not timed out (queues it for the loop: never waits). */
  readonly onReply: (call: Call, reply: Reply) => void
  /** Answers a call whose deadline passed (its fiber has been told to stop), at once. */
  readonly onTimeout: (call: Call) => void
  /** The calls not answered yet, by id. */
  readonly pending: Map<number, Pending<Call>>
}

/**
 * How a call's fiber is started: at once, in the caller's turn, on the runtime of the fiber that
 * starts calls (the client's loop: `Runtime.runFork` of its runtime). Not `Effect.forkIn` a scope,
 * which costs the loop a few runtime operations and a scope entry per call: the fibers are
 * not in a scope, `interruptAll` stops them when the client closes.
 */
export type Fork = <A>(effect: Effect.Effect<A>) => Fiber.RuntimeFiber<A>

const prefix = "call:"

/** The timer key of call `id`'s deadline. The engine's keys never start so (`engine/context.ts`). */
export const callKey = (id: number): string => `${prefix}${id}`

/** Whether a timer key is a call's deadline (its timer's id is the call's). */
export const isCallKey = (key: string): boolean => key.startsWith(prefix)

export const make = <Call, Reply>(options: {
  readonly onReply: (call: Call, reply: Reply) => void
  readonly onTimeout: (call: Call) => void
}): CallsInFlight<Call, Reply> => ({ onReply: options.onReply, onTimeout: options.onTimeout, pending: new Map() })

/** Answers call `id` with `reply` unless it was answered (timed out): its deadline is cancelled. */
const answer = <Call, Reply>(calls: CallsInFlight<Call, Reply>, timers: Timers.Timers, id: number, call: Call, reply: Reply): void => {
  if (!calls.pending.delete(id)) return
  Timers.cancel(timers, callKey(id))
  calls.onReply(call, reply)
}

/**
 * Registers the call `id`, due by `deadline`, and starts it with `send`, which is given the callback
 * that answers it; arms its deadline in `timers` (as `by`). A call answered at once (a backend
 * without I/O, a call refused before it was sent) is done before this returns and arms nothing.
 * Returns the Effect `Timers.arm` needs when the timers' sleeper must be replaced by an earlier one.
 */
export const startWith = <Call, Reply>(
  calls: CallsInFlight<Call, Reply>,
  timers: Timers.Timers,
  id: number,
  call: Call,
  deadline: number,
  send: (answered: (reply: Reply) => void) => Fiber.RuntimeFiber<unknown> | undefined,
  by: FiberId.FiberId
): Effect.Effect<void> | undefined => {
  const pending: Pending<Call> = { call, fiber: undefined }
  calls.pending.set(id, pending)
  const fiber = send((reply) => answer(calls, timers, id, call, reply))
  if (calls.pending.get(id) !== pending) return undefined
  pending.fiber = fiber
  return Timers.arm(timers, callKey(id), id, deadline, by)
}

/**
 * The deadline of call `id` came (its timer fired): answers it as timed out and interrupts its fiber
 * (a direct call has none: its late answer is dropped), unless it was answered.
 */
export const timeOut = <Call, Reply>(calls: CallsInFlight<Call, Reply>, id: number, by: FiberId.FiberId): void => {
  const pending = calls.pending.get(id)
  if (pending === undefined) return
  calls.pending.delete(id)
  if (pending.fiber !== undefined) interruptSignalNow(pending.fiber, by)
  calls.onTimeout(pending.call)
}

/**
 * Interrupts every call in flight and waits for them (the client's scope closing, after its session
 * was closed). Calls started later are not tracked: nothing starts any after.
 */
export const interruptAll = <Call, Reply>(calls: CallsInFlight<Call, Reply>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const fibers: Array<Fiber.RuntimeFiber<unknown>> = []
    for (const pending of calls.pending.values()) if (pending.fiber !== undefined) fibers.push(pending.fiber)
    return Fiber.interruptAll(fibers)
  })

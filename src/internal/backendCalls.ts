/**
 * The engine's `Call` commands: each backend call is started at once, in the loop's turn (the request
 * is on its way before the step's other commands), from the loop itself when the backend offers the
 * call's direct form (its reply queued by the driver's callback), else in a fiber of its own; timed out one renewal period
 * after it was sent, and is answered to the engine exactly once as a
 * `Reply` event (`Failed` for an error or a timeout). Its deadline is a timer in the client's heap
 * (`callsInFlight.ts`).
 */
import * as Effect from "effect/Effect"
import type * as Engine from "../Engine.js"
import { BackendError } from "../LeaseBackend.js"
import * as BackendRequest from "./backendRequest.js"
import * as CallsInFlight from "./callsInFlight.js"
import { type Call, type LoopFiber, offerNow, type Shell } from "./shell.js"

/** Answers `call` to the engine. */
export const reply = (shell: Shell, call: Call, response: Engine.Response): void =>
  offerNow(shell, { _tag: "Reply", requestId: call.requestId, sentAt: call.sentAt, request: call.request, response })

/**
 * Answers `call` as failed: it outlived its timeout. (Its metrics and span belong to the backend's
 * constructor, `LeaseBackend.make`, which counts the interrupted call as a failure.)
 */
export const timedOut = (shell: Shell, call: Call): void =>
  offerNow(shell, {
    _tag: "Reply",
    requestId: call.requestId,
    sentAt: call.sentAt,
    request: call.request,
    response: {
      _tag: "Failed",
      error: new BackendError({
        backend: shell.backend.backend,
        operation: BackendRequest.operationName(call.request),
        cause: `timed out after ${Math.round(call.timeout)} ms`
      }).message
    }
  })

/**
 * Performs the `Call` command sent at `now`: the call starts at once, without a fiber where the
 * backend allows it; returns the Effect arming its deadline needs, if the timers' sleeper must wake
 * earlier for it.
 */
export const perform = (shell: Shell, call: Call, now: number, loop: LoopFiber): Effect.Effect<void> | undefined => {
  // Whole millis: TestClock cannot represent fractional instants as nanoseconds.
  const deadline = now + Math.ceil(call.timeout)
  const direct = loop.direct
  return CallsInFlight.startWith(shell.calls, shell.timers, call.requestId, call, deadline, (answered) =>
    direct !== undefined && BackendRequest.attemptDirect(direct, loop, call.request, answered)
      ? undefined
      : loop.fork(Effect.map(BackendRequest.attempt(shell.backend, call.request), answered)), loop.id)
}

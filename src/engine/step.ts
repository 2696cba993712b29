// `step`: one event into a working copy of the state, dispatched to the part of the engine it
// concerns, and the copy back as the next state with the step's commands. The top of the engine's
// modules: only the dispatch knows every handler, so the handlers never import each other to route an
// event. The session's local deadline is checked before every event, so no handler acts on a session
// whose deadline has passed.
import { close, onClosed } from "./close.js"
import { call, complete, copyGroups, failed, ok, type Step } from "./context.js"
import { onAcquire, start, stepDown, stop, workExited } from "./elections.js"
import { hint, timer } from "./hints.js"
import { join, leave, onJoined, onMembers } from "./partitions.js"
import { checkDeadline, onKeepAlive, onOpened } from "./renewal.js"
import { openSession } from "./session.js"
import { onReleased } from "./tokens.js"
import type { Command, Event, State } from "./types.js"

export const step = (state: State, event: Event, now: number): readonly [State, ReadonlyArray<Command>] => {
  const s: Step = {
    now,
    timing: state.timing,
    session: { ...state.session },
    released: state.session.released,
    tokens: state.tokens,
    idleNames: state.idleNames,
    elections: state.elections,
    edited: undefined,
    electionsByName: state.electionsByName,
    groups: copyGroups(state.groups),
    cached: state.cached,
    timers: state.timers,
    nextId: state.nextId,
    rng: state.rng,
    closing: state.closing === undefined ? undefined : [...state.closing],
    closed: state.closed,
    commands: []
  }
  checkDeadline(s)
  handle(s, event)
  // `s.session` is this step's own copy: it becomes the next state's, with the step's releases.
  s.session.released = s.released
  const next: State = {
    timing: state.timing,
    session: s.session,
    tokens: s.tokens,
    idleNames: s.idleNames,
    elections: s.elections,
    electionsByName: s.electionsByName,
    groups: s.groups,
    cached: s.cached,
    timers: s.timers,
    nextId: s.nextId,
    rng: s.rng,
    closing: s.closing,
    closed: s.closed
  }
  return [next, s.commands]
}

export const handle = (s: Step, event: Event): void => {
  if (s.closed) {
    return afterClose(s, event)
  }
  switch (event._tag) {
    case "Boot":
      return openSession(s)
    case "Start":
      return start(s, event)
    case "Stop":
      return stop(s, event.handle, event.completion, event.awaitRelease === true)
    case "StepDown":
      return stepDown(s, event.handle, event.cooldown, event.completion)
    case "Timer":
      return timer(s, event.key, event.id)
    case "Reply":
      return reply(s, event)
    case "Hint":
      return hint(s, event.hint)
    case "WorkExited":
      return workExited(s, event.handle, event.termId, event.stepDown)
    case "Join":
      return join(s, event)
    case "Leave":
      return leave(s, event.handle, event.completion)
    case "Close":
      return close(s, event.completion)
  }
}

/** After `close` completed only late replies matter: a session or lease won too late is given back. */
export const afterClose = (s: Step, event: Event): void => {
  switch (event._tag) {
    case "Start":
    case "Join":
      return complete(s, event.completion, { _tag: "Closed" })
    case "Close":
      // The session is closed but its CloseSession reply is still awaited: complete with the first close.
      if (s.closing !== undefined && s.closing.length > 0) {
        s.closing.push(event.completion)
        return
      }
      return complete(s, event.completion, { _tag: "Ok" })
    case "Stop":
    case "StepDown":
    case "Leave":
      return complete(s, event.completion, { _tag: "Ok" })
    case "Reply": {
      const { request, response } = event
      if (request._tag === "CloseSession") return onClosed(s, request)
      if (request._tag === "Release" && request.completion !== undefined) complete(s, request.completion, ok)
      if (request._tag === "OpenSession" && response._tag === "Opened") {
        call(s, { _tag: "CloseSession", sessionId: response.sessionId })
      } else if (request._tag === "Acquire" && response._tag === "Granted") {
        call(s, { _tag: "Release", sessionId: request.sessionId, name: request.name, token: response.token })
      }
      return
    }
    default:
      return
  }
}

export const reply = (s: Step, ev: Extract<Event, { _tag: "Reply" }>): void => {
  const { request, requestId, response, sentAt } = ev
  switch (request._tag) {
    case "OpenSession":
      return onOpened(s, requestId, sentAt, response)
    case "KeepAlive":
      return onKeepAlive(s, requestId, sentAt, request, response)
    case "Acquire":
      return onAcquire(s, ev, request)
    case "Join":
      return onJoined(s, requestId, request, response)
    case "Members":
      return onMembers(s, requestId, response)
    case "CloseSession":
      return onClosed(s, request)
    case "Release":
      // Confirmed or failed, a stop that waits for the release is answered now.
      if (request.completion !== undefined) complete(s, request.completion, ok)
      // A failed release is retried by rule 3 at the next renewal.
      if (response._tag === "Failed") return failed(s, "release", response.error)
      return onReleased(s, request)
    case "Leave":
      // A failed leave ends with the session.
      if (response._tag === "Failed") failed(s, "leave", response.error)
      return
    case "Withdraw":
      // A failed withdrawal leaves the session queued: a hand-off may then grant it the lease, which
      // no election wants, so it is given back (see `unaskedLease`) and goes to the next waiter.
      if (response._tag === "Failed") failed(s, "withdraw", response.error)
      return
  }
}

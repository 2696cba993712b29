// Close.
import { SimbaEvent } from "../SimbaEvent.js"
import { call, complete, disarm, edit, ok, publish, type Step } from "./context.js"
import { beginStop } from "./elections.js"
import { leave } from "./partitions.js"
import type { Request } from "./types.js"

export const close = (s: Step, completion: number): void => {
  if (s.closing !== undefined) {
    s.closing.push(completion)
    return
  }
  s.closing = [completion]
  for (const g of Array.from(s.groups.values())) leave(s, g.handle, undefined)
  for (const e of Array.from(s.elections.values())) beginStop(s, edit(s, e), "stop", "STOPPED")
  maybeFinishClose(s)
}

/** Once every work has handed over, close the session (which releases everything at once). */
export const maybeFinishClose = (s: Step): void => {
  if (s.closing === undefined || s.closed) return
  if (s.elections.size > 0 || s.groups.size > 0) return
  s.closed = true
  for (const key of Array.from(s.timers.keys())) disarm(s, key)
  const sessionId = s.session.id
  const wasOpen = sessionId !== undefined && s.session.status !== "CLOSED"
  s.session = { ...s.session, status: "CLOSED", deadline: Number.NEGATIVE_INFINITY, renewing: undefined }
  if (wasOpen) {
    call(s, { _tag: "CloseSession", sessionId })
    publish(s, SimbaEvent.SessionEnded({ sessionId, reason: "STOPPED" }))
    return
  }
  finishClose(s)
}

export const finishClose = (s: Step): void => {
  for (const completion of s.closing ?? []) complete(s, completion, ok)
  s.closing = []
}

export const onClosed = (s: Step, request: Extract<Request, { _tag: "CloseSession" }>): void => {
  if (s.closed && s.closing !== undefined && s.closing.length > 0 && request.sessionId === s.session.id) {
    finishClose(s)
  }
}

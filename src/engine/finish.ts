// The checks that end a pending leave (of a group) or close (of the client) once nothing they wait for
// is left. They run where the last election or group goes (a removal, a handover's end, a session
// lost), not once after the step's handler: what follows in the same step reads their outcome
// (`sessionLost` stops once the close it completed has closed the session) and the step's output
// keeps its order. They need only the working copy, so they sit below elections and partitions.
import { SimbaEvent } from "../SimbaEvent.js"
import { call, complete, disarm, find, liveElections, ok, publish, type Mutable, type Step } from "./context.js"
import type { GroupState } from "./types.js"

/**
 * Once none of the leaving group's elections is left, the group is gone: tell the backend (unless the
 * client is closing: closing the session leaves every group), empty its view, complete its waiters.
 */
export const maybeFinishLeave = (s: Step, g: Mutable<GroupState>): void => {
  if (find(liveElections(s), (e) => e.group === g.group) !== undefined) return
  if (!s.groups.delete(g.handle)) return
  if (s.session.id !== undefined && s.closing === undefined) {
    call(s, { _tag: "Leave", sessionId: s.session.id, group: g.group })
  }
  if (g.owned.length > 0) {
    publish(s, SimbaEvent.PartitionsAssigned({ group: g.group, partitions: [] }))
  }
  s.commands.push({ _tag: "Members", handle: g.handle, group: g.group, members: [], owned: [] })
  for (const completion of g.waiters) complete(s, completion, ok)
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

/** Completes every close waiting (the session is closed, or there was none to close). */
export const finishClose = (s: Step): void => {
  for (const completion of s.closing ?? []) complete(s, completion, ok)
  s.closing = []
}

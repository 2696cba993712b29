// The `Close` event: leave every group and stop every election (handing over where work runs), then
// close the session once they are gone (`maybeFinishClose` in `finish.ts`), and the reply that
// completes the closes waiting for it.
import { edit, type Step } from "./context.js"
import { beginStop, endCached } from "./elections.js"
import { finishClose, maybeFinishClose } from "./finish.js"
import { leave } from "./partitions.js"
import type { Request } from "./types.js"

/** Begins a close (or joins the one under way): leave every group, stop every election. */
export const close = (s: Step, completion: number): void => {
  if (s.closing !== undefined) {
    s.closing.push(completion)
    return
  }
  s.closing = [completion]
  for (const g of Array.from(s.groups.values())) leave(s, g.handle, undefined)
  for (const e of Array.from(s.elections.values())) beginStop(s, edit(s, e), "stop", "STOPPED")
  for (const name of Array.from(s.cached.keys())) endCached(s, name)
  maybeFinishClose(s)
}

/** The reply to the `CloseSession` of a finished close completes the closes waiting for it. */
export const onClosed = (s: Step, request: Extract<Request, { _tag: "CloseSession" }>): void => {
  if (s.closed && s.closing !== undefined && s.closing.length > 0 && request.sessionId === s.session.id) {
    finishClose(s)
  }
}

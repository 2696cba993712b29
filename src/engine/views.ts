// Read-only views of a state for the shell's snapshots and tests. They read a `State` between steps,
// never a step's working copy, and no step uses them.
import type { ElectionStatus } from "../SimbaEvent.js"
import { electionsNamed, find } from "./context.js"
import type { ElectionState, HintEvent, State } from "./types.js"

/** The election of `name` that is not queued, if any. */
export const electionByName = (state: State, name: string): ElectionState | undefined =>
  find(electionsNamed(state, name), (e) => e.status !== "QUEUED")

/**
 * Whether `hint` could change anything in `state`: a `Released` for a name one of its elections leads
 * or waits for (unless reserved for another session), a `Granted` to its session or of a name it
 * leads, a `GroupChanged` for a group it belongs to. The shell drops the others before they reach the
 * loop (every client hears every release in its key space). Dropping on a state read a little
 * earlier is safe: an election that starts after the hint arrived sends its first acquire after the
 * release it reports.
 */
export const wantsHint = (state: State, hint: HintEvent): boolean => {
  if (state.closed) return false
  if (hint._tag === "Granted") {
    // Ours: adopted or given back. Another session's: only a leader of the name cares.
    if (hint.to === state.session.id) return true
    for (const e of electionsNamed(state, hint.name)) {
      if (e.status === "LEADER") return true
    }
    return false
  }
  if (hint._tag === "Wanted") return hint.holder === state.session.id
  if (hint._tag === "Released") {
    // Reserved for another session: only a leader of the name cares (see `hint`).
    const forOther = hint.to !== undefined && hint.to !== state.session.id
    for (const e of electionsNamed(state, hint.name)) {
      if (e.status === "LEADER" || (e.status === "CANDIDATE" && !forOther)) return true
    }
    return false
  }
  for (const g of state.groups.values()) {
    if (g.group === hint.group) return true
  }
  return false
}

/** Public status of an election (queued locks are candidates from the outside). */
export const publicStatus = (e: ElectionState): ElectionStatus => e.status === "QUEUED" ? "CANDIDATE" : e.status

// Timers firing, and the backend's hints (released, pushed grants, group changes): each wakes the part
// of the engine it concerns (session, elections, groups), so this module sits above them all.
import { edit, electionsNamed, setStatus, type Step } from "./context.js"
import { endCached, finishHandover, tryAcquire, unaskedLease, wantedElsewhere } from "./elections.js"
import { joinGroup, listMembers } from "./partitions.js"
import { openSession, renew } from "./session.js"
import { observe } from "./tokens.js"
import type { ElectionState, HintEvent } from "./types.js"

export const timer = (s: Step, key: string, id: number): void => {
  if (s.timers.get(key) !== id) return // replaced or cancelled
  s.timers = s.timers.delete(key)
  if (key === "renew") return renew(s)
  if (key === "open") return s.session.id === undefined && s.session.opening === undefined ? openSession(s) : undefined
  if (key === "deadline") return // checkDeadline already ran
  if (key.startsWith("cache:")) return endCached(s, key.slice("cache:".length))
  const [kind, raw] = key.split(":")
  const handle = Number(raw)
  const e = s.elections.get(handle)
  switch (kind) {
    case "retry":
      return e === undefined ? undefined : tryAcquire(s, e)
    case "cooldown":
      if (e === undefined || e.status !== "COOLDOWN") return
      setStatus(s, edit(s, e), "CANDIDATE")
      return tryAcquire(s, e)
    case "handover":
      return e === undefined || e.status !== "HANDOVER" ? undefined : finishHandover(s, edit(s, e))
    case "join": {
      const g = s.groups.get(handle)
      return g === undefined ? undefined : joinGroup(s, g)
    }
  }
}

/**
 * A name we lead was released or handed to someone else: the backend may have lost our session early
 * (failover, eviction). Renew now instead of at the next period, so the term ends promptly.
 */
export const renewIfLeading = (s: Step, name: string): void => {
  for (const e of electionsNamed(s, name)) {
    if (e.status === "LEADER" && e.term !== undefined && !e.term.revoked) {
      renew(s)
      return
    }
  }
}

export const hint = (s: Step, h: HintEvent): void => {
  if (h._tag === "Granted") return pushedGrant(s, h)
  if (h._tag === "Wanted") return wantedElsewhere(s, h.name, h.holder)
  if (h._tag === "Released") {
    renewIfLeading(s, h.name)
    // Reserved for another session (FIFO hand-off): an acquire now would only be told HeldBy.
    if (h.to !== undefined && h.to !== s.session.id) return
    for (const e of electionsNamed(s, h.name)) {
      if (e.status !== "CANDIDATE") continue
      if (e.attempt !== undefined) edit(s, e).hinted = true
      else tryAcquire(s, e)
    }
    return
  }
  for (const g of s.groups.values()) {
    if (g.group === h.group) listMembers(s, g)
  }
}

/**
 * The backend handed a freed lease to a waiting session. For another session: a name we lead went to
 * someone else, so renew now (as for `Released`). For ours: the candidate of that name retries right
 * after its acquire in flight if it has one (the reply then carries the grant); otherwise see
 * `unaskedLease`.
 */
export const pushedGrant = (s: Step, h: Extract<HintEvent, { _tag: "Granted" }>): void => {
  if (h.to !== s.session.id) {
    observe(s, h.name, h.token, h.to)
    return renewIfLeading(s, h.name)
  }
  let candidate: ElectionState | undefined
  for (const e of electionsNamed(s, h.name)) {
    // Already ours (a duplicate, or the reply of an acquire came first).
    if (e.term !== undefined && e.term.sessionId === h.to && e.term.leaseToken === h.token) return
    if (e.status === "CANDIDATE") candidate = e
  }
  if (candidate !== undefined && candidate.attempt !== undefined) {
    edit(s, candidate).hinted = true
    return
  }
  // Adopted, asked for again (its reply records the token), or given back (recorded: rule 7).
  unaskedLease(s, candidate, h.to, h.name, h.token)
}

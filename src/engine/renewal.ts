// What the session's replies do to the rest of the engine: an opened session starts the groups and
// elections waiting for it, a renewal reconciles the leases it lists against the terms held (rule 3)
// and refreshes the groups' views, and a passed local deadline ends the session (rule 4). It sits above
// elections and partitions because it drives both; the session's own arithmetic is in `session.ts`.
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import {
  arm,
  call,
  edit,
  electionsNamed,
  failed,
  latest,
  liveElections,
  publish,
  random,
  retryKey,
  type Step,
  touch
} from "./context.js"
import { dropCached } from "./caching.js"
import { loseTerm, sessionLost, tryAcquire, unaskedLease } from "./elections.js"
import { OrderedMap } from "./orderedMap.js"
import { joinGroup, reconcileGroups } from "./partitions.js"
import { extendDeadline, leasesOf, nextView, renewalFailed, tokensOf } from "./session.js"
import { observe } from "./tokens.js"
import type { ElectionState, HeldLease, Request, Response } from "./types.js"

/** Rule: once the local deadline passed without a successful renewal, the session is over for us. */
export const checkDeadline = (s: Step): void => {
  if (s.closed || s.session.id === undefined) return
  if (s.session.status !== "LIVE" && s.session.status !== "SUSPENDED") return
  if (s.now >= s.session.deadline) sessionLost(s, "DEADLINE_PASSED")
}

export const onOpened = (s: Step, requestId: number, sentAt: number, response: Response): void => {
  if (requestId !== s.session.opening) {
    if (response._tag === "Opened") call(s, { _tag: "CloseSession", sessionId: response.sessionId })
    return
  }
  s.session.opening = undefined
  if (response._tag !== "Opened") {
    failed(s, "openSession", response._tag === "Failed" ? response.error : response._tag)
    return arm(s, "open", s.now + Session.candidateRetry(s.timing, random(s)))
  }
  if (Session.localDeadline(s.timing, sentAt, response.remaining) <= s.now) {
    // The reply came back after its own deadline: the session is useless to us.
    call(s, { _tag: "CloseSession", sessionId: response.sessionId })
    failed(s, "openSession", "reply arrived after the session's local deadline")
    return arm(s, "open", s.now + s.timing.minBackoff)
  }
  s.session.id = response.sessionId
  s.session.status = "LIVE"
  publish(s, SimbaEvent.SessionOpened({ sessionId: response.sessionId }))
  extendDeadline(s, sentAt, response.remaining)
  for (const g of s.groups.values()) {
    if (!g.leaving) joinGroup(s, g)
  }
  for (const e of liveElections(s)) tryAcquire(s, e)
}

export const onKeepAlive = (
  s: Step,
  requestId: number,
  sentAt: number,
  request: Extract<Request, { _tag: "KeepAlive" }>,
  response: Response
): void => {
  if (requestId !== s.session.renewing) return
  s.session.renewing = undefined
  if (response._tag === "Expired") return sessionLost(s, "SESSION_EXPIRED")
  const leases = response._tag === "Live" ? leasesOf(s, request, response) : undefined
  if (response._tag !== "Live" || leases === undefined) {
    return renewalFailed(s, response._tag === "Failed" ? response.error : `unexpected reply ${response._tag}`)
  }
  const { view, names } = nextView(s.session.leaseView, response.version, response.leases, leases)
  s.session.leaseView = view
  extendDeadline(s, sentAt, response.remaining)
  const resumed = s.session.status === "SUSPENDED" && s.session.id !== undefined
  if (resumed) {
    s.session.status = "LIVE"
    publish(s, SimbaEvent.SessionLive({ sessionId: s.session.id! }))
  }
  reconcileLeases(s, requestId, leases, names)
  reconcileGroups(s, response.groups)
  if (resumed) {
    // Joins and acquisitions that came due while SUSPENDED were skipped (and not re-armed): resume them.
    for (const g of s.groups.values()) if (!g.joined && !g.leaving) joinGroup(s, g)
    for (const e of liveElections(s)) if (!s.timers.has(retryKey(e.handle))) tryAcquire(s, e)
  }
}

/**
 * Rule 3: a term adopted before the renewal was sent but missing from its reply was taken over; a
 * lease the session holds that no election holds or is acquiring is released.
 *
 * Without `only` every name is reconciled (the first list of a session, or a backend that does not
 * version its lists). With it, only those names: the ones the view left unsettled (see `settled`),
 * touched since (an election or the token memory of the name changed), or listed differently (see
 * `nextView`). Every other name is settled, and reconciling it again would do nothing: a client
 * holding 10,000 leases does not walk them on every renewal.
 */
export const reconcileLeases = (
  s: Step,
  requestId: number,
  leases: ReadonlyArray<HeldLease>,
  only?: ReadonlyArray<string>
): void => {
  const view = s.session.leaseView
  const held = view?.tokens ?? tokensOf(leases)
  // The names to settle afterwards; what this reconciliation touches is recorded anew from here.
  const names = new Set(only)
  if (view !== undefined) s.session.leaseView = { ...view, unsettled: OrderedMap.empty() }
  const sessionId = s.session.id
  // The elections of each name as they were before this reply, seen at their newest below.
  const before = { elections: s.elections, byName: s.electionsByName }
  const claimantsOf = (name: string): Array<ElectionState> =>
    (before.byName.get(name) ?? []).map((handle) => latest(s, before.elections.get(handle)!))
  const checkTerm = (e: ElectionState): void => {
    const term = e.term
    if (term === undefined || term.sessionSeq !== s.session.seq) return
    if (only === undefined) names.add(e.name)
    if (term.adoptedSeq > requestId) return
    // A live session never loses a lease it holds unless the store lost it (reported as rule 7 does;
    // no quiet period: we were the holder, and our term ends right here).
    if (!held.has(e.name)) leaseForgotten(s, e.name, term.leaseToken)
    if (held.get(e.name) !== term.leaseToken) loseTerm(s, edit(s, e), "TAKEN_OVER")
  }
  // A cached lease the list lost or names with another token is no longer ours to use.
  const checkCached = (name: string): void => {
    const cached = s.cached.get(name)
    if (cached === undefined || cached.sessionSeq !== s.session.seq) return
    if (only === undefined) names.add(name)
    if (cached.adoptedSeq > requestId || held.get(name) === cached.leaseToken) return
    if (!held.has(name)) leaseForgotten(s, name, cached.leaseToken)
    dropCached(s, name)
  }
  if (only === undefined) {
    for (const e of liveElections(s)) checkTerm(e)
    for (const name of Array.from(s.cached.keys())) checkCached(name)
  } else {
    for (const name of only) {
      for (const e of electionsNamed(s, name)) checkTerm(e)
      checkCached(name)
    }
  }
  const listed: Array<readonly [string, bigint]> = []
  if (only === undefined) {
    for (const l of leases) {
      listed.push([l.name, l.token])
      names.add(l.name)
    }
  } else {
    for (const name of only) {
      const token = held.get(name)
      if (token !== undefined) listed.push([name, token])
    }
  }
  if (sessionId !== undefined) {
    for (const [name, token] of listed) {
      const claimants = claimantsOf(name)
      const wanted = s.cached.get(name)?.leaseToken === token ||
        claimants.some((e) => e.attempt !== undefined || e.term?.leaseToken === token)
      if (!wanted) unaskedLease(s, claimants.find((e) => e.status === "CANDIDATE"), sessionId, name, token)
    }
    // After the unasked leases were judged against what was seen before this reply (rule 7).
    for (const [name, token] of listed) observe(s, name, token, sessionId, requestId)
  }
  for (const name of names) {
    if (!settled(s, requestId, held, name)) touch(s, name)
  }
}

/**
 * Whether reconciling `name` again against the same list, in reply to a later renewal, would do
 * nothing as long as neither its elections nor its token memory change: every term of the live
 * session of the name is old enough to be judged (adopted before `requestId`) and listed with its
 * token; and a listed lease is wanted by an election and already in the memory as this session's.
 * (A lease nobody wants stays unsettled: it is given back at every renewal until the list drops it.)
 */
export const settled = (s: Step, requestId: number, held: ReadonlyMap<string, bigint>, name: string): boolean => {
  const token = held.get(name)
  let wanted = false
  for (const e of electionsNamed(s, name)) {
    const term = e.term
    if (
      term !== undefined && term.sessionSeq === s.session.seq && (term.adoptedSeq > requestId || term.leaseToken !== token)
    ) {
      return false
    }
    if (e.attempt !== undefined || (token !== undefined && term?.leaseToken === token)) wanted = true
  }
  const cached = s.cached.get(name)
  if (cached !== undefined && cached.sessionSeq === s.session.seq) {
    if (cached.adoptedSeq > requestId || cached.leaseToken !== token) return false
    wanted = true
  }
  if (token === undefined) return true
  const known = s.tokens.get(name)
  return wanted && known !== undefined && known.token === token && known.holder === s.session.id
}

/** A renewal no longer lists a lease of a term of the live session: the store lost it (rule 7). */
export const leaseForgotten = (s: Step, name: string, token: bigint): void => {
  const known = s.tokens.get(name)?.token
  publish(s, SimbaEvent.TokenRegressed({ name, seen: known !== undefined && known > token ? known : token, token: undefined }))
}

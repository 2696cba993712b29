// The session: opening, renewal, deadline, and its loss (rules 3 and 4).
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import type { SessionEndReason } from "../SimbaEvent.js"
import type { RevokeReason } from "../Term.js"
import { maybeFinishClose } from "./close.js"
import {
  arm,
  call,
  disarm,
  edit,
  electionsNamed,
  failed,
  latest,
  liveElections,
  publish,
  random,
  retryKey,
  type Step,
  touch,
  type Writable
} from "./context.js"
import { loseTerm, remove, tryAcquire } from "./elections.js"
import { unaskedLease } from "./hints.js"
import { OrderedMap } from "./orderedMap.js"
import { joinGroup, reconcileGroups } from "./partitions.js"
import { observe } from "./tokens.js"
import type { ElectionState, HeldLease, LeaseView, Request, Response } from "./types.js"

export const sessionUsable = (s: Step): boolean =>
  s.session.id !== undefined && (s.session.status === "LIVE" || s.session.status === "SUSPENDED") &&
  s.now < s.session.deadline

export const openSession = (s: Step): void => {
  disarm(s, "renew")
  disarm(s, "deadline")
  disarm(s, "open")
  s.session = {
    ...s.session,
    seq: s.session.seq + 1,
    id: undefined,
    status: "OPENING",
    deadline: Number.NEGATIVE_INFINITY,
    every: s.timing.renewInterval,
    shortenedPublished: false,
    renewing: undefined,
    opening: undefined,
    leaseView: undefined
  }
  s.released = OrderedMap.empty()
  s.session.opening = call(s, { _tag: "OpenSession", ttl: s.timing.leaseDuration })
}

/** Rule: once the local deadline passed without a successful renewal, the session is over for us. */
export const checkDeadline = (s: Step): void => {
  if (s.closed || s.session.id === undefined) return
  if (s.session.status !== "LIVE" && s.session.status !== "SUSPENDED") return
  if (s.now >= s.session.deadline) sessionLost(s, "DEADLINE_PASSED")
}

/** Applies a reply's remaining time: the deadline only moves forward; the renewal period may shorten. */
export const extendDeadline = (s: Step, sentAt: number, remaining: number): void => {
  const deadline = Session.localDeadline(s.timing, sentAt, remaining)
  if (deadline > s.session.deadline) s.session.deadline = deadline
  const { every, shortened } = Session.renewEvery(s.timing, remaining)
  s.session.every = every
  if (shortened && !s.session.shortenedPublished && s.session.id !== undefined) {
    s.session.shortenedPublished = true
    publish(s, SimbaEvent.SessionLeaseShortened({ sessionId: s.session.id, granted: remaining, renewEvery: every }))
  }
  s.effects.push({ _tag: "Deadline", sessionSeq: s.session.seq, deadline: s.session.deadline })
  arm(s, "deadline", s.session.deadline)
  arm(s, "renew", sentAt + s.session.every)
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

export const renew = (s: Step): void => {
  if (!sessionUsable(s) || s.session.renewing !== undefined || s.session.id === undefined) return
  s.session.renewing = call(s, {
    _tag: "KeepAlive",
    sessionId: s.session.id,
    ttl: s.timing.leaseDuration,
    known: s.session.leaseView?.version
  })
}

/**
 * The leases a `Live` reply stands for: its own list, or (when it says "unchanged since `known`") the
 * list of the reply that carried that version; `undefined` when the reply names a version this
 * session never read (a backend fault: treated as a failed renewal).
 */
export const leasesOf = (
  s: Step,
  request: Extract<Request, { _tag: "KeepAlive" }>,
  response: Extract<Response, { _tag: "Live" }>
): ReadonlyArray<HeldLease> | undefined => {
  if (response.leases !== undefined) return response.leases
  const view = s.session.leaseView
  return view !== undefined && request.known === view.version ? view.leases : undefined
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

/** A renewal failed (or answered what it cannot mean): suspend and retry with halving backoff. */
export const renewalFailed = (s: Step, error: string): void => {
  failed(s, "keepAlive", error)
  if (s.session.status === "LIVE" && s.session.id !== undefined) {
    s.session.status = "SUSPENDED"
    publish(s, SimbaEvent.SessionSuspended({ sessionId: s.session.id }))
  }
  const backoff = Session.renewalBackoff(s.timing, s.now, s.session.deadline, s.session.every)
  arm(s, "renew", s.now + backoff)
}

const tokensOf = (leases: ReadonlyArray<HeldLease>): ReadonlyMap<string, bigint> =>
  new Map(leases.map((l) => [l.name, l.token]))

/**
 * The view a `Live` reply leaves, and the names its reconciliation must look at (`undefined`: all).
 * "Unchanged since the version we know" keeps the view and its unsettled names. A new list keeps
 * them too, with every name whose listing changed (added, dropped, another token): a name settled
 * against the old list and listed the same in the new one is settled against it (see `settled`), so
 * a renewal reply after one lock of 10,000 was released does not walk the other 9,999.
 */
export const nextView = (
  previous: LeaseView | undefined,
  version: string | undefined,
  listed: ReadonlyArray<HeldLease> | undefined,
  leases: ReadonlyArray<HeldLease>
): { readonly view: LeaseView | undefined; readonly names: ReadonlyArray<string> | undefined } => {
  if (version === undefined) return { view: undefined, names: undefined }
  if (listed === undefined && previous !== undefined && version === previous.version) {
    return { view: previous, names: Array.from(previous.unsettled.keys()) }
  }
  const tokens = tokensOf(leases)
  const view: LeaseView = { version, leases, tokens, unsettled: OrderedMap.empty() }
  if (previous === undefined) return { view, names: undefined }
  const names = new Set(previous.unsettled.keys())
  for (const [name, token] of tokens) if (previous.tokens.get(name) !== token) names.add(name)
  for (const name of previous.tokens.keys()) if (!tokens.has(name)) names.add(name)
  return { view, names: Array.from(names) }
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
    if (!held.has(e.name)) leaseForgotten(s, e.name, term.token)
    if (held.get(e.name) !== term.token) loseTerm(s, edit(s, e), "TAKEN_OVER")
  }
  if (only === undefined) {
    for (const e of liveElections(s)) checkTerm(e)
  } else {
    for (const name of only) for (const e of electionsNamed(s, name)) checkTerm(e)
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
      const wanted = claimants.some((e) => e.attempt !== undefined || e.term?.token === token)
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
    if (term !== undefined && term.sessionSeq === s.session.seq && (term.adoptedSeq > requestId || term.token !== token)) {
      return false
    }
    if (e.attempt !== undefined || (token !== undefined && term?.token === token)) wanted = true
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

/** Rule 4: an expired (or, for us, ended) session is never revived: revoke all, open a new one. */
export const sessionLost = (s: Step, reason: SessionEndReason & RevokeReason): void => {
  const sessionId = s.session.id
  // Try-locks whose one attempt the lost session abandoned end (after the new session is asked for).
  const triedOut: Array<Writable<ElectionState>> = []
  for (const current of liveElections(s)) {
    if (current.attempt === undefined && current.term === undefined) continue
    const e = edit(s, current)
    if (e.attempt !== undefined && e.tryCompletion !== undefined) triedOut.push(e)
    if (e.attempt !== undefined) e.attempt = undefined
    if (e.term !== undefined) loseTerm(s, e, reason)
  }
  for (const g of s.groups.values()) {
    g.joined = false
    g.joining = undefined
    g.listing = undefined
  }
  // Losing the terms ended the last handover of a pending close, which has already closed the session.
  if (s.closed) return
  if (sessionId !== undefined) {
    publish(s, SimbaEvent.SessionEnded({ sessionId, reason }))
    // Best effort: if the backend is reachable after all, free our leases now rather than at expiry.
    if (reason === "DEADLINE_PASSED") call(s, { _tag: "CloseSession", sessionId })
  }
  if (s.closing !== undefined) {
    s.session = { ...s.session, id: undefined, status: "CLOSED", deadline: Number.NEGATIVE_INFINITY }
  } else {
    openSession(s)
  }
  for (const e of triedOut) if (s.elections.has(e.handle)) remove(s, e)
  maybeFinishClose(s)
}

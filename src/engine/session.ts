// The session itself: whether it is usable, opening it, its local deadline and renewal period, the
// renewal request, and the versioned lease lists renewal replies carry. It knows nothing of elections
// or groups, so every other part of the engine can build on it; what a session's replies do to the
// elections and groups is `renewal.ts`, and the end of a session (rule 4) is `sessionLost` in
// `elections.ts`.
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import { arm, call, disarm, failed, publish, type Step } from "./context.js"
import { OrderedMap } from "./orderedMap.js"
import type { HeldLease, LeaseView, Request, Response } from "./types.js"

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

/** Applies a reply's remaining time: the deadline only moves forward; the renewal period may shorten. */
export const extendDeadline = (s: Step, sentAt: number, remaining: number): void => {
  const deadline = Session.localDeadline(s.timing, sentAt, remaining)
  if (deadline > s.session.deadline) s.session.deadline = deadline
  const { every, shortened } = Session.renewEvery(s.timing, remaining)
  s.session.every = every
  // Below what a full grant answers, or on a backend that gives no such rule: the store granted less.
  const shortGrant = s.timing.fullGrant === undefined || remaining < s.timing.fullGrant
  if (shortened && shortGrant && !s.session.shortenedPublished && s.session.id !== undefined) {
    s.session.shortenedPublished = true
    publish(s, SimbaEvent.SessionLeaseShortened({ sessionId: s.session.id, granted: remaining, renewEvery: every }))
  }
  s.commands.push({ _tag: "Deadline", sessionSeq: s.session.seq, deadline: s.session.deadline })
  arm(s, "deadline", s.session.deadline)
  arm(s, "renew", sentAt + s.session.every)
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

export const tokensOf = (leases: ReadonlyArray<HeldLease>): ReadonlyMap<string, bigint> =>
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

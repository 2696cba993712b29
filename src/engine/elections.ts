// Elections and locks: candidacy, acquire replies, terms, stop / step-down / handover (rules 1, 2, 5,
// 6), leases nobody asked for (adopted or given back), and the loss of the session (rule 4), which is
// the end of every term. Everything a reply or a timer can do to an election is here, so partitions,
// hints and renewal build on it; it reaches below only to the session's own state (`session.ts`) and to
// the checks that end a pending leave or close (`finish.ts`).
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import type { SessionEndReason } from "../SimbaEvent.js"
import type { RevokeReason } from "../Term.js"
import {
  addElection,
  arm,
  call,
  complete,
  cooldownKey,
  deleteElection,
  disarm,
  edit,
  electionsNamed,
  failed,
  find,
  handoverKey,
  latest,
  liveElections,
  nextId,
  notAcquired,
  ok,
  publish,
  random,
  retryKey,
  setStatus,
  type Step,
  type Writable
} from "./context.js"
import { dropCached, firstOfBlock, keepCached, reservedTokens } from "./caching.js"
import { maybeFinishClose, maybeFinishLeave } from "./finish.js"
import { openSession, sessionUsable } from "./session.js"
import { aboveSeen, observe, quietUntil, retireName, reviveName } from "./tokens.js"
import type { ElectionState, Event, Outcome, Request, TermState } from "./types.js"

export const newElection = (
  s: Step,
  fields:
    & Pick<ElectionState, "handle" | "name" | "kind" | "group" | "partition" | "hasWork" | "tryCompletion">
    & { readonly keep?: number | undefined; readonly refusal?: number | undefined }
): Writable<ElectionState> => {
  // Every field written here, in one order (no spread, none added later): one object shape for all
  // elections, which keeps the engine's property reads monomorphic.
  const created: ElectionState = {
    handle: fields.handle,
    name: fields.name,
    kind: fields.kind,
    group: fields.group,
    partition: fields.partition,
    hasWork: fields.hasWork,
    status: "CANDIDATE",
    attempt: undefined,
    hinted: false,
    seenToken: undefined,
    queuedAs: undefined,
    term: undefined,
    cooldownUntil: 0,
    afterHandover: "stop",
    waiters: [],
    tryCompletion: fields.tryCompletion,
    refusal: fields.refusal,
    keep: fields.keep ?? 0,
    wantedElsewhere: false
  }
  const e = created as Writable<ElectionState>
  addElection(s, e)
  reviveName(s, e.name)
  return e
}

export const start = (s: Step, ev: Extract<Event, { _tag: "Start" }>): void => {
  const refuse = (outcome: Outcome): void => {
    complete(s, ev.completion, outcome)
    if (ev.tryCompletion !== undefined) complete(s, ev.tryCompletion, outcome)
  }
  if (s.closing !== undefined) return refuse({ _tag: "Closed" })
  const same = Array.from(electionsNamed(s, ev.name))
  if (same.length > 0 && !(ev.kind === "lock" && same.every((e) => e.kind === "lock"))) {
    return refuse({ _tag: "AlreadyStarted", name: ev.name })
  }
  // A try-lock never queues: a lock of this client holds or wants the name.
  if (same.length > 0 && ev.tryCompletion !== undefined) {
    complete(s, ev.completion, ok)
    return complete(s, ev.tryCompletion, notAcquired)
  }
  const e = newElection(s, {
    handle: ev.handle,
    name: ev.name,
    kind: ev.kind,
    group: undefined,
    partition: undefined,
    hasWork: ev.hasWork,
    tryCompletion: ev.tryCompletion,
    keep: ev.kind === "lock" && ev.keep !== undefined && ev.keep > 0 ? ev.keep : 0,
    refusal: ev.kind === "lock" ? ev.refusal : undefined
  })
  complete(s, ev.completion, ok)
  if (same.length > 0) {
    // Locks of one name in one client queue FIFO (handles are allocated in call order).
    e.status = "QUEUED"
    return
  }
  publish(s, SimbaEvent.StatusChanged({ name: e.name, status: "CANDIDATE" }))
  tryAcquire(s, e)
}

export const tryAcquire = (s: Step, current: ElectionState): void => {
  const e = latest(s, current)
  if (e.status !== "CANDIDATE" || e.attempt !== undefined || !sessionUsable(s) || s.session.id === undefined) return
  if (s.session.status !== "LIVE") return
  // Rule 7: after a regression, no acquire of the name until the quiet period is over.
  const quiet = quietUntil(s, e.name)
  // A try-lock does not wait for it: not acquired.
  if (s.now < quiet) return e.tryCompletion !== undefined ? remove(s, edit(s, e)) : arm(s, retryKey(e.handle), quiet)
  disarm(s, retryKey(e.handle))
  const w = edit(s, e)
  // A lease this client keeps cached: the term starts now, with the next token of its block.
  const cached = s.cached.get(e.name)
  if (cached !== undefined && cached.sessionSeq === s.session.seq && s.closing === undefined) {
    dropCached(s, e.name)
    return adopt(s, w, cached.leaseToken, cached.next, cached)
  }
  w.hinted = false
  w.attempt = call(
    s,
    e.keep > 0
      ? { _tag: "Acquire", sessionId: s.session.id, name: e.name, reserve: reservedTokens }
      : { _tag: "Acquire", sessionId: s.session.id, name: e.name }
  )
}

export const scheduleRetry = (s: Step, e: Writable<ElectionState>, sentAt: number, holderRemaining?: number): void => {
  let at = s.now + Session.candidateRetry(s.timing, random(s))
  if (holderRemaining !== undefined) {
    at = Math.min(at, Session.afterHolderExpiry(s.timing, sentAt, holderRemaining, random(s)))
  }
  arm(s, retryKey(e.handle), Math.max(at, quietUntil(s, e.name)))
}

export const onAcquire = (
  s: Step,
  ev: Extract<Event, { _tag: "Reply" }>,
  request: Extract<Request, { _tag: "Acquire" }>
): void => {
  const response = ev.response
  // An attempt asks for its election's name, so only that name's elections can be waiting for this reply.
  const waiting = find(electionsNamed(s, request.name), (x) => x.attempt === ev.requestId)
  if (waiting === undefined) {
    // Rule 1: a reply to an abandoned attempt that won a lease gives it back, unless a term of ours holds
    // that very lease: acquire is idempotent, so an abandoned attempt and the one that replaced it can
    // both be granted the same token, and releasing it would free the current term's lease.
    if (response._tag === "Granted") {
      const { token } = response
      const ours = s.cached.get(request.name)?.leaseToken === token ||
        find(electionsNamed(s, request.name), (x) =>
          x.term?.sessionId === request.sessionId && x.term.leaseToken === token
        ) !== undefined
      if (!ours) giveBack(s, request.sessionId, request.name, token)
    } else if (response._tag === "HeldBy" && request.sessionId === s.session.id && !wanted(s, request.name)) {
      // An abandoned attempt may have queued the session after the election withdrew: withdraw again.
      call(s, { _tag: "Withdraw", sessionId: request.sessionId, name: request.name })
    }
    return
  }
  const e = edit(s, waiting)
  e.attempt = undefined
  // A try-lock's one attempt: anything but an adopted grant ends it.
  const retry = e.tryCompletion === undefined
  switch (response._tag) {
    case "Granted": {
      const current = request.sessionId === s.session.id && sessionUsable(s)
      observe(s, e.name, response.token, request.sessionId, ev.requestId)
      if (current && aboveReleased(s, e.name, response.token) && s.now >= quietUntil(s, e.name)) {
        const reserved = request.reserve === undefined ? undefined : response.reserved
        return adopt(s, e, response.token, firstOfBlock(response.token, reserved))
      }
      giveBack(s, request.sessionId, request.name, response.token)
      return retry ? scheduleRetry(s, e, ev.sentAt) : remove(s, e)
    }
    case "HeldBy":
      if (response.token !== undefined) observe(s, e.name, response.token, undefined, ev.requestId)
      see(s, e, response.token)
      e.queuedAs = request.sessionId
      // A try-lock ends here; `remove` withdraws the waiter the HeldBy may have queued.
      if (!retry) return remove(s, e)
      if (e.hinted) return tryAcquire(s, e)
      return scheduleRetry(s, e, ev.sentAt, response.remaining)
    case "Expired":
      if (request.sessionId === s.session.id) sessionLost(s, "SESSION_EXPIRED")
      if (!retry && s.elections.has(e.handle)) remove(s, e)
      return
    case "Conflict":
      // A lock ends with the store's reason; an election keeps trying (and logs why it cannot win).
      if (e.refusal !== undefined) {
        complete(s, e.refusal, { _tag: "Conflict", name: e.name, held: response.held, asked: response.asked })
        e.refusal = undefined
        return remove(s, e)
      }
      failed(s, "acquire", `${e.name} is held as ${response.held}, asked as ${response.asked}`)
      return retry ? scheduleRetry(s, e, ev.sentAt) : remove(s, e)
    default:
      failed(s, "acquire", response._tag === "Failed" ? response.error : response._tag)
      return retry ? scheduleRetry(s, e, ev.sentAt) : remove(s, e)
  }
}

export const see = (s: Step, e: ElectionState, token: bigint | undefined): void => {
  if (token !== undefined && (e.seenToken === undefined || token > e.seenToken)) edit(s, e).seenToken = token
}

/**
 * A term of the lease the session holds with `leaseToken`: granted now, or (`cached`) kept since an
 * earlier term. `token` is the term's own: the lease's, or the next of the lease's block.
 */
export const adopt = (
  s: Step,
  e: Writable<ElectionState>,
  leaseToken: bigint,
  token = leaseToken,
  cached?: { readonly leaseSince: number; readonly adoptedSeq: number }
): void => {
  const sessionId = s.session.id as string
  const termId = nextId(s)
  observe(s, e.name, leaseToken, sessionId)
  see(s, e, leaseToken)
  e.queuedAs = undefined
  e.term = {
    termId,
    token,
    leaseToken,
    leaseSince: cached?.leaseSince ?? s.now,
    sessionId,
    sessionSeq: s.session.seq,
    adoptedSeq: cached?.adoptedSeq ?? termId,
    workRunning: e.hasWork,
    revoked: false
  }
  disarm(s, retryKey(e.handle))
  s.commands.push({
    _tag: "Elected",
    handle: e.handle,
    termId,
    name: e.name,
    token,
    leaseToken,
    sessionId,
    sessionSeq: s.session.seq,
    kind: e.kind,
    group: e.group,
    partition: e.partition,
    hasWork: e.hasWork
  })
  publish(s, SimbaEvent.Elected({ name: e.name, token }), e.kind)
  setStatus(s, e, "LEADER")
  if (e.tryCompletion !== undefined) {
    complete(s, e.tryCompletion, ok)
    e.tryCompletion = undefined
  }
}

/** Rule 2, first half: revoke (exactly once per term). */
export const revoke = (s: Step, e: Writable<ElectionState>, reason: RevokeReason): void => {
  const term = e.term
  if (term === undefined || term.revoked) return
  e.term = { ...term, revoked: true }
  s.commands.push({ _tag: "Revoked", handle: e.handle, termId: term.termId, name: e.name, token: term.token, reason })
  publish(s, SimbaEvent.Revoked({ name: e.name, token: term.token, reason }), e.kind)
}

/**
 * Rule 2, second half: release with the lease's token, after revocation; or, for a lock with `keep`,
 * keep the lease cached (see `caches`).
 */
export const releaseLease = (s: Step, e: Writable<ElectionState>, completion?: number): void => {
  const term = e.term
  if (term === undefined) return
  e.term = undefined
  if (completion === undefined && caches(s, e, term)) return keepCached(s, e.name, term, e.keep)
  giveBack(s, term.sessionId, e.name, term.leaseToken, completion)
}

/**
 * Whether a lock's lease stays cached after its term: the lock asked to `keep` it, nobody else asked
 * for it, its block has a token left, the session is live and not closing, no regression is being
 * waited out, and the lease was granted less than `max(keep, renew interval)` ago (so a waiter whose
 * `Wanted` message was lost waits for a bounded time, however often this client takes the name).
 */
const caches = (s: Step, e: ElectionState, term: TermState): boolean =>
  e.keep > 0 && !e.wantedElsewhere && term.token < term.leaseToken && term.sessionSeq === s.session.seq &&
  term.sessionId === s.session.id && s.session.status === "LIVE" && sessionUsable(s) && s.closing === undefined &&
  s.now < term.leaseSince + Math.max(e.keep, s.session.every) && s.now >= quietUntil(s, e.name)

/** Releases the cached lease of `name` (`keep` passed, someone wants it, the client closes). */
export const endCached = (s: Step, name: string): void => {
  const cached = dropCached(s, name)
  if (cached === undefined) return
  if (cached.sessionSeq === s.session.seq) giveBack(s, cached.sessionId, name, cached.leaseToken)
}

/**
 * Another session queued for `name` behind our session: a cached lease goes at once, a term of it
 * releases (never caches) when it ends.
 */
export const wantedElsewhere = (s: Step, name: string, holder: string): void => {
  if (holder !== s.session.id) return
  endCached(s, name)
  for (const e of electionsNamed(s, name)) {
    if (e.term !== undefined && !e.wantedElsewhere) edit(s, e).wantedElsewhere = true
  }
}

/**
 * Releases a lease and, for the current session, records its token (rule 1): the release may reach
 * the backend after a retried acquire that the backend answers with the same token (acquire is
 * idempotent), and adopting that grant would make a term of a lease the late release then frees.
 */
export const giveBack = (s: Step, sessionId: string, name: string, token: bigint, completion?: number): void => {
  observe(s, name, token, sessionId)
  // A renewal reply or a pushed grant may still name this token later: never adopt it then.
  for (const e of electionsNamed(s, name)) see(s, e, token)
  if (sessionId === s.session.id && aboveReleased(s, name, token)) s.released = s.released.set(name, token)
  call(s, completion === undefined ? { _tag: "Release", sessionId, name, token } : { _tag: "Release", sessionId, name, token, completion })
}

/** `token` is above the last token of `name` this session released (rule 1), or none was released. */
export const aboveReleased = (s: Step, name: string, token: bigint): boolean => {
  const released = s.released.get(name)
  return released === undefined || token > released
}

/**
 * A lease the session holds that no reply granted: handed to it by the backend's FIFO hand-off (a
 * pushed grant, or one whose message was lost and that a renewal lists), or the leftover of an
 * abandoned attempt. The waiting candidate adopts it only if the token is above every token of the
 * name it has seen (a holder's in a `HeldBy`, its own terms': so never a late or duplicate message, or a
 * renewal reply, about an earlier grant) and above any we released, and the session is live. While
 * the session is SUSPENDED such a lease is neither adopted nor given back: it waits for the next
 * renewal's list.
 *
 * A candidate that has seen no token of the name (its acquire failed, timed out, or was answered
 * `HeldBy` without one) cannot tell a current grant from a late message about an earlier one, so it
 * asks: acquire is idempotent, and its reply (the same grant, or a refusal) is judged as any reply.
 * Giving such a grant back would cost the waiter its place in the store's queue.
 *
 * Otherwise the lease is given back (a no-op on the backend when stale).
 */
export const unaskedLease = (
  s: Step,
  candidate: ElectionState | undefined,
  sessionId: string,
  name: string,
  token: bigint
): void => {
  const acceptable = candidate !== undefined && sessionId === s.session.id && sessionUsable(s) &&
    aboveReleased(s, name, token) && aboveSeen(s, name, token) && s.now >= quietUntil(s, name)
  // A session in doubt (SUSPENDED) starts no term, and giving the grant back would cost the waiter its
  // place in the store's queue: it stays with the session, and the next successful renewal lists it
  // (the grant changed the session's lease set), which judges it again; a passed deadline ends both.
  if (acceptable && s.session.status !== "LIVE") return
  // The reply records the token (rule 7); the lease is not the candidate's until then.
  if (acceptable && candidate.seenToken === undefined && candidate.attempt === undefined) return tryAcquire(s, candidate)
  if (acceptable && candidate.seenToken !== undefined && token > candidate.seenToken) return adopt(s, edit(s, candidate), token)
  giveBack(s, sessionId, name, token)
}

/**
 * An election stops wanting its name (stopped, timed out, interrupted, closing, cooling down) while a
 * `HeldBy` may have left its session in the backend's waiter queue: tell the backend, so the queue
 * does not keep a waiter that no longer waits. Not while another election of this client still wants
 * the name (a queued lock inherits the session's place), nor when the election holds the lease.
 */
export const withdraw = (s: Step, e: Writable<ElectionState>): void => {
  const sessionId = e.queuedAs
  e.queuedAs = undefined
  // A waiter of an earlier session leaves with it (the backend skips waiters whose session is gone).
  if (sessionId === undefined || sessionId !== s.session.id || e.term !== undefined) return
  if (wanted(s, e.name, e)) return
  call(s, { _tag: "Withdraw", sessionId, name: e.name })
}

/** Whether an election of this client other than `except` still wants (or holds) `name`. */
export const wanted = (s: Step, name: string, except?: ElectionState): boolean => {
  for (const e of electionsNamed(s, name)) {
    if (e.handle !== except?.handle && e.status !== "COOLDOWN") return true
  }
  return false
}

/** Involuntary loss: revoke at once, do not wait for the work, go back to candidacy (locks end). */
export const loseTerm = (s: Step, e: Writable<ElectionState>, reason: RevokeReason): void => {
  revoke(s, e, reason)
  e.term = undefined
  if (e.status === "HANDOVER") return finishHandover(s, e)
  if (e.kind === "lock") return remove(s, e)
  setStatus(s, e, "CANDIDATE")
  if (reason === "TAKEN_OVER") scheduleRetry(s, e, s.now)
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
  // Cached leases go with the session (the store frees them when it ends it).
  for (const name of Array.from(s.cached.keys())) dropCached(s, name)
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

export const stop = (s: Step, handle: number, completion: number, awaitRelease = false): void => {
  const found = s.elections.get(handle)
  if (found === undefined) return complete(s, completion, ok)
  const e = edit(s, found)
  // A lease released in this step carries the completion: answered by the release's reply.
  const releasesNow = awaitRelease && e.status === "LEADER" && e.term !== undefined && !handsOver(s, e)
  if (!releasesNow) e.waiters = [...e.waiters, completion]
  beginStop(s, e, "stop", "STOPPED", releasesNow ? completion : undefined)
}

/** A leader with running work keeps its lease until the work exits (rule 5). */
const handsOver = (s: Step, e: ElectionState): boolean => e.term?.workRunning === true && sessionUsable(s)

/** Voluntary end of a term (rule 5): with running work, hold the lease until it exits or the deadline. */
export const beginStop = (
  s: Step,
  e: Writable<ElectionState>,
  after: "stop" | "cooldown",
  reason: "STOPPED" | "STEPPED_DOWN",
  releaseCompletion?: number
): void => {
  switch (e.status) {
    case "HANDOVER":
      if (after === "stop") e.afterHandover = "stop"
      return
    case "LEADER": {
      revoke(s, e, reason)
      if (handsOver(s, e)) {
        e.afterHandover = after
        setStatus(s, e, "HANDOVER")
        return arm(s, handoverKey(e.handle), s.session.deadline)
      }
      releaseLease(s, e, releaseCompletion)
      return after === "stop" ? remove(s, e) : enterCooldown(s, e)
    }
    default:
      return after === "stop" ? remove(s, e) : enterCooldown(s, e)
  }
}

export const stepDown = (s: Step, handle: number, cooldown: number, completion: number): void => {
  const found = s.elections.get(handle)
  if (found === undefined) return complete(s, completion, ok)
  const e = edit(s, found)
  e.cooldownUntil = Math.max(e.cooldownUntil, s.now + Math.max(0, cooldown))
  e.waiters = [...e.waiters, completion]
  beginStop(s, e, "cooldown", "STEPPED_DOWN")
}

export const enterCooldown = (s: Step, e: Writable<ElectionState>): void => {
  withdraw(s, e)
  e.attempt = undefined
  e.hinted = false
  disarm(s, retryKey(e.handle))
  setStatus(s, e, "COOLDOWN")
  arm(s, cooldownKey(e.handle), e.cooldownUntil)
  completeWaiters(s, e)
}

export const completeWaiters = (s: Step, e: Writable<ElectionState>): void => {
  for (const completion of e.waiters) complete(s, completion, ok)
  e.waiters = []
}

export const finishHandover = (s: Step, e: Writable<ElectionState>): void => {
  disarm(s, handoverKey(e.handle))
  releaseLease(s, e)
  if (e.afterHandover === "stop") return remove(s, e)
  enterCooldown(s, e)
}

export const workExited = (s: Step, handle: number, termId: number, stepDown: number | undefined): void => {
  const found = s.elections.get(handle)
  if (found === undefined || found.term === undefined || found.term.termId !== termId) return
  const e = edit(s, found)
  e.term = { ...found.term, workRunning: false }
  if (e.status === "HANDOVER") return finishHandover(s, e)
  // Failed work ends its own term only: a later term of the same election is not touched.
  if (stepDown !== undefined && e.status === "LEADER") {
    e.cooldownUntil = Math.max(e.cooldownUntil, s.now + Math.max(0, stepDown))
    beginStop(s, e, "cooldown", "STEPPED_DOWN")
  }
}

/** Removes an election for good (its lease, if any, was released before). */
export const remove = (s: Step, e: Writable<ElectionState>): void => {
  revoke(s, e, "STOPPED")
  if (e.term !== undefined) releaseLease(s, e)
  e.attempt = undefined
  disarm(s, retryKey(e.handle))
  disarm(s, cooldownKey(e.handle))
  disarm(s, handoverKey(e.handle))
  deleteElection(s, e)
  withdraw(s, e)
  retireName(s, e.name)
  if (e.status !== "QUEUED") publish(s, SimbaEvent.StatusChanged({ name: e.name, status: "STOPPED" }))
  completeWaiters(s, e)
  if (e.tryCompletion !== undefined) complete(s, e.tryCompletion, s.closing === undefined ? notAcquired : { _tag: "Closed" })
  if (e.kind === "lock" && e.status !== "QUEUED") {
    const queued = find(electionsNamed(s, e.name), (x) => x.status === "QUEUED")
    if (queued !== undefined) {
      const next = edit(s, queued)
      setStatus(s, next, "CANDIDATE")
      tryAcquire(s, next)
    }
  }
  if (e.group !== undefined) {
    const g = Array.from(s.groups.values()).find((x) => x.group === e.group)
    if (g !== undefined && g.leaving) maybeFinishLeave(s, g)
  }
  maybeFinishClose(s)
}

/**
 * The simulation's checker: everything it asserts, evaluated against the *true* global time.
 *
 * A term is valid at true time T iff it is not revoked, its client incarnation is alive, and the
 * client's local clock at T reads less than the latest `Deadline` the engine published for the term's
 * session incarnation (`sessionSeq`): exactly what `Term.isValid` computes in the shell.
 *
 * Properties (SPEC section 11):
 * - overlap: no two valid terms of one name at the same true instant (checked after every scheduler
 *   event, which includes every instant at which a term starts or a deadline moves);
 * - pools (semaphores and read-write locks): at every instant the valid holds of a semaphore weigh at
 *   most its limit (all of one limit), and a valid write lock has no valid read hold beside it; no
 *   token of a pool's name is adopted by two terms;
 * - tokens: the tokens of a name strictly increase in order of adoption;
 * - pairing: every `Elected` term is revoked at most once, by a `Revoked` with its id; at most one
 *   unrevoked term per election; every term of a client that stopped or closed is revoked by the end;
 * - delivery: nothing (`Elected`, `Revoked`) reaches an election after its stop completed, or a client
 *   after its close completed; every completion completes exactly once; a stop or close completes only
 *   after its terms were revoked;
 * - liveness: in the quiet phase (no faults, no workload), a name with a contender has a leader within
 *   the stated bound (see `scheduler.ts`), and once that bound has passed no term ends involuntarily
 *   (no `DEADLINE_PASSED`, `SESSION_EXPIRED` or `TAKEN_OVER` in a healthy system).
 * Rules (SPEC section 5.1), checked where their effect is directly observable:
 * - R1: a term is adopted only while its session's deadline is ahead; an `Acquire` reply granting a
 *   lease is either adopted or released in the same step;
 * - R2: a term is revoked before (or in the same step as) the release of its lease;
 * - R3: after a renewal reply, no unrevoked term adopted before the request was sent is missing from it;
 * - R4: after an `Expired` answer to the session's current renewal or attempt, none of its terms is
 *   unrevoked;
 * - R5: a term holds a lease its own session was granted (an `Acquire` reply, a pushed grant or a
 *   renewal's listing named that session, name and token): so a lease kept cached never outlives the
 *   session it was granted to;
 * - an ended term never becomes valid again;
 * - rule 7: no `TokenRegressed` with a token (the model never goes back), and one without a token
 *   only for a lease lost by a fault.
 * Backend-side faults that no client can survive unharmed (a session ended early, a lease lost from a
 * live session) exempt their victims from the overlap and token checks; R3 and R4 check the reaction.
 */
import type * as Engine from "../../src/Engine.js"
import * as LeaseName from "../../src/LeaseName.js"

export interface TermRecord {
  readonly client: number
  readonly inc: number
  readonly termId: number
  readonly handle: number
  readonly name: string
  readonly token: bigint
  /** The lease's token on the store (the block's last for a term of a cached lease's block). */
  readonly leaseToken: bigint
  readonly sessionId: string
  readonly sessionSeq: number
  readonly adoptedAt: number
  readonly adoptedStep: number
  revokedAt: number | undefined
  reason: string | undefined
  deadAt: number | undefined
  exempt: string | undefined
  invalidSince: number | undefined
}

/** `refusal`: a lock's answer to a store's `Conflict`, never asked to complete otherwise. */
export type CompletionKind = "start" | "stop" | "stepDown" | "join" | "leave" | "close" | "refusal"

interface Pending {
  readonly kind: CompletionKind
  readonly handle: number | undefined
}

/** One line of the trace, formatted only when a failure prints it. */
export type TraceEntry =
  | {
    readonly _tag: "step"
    readonly t: number
    readonly client: number
    readonly inc: number
    readonly local: number
    readonly event: Engine.Event
    readonly commands: ReadonlyArray<Engine.Command>
  }
  | { readonly _tag: "note"; readonly t: number; readonly text: string | (() => string) }

export class SimulationFailure extends Error {
  constructor(readonly seed: number, readonly violation: string, readonly trace: string) {
    super(`simulation seed ${seed}: ${violation}\n  replay: SIM_SEED=${seed} npx vitest run test/simulation\n${trace}`)
    this.name = "SimulationFailure"
  }
}

export class Violation extends Error {}

const ns = (client: number, inc: number) => `c${client}#${inc}`

export interface StepInfo {
  readonly t: number
  readonly client: number
  readonly inc: number
  readonly step: number
  readonly local: number
  readonly event: Engine.Event
  readonly commands: ReadonlyArray<Engine.Command>
  readonly prev: Engine.State
}

export class Checker {
  readonly terms = new Map<string, TermRecord>()
  /** Unrevoked, not dead terms (validity can still change). */
  private readonly active = new Set<TermRecord>()
  private readonly deadlines = new Map<string, number>()
  private readonly lastToken = new Map<string, bigint>()
  /** Tokens of each pool's name adopted so far (holds and write locks), with the term's key. */
  private readonly poolTokens = new Map<string, Map<bigint, string>>()
  private readonly pending = new Map<string, Pending>()
  private readonly stopped = new Set<string>()
  private readonly closedIncs = new Set<string>()
  private readonly sentStep = new Map<string, number>()
  /** Lease lists of renewal replies by session and version, to read replies that say "unchanged". */
  private readonly listed = new Map<string, ReadonlyArray<Engine.HeldLease>>()
  private readonly exemptSessions = new Set<string>()
  private readonly exemptLeases = new Set<string>()
  /** `session/name/token` of every lease the backend told a client its session holds (R5). */
  private readonly grantedLeases = new Set<string>()
  /** Liveness: when each name started lacking a leader while contended. */
  private readonly gapSince = new Map<string, number>()
  private readonly ring: Array<TraceEntry | undefined>
  private ringAt = 0
  readonly full: Array<TraceEntry> | undefined
  maxGap = 0
  termsAdopted = 0
  /** Between these true times (the settled part of the quiet phase) no term may end involuntarily. */
  stableFrom = Infinity
  stableUntil = Infinity
  /** Counts for the coverage summary (revocations by reason, ...). */
  readonly stats = new Map<string, number>()

  count(key: string): void {
    this.stats.set(key, (this.stats.get(key) ?? 0) + 1)
  }

  constructor(
    private readonly localNow: (client: number, inc: number, t: number) => number,
    traceSize: number,
    keepFullTrace: boolean,
    /** Whether to check the engine rules (R1-R4) besides the properties. */
    private readonly rules: boolean = true
  ) {
    this.ring = new Array(traceSize)
    this.full = keepFullTrace ? [] : undefined
  }

  // -------------------------------------------------------------------------------------------------
  // Trace
  // -------------------------------------------------------------------------------------------------

  record(entry: TraceEntry): void {
    this.ring[this.ringAt++ % this.ring.length] = entry
    this.full?.push(entry)
  }

  note(t: number, text: string | (() => string)): void {
    this.record({ _tag: "note", t, text })
  }

  formatTrace(all: boolean): string {
    const entries = all && this.full !== undefined
      ? this.full
      : [...this.ring.slice(this.ringAt % this.ring.length), ...this.ring.slice(0, this.ringAt % this.ring.length)]
        .filter((e): e is TraceEntry => e !== undefined)
    const header = all ? "  full trace:" : `  last ${entries.length} trace entries (true time t, client#incarnation, local time L):`
    return [header, ...entries.map(formatEntry)].join("\n")
  }

  // -------------------------------------------------------------------------------------------------
  // Bookkeeping from the scheduler
  // -------------------------------------------------------------------------------------------------

  expectCompletion(client: number, inc: number, completion: number, kind: CompletionKind, handle?: number): void {
    this.pending.set(`${ns(client, inc)}/${completion}`, { kind, handle })
  }

  /** The client incarnation vanished: its terms can no longer be used by anyone. */
  crashed(client: number, inc: number, t: number): void {
    for (const term of Array.from(this.active)) {
      if (term.client === client && term.inc === inc) {
        term.deadAt = t
        this.active.delete(term)
      }
    }
    for (const key of Array.from(this.pending.keys())) {
      if (key.startsWith(`${ns(client, inc)}/`)) this.pending.delete(key)
    }
  }

  exemptSession(sessionId: string, why: string): void {
    this.exemptSessions.add(sessionId)
    for (const term of this.terms.values()) {
      if (term.sessionId === sessionId && term.exempt === undefined) term.exempt = why
    }
  }

  exemptLease(sessionId: string, name: string, token: bigint, why: string): void {
    this.exemptLeases.add(`${sessionId}/${name}/${token}`)
    for (const term of this.terms.values()) {
      if (term.sessionId === sessionId && term.name === name && term.leaseToken === token && term.exempt === undefined) {
        term.exempt = why
      }
    }
  }

  // -------------------------------------------------------------------------------------------------
  // After every engine step
  // -------------------------------------------------------------------------------------------------

  afterStep(info: StepInfo): void {
    const { client, commands, event, inc, step, t } = info
    const here = ns(client, inc)
    const adopted: Array<TermRecord> = []
    this.recordGrants(event)
    for (const command of commands) {
      switch (command._tag) {
        case "Call":
          this.sentStep.set(`${here}/${command.requestId}`, step)
          break
        case "Deadline":
          this.deadlines.set(`${here}/${command.sessionSeq}`, command.deadline)
          break
        case "Elected": {
          if (this.closedIncs.has(here)) throw new Violation(`${here}: Elected ${command.name} after its close completed`)
          if (this.stopped.has(`${here}/${command.handle}`)) {
            throw new Violation(`${here}: Elected ${command.name} (handle ${command.handle}) after its stop completed`)
          }
          const key = `${here}/${command.termId}`
          if (this.terms.has(key)) throw new Violation(`${here}: term ${command.termId} elected twice`)
          for (const other of this.active) {
            if (other.client === client && other.inc === inc && other.handle === command.handle) {
              throw new Violation(
                `${here}: Elected ${command.name} token ${command.token} while term ${other.termId} (token ${other.token}) of the same election is not revoked`
              )
            }
          }
          if (this.rules && !this.grantedLeases.has(`${command.sessionId}/${command.name}/${command.leaseToken}`)) {
            throw new Violation(
              `${here}: Elected ${command.name} token ${command.token} on lease token ${command.leaseToken}, which session ${command.sessionId} was never granted (R5)`
            )
          }
          const exempt = this.exemptSessions.has(command.sessionId)
            ? "session ended early by the backend"
            : this.exemptLeases.has(`${command.sessionId}/${command.name}/${command.leaseToken}`)
            ? "lease lost by the backend"
            : undefined
          const term: TermRecord = {
            client,
            inc,
            termId: command.termId,
            handle: command.handle,
            name: command.name,
            token: command.token,
            leaseToken: command.leaseToken,
            sessionId: command.sessionId,
            sessionSeq: command.sessionSeq,
            adoptedAt: t,
            adoptedStep: step,
            revokedAt: undefined,
            reason: undefined,
            deadAt: undefined,
            exempt,
            invalidSince: undefined
          }
          this.terms.set(key, term)
          this.active.add(term)
          adopted.push(term)
          this.termsAdopted++
          this.count(`elected ${command.kind}`)
          if (command.token !== command.leaseToken) this.count("terms from a block of tokens")
          const hold = LeaseName.parseHold(command.name)
          if (hold !== undefined) this.count(hold.mode === "read" ? "terms of a read hold" : "terms of a semaphore's permits")
          if (event._tag === "Start" || event._tag === "Stop") this.count("terms of a lease kept cached")
          if (exempt === undefined) {
            const last = this.lastToken.get(command.name)
            if (last !== undefined && command.token <= last) {
              throw new Violation(
                `tokens of ${command.name} must strictly increase in order of adoption: ${here} adopted ${command.token} after ${last}`
              )
            }
            this.lastToken.set(command.name, command.token)
            const pool = LeaseName.poolOf(command.name)
            const tokens = this.poolTokens.get(pool) ?? new Map<bigint, string>()
            const before = tokens.get(command.token)
            if (before !== undefined) {
              throw new Violation(`token ${command.token} of ${pool} adopted twice: by ${before} and by ${key} (${command.name})`)
            }
            tokens.set(command.token, `${key} (${command.name})`)
            this.poolTokens.set(pool, tokens)
          }
          break
        }
        case "Revoked": {
          if (this.closedIncs.has(here)) throw new Violation(`${here}: Revoked ${command.name} after its close completed`)
          if (this.stopped.has(`${here}/${command.handle}`)) {
            throw new Violation(`${here}: Revoked ${command.name} (handle ${command.handle}) after its stop completed`)
          }
          const term = this.terms.get(`${here}/${command.termId}`)
          if (term === undefined) throw new Violation(`${here}: Revoked term ${command.termId} that was never elected`)
          if (term.revokedAt !== undefined) {
            throw new Violation(`${here}: term ${command.termId} (${command.name} token ${command.token}) revoked twice`)
          }
          if (term.handle !== command.handle || term.name !== command.name || term.token !== command.token) {
            throw new Violation(`${here}: Revoked term ${command.termId} does not match its Elected`)
          }
          term.revokedAt = t
          term.reason = command.reason
          this.count(`revoked ${command.reason}`)
          if (t >= this.stableFrom && t < this.stableUntil && command.reason !== "STOPPED" && command.reason !== "STEPPED_DOWN") {
            throw new Violation(
              `${here}: ${command.name} token ${command.token} revoked ${command.reason} in the quiet phase, after the system should have settled (t >= ${
                fmt(this.stableFrom)
              })`
            )
          }
          this.active.delete(term)
          break
        }
        case "Publish": {
          // Rule 7 (regressions made loud) must never cry wolf: the model's tokens only rise, so a
          // regression is a false alarm (a reordered message read as the store going back), and a
          // lease missing from a live session's renewal happens only after a lost-lease fault.
          const ev = command.event
          if (ev._tag !== "TokenRegressed") break
          this.count(`token regression reported${ev.token === undefined ? " (lease lost)" : ""}`)
          if (ev.token !== undefined) {
            throw new Violation(`${here}: TokenRegressed ${ev.name} seen ${ev.seen} token ${ev.token}, but the model's tokens only rise`)
          }
          if (![...this.exemptLeases].some((k) => k.split("/")[1] === ev.name)) {
            throw new Violation(`${here}: TokenRegressed ${ev.name} (lease ${ev.seen} absent) without a lost-lease fault`)
          }
          break
        }
        case "Complete": {
          const key = `${here}/${command.completion}`
          const pending = this.pending.get(key)
          if (pending === undefined) throw new Violation(`${here}: completion ${command.completion} completed twice or never asked`)
          this.pending.delete(key)
          if (pending.kind === "stop" || pending.kind === "stepDown") {
            for (const term of this.active) {
              if (term.client === client && term.inc === inc && term.handle === pending.handle) {
                throw new Violation(
                  `${here}: ${pending.kind} of handle ${pending.handle} completed before its term ${term.termId} was revoked`
                )
              }
            }
            if (pending.kind === "stop") this.stopped.add(`${here}/${pending.handle}`)
          }
          if (pending.kind === "close" && command.outcome._tag === "Ok") {
            for (const term of this.active) {
              if (term.client === client && term.inc === inc) {
                throw new Violation(`${here}: close completed before term ${term.termId} (${term.name}) was revoked`)
              }
            }
            this.closedIncs.add(here)
          }
          break
        }
        default:
          break
      }
    }
    if (!this.rules) return
    // R2: a term is revoked before its lease is released.
    for (const command of commands) {
      if (command._tag !== "Call" || command.request._tag !== "Release") continue
      const { name, sessionId, token } = command.request
      for (const term of this.active) {
        if (
          term.client === client && term.inc === inc && term.sessionId === sessionId && term.name === name &&
          term.leaseToken === token
        ) {
          throw new Violation(`${here}: released ${name} token ${token} while its term ${term.termId} is not revoked (R2: revoke first)`)
        }
      }
    }
    for (const term of adopted) {
      // Judged on the deadline alone: a term revoked in the very step that adopted it was still handed out.
      const deadline = this.deadlines.get(`${here}/${term.sessionSeq}`)
      if (term.deadAt === undefined && !(deadline !== undefined && info.local < deadline)) {
        throw new Violation(
          `${here}: adopted ${term.name} token ${term.token} past its session's local deadline (R1: adopt only before the deadline)`
        )
      }
    }
    if (event._tag === "Reply") this.checkReply(info)
  }

  /** What an event tells a client its session holds (R5). */
  private recordGrants(event: Engine.Event): void {
    if (event._tag === "Hint" && event.hint._tag === "Granted") {
      this.grantedLeases.add(`${event.hint.to}/${event.hint.name}/${event.hint.token}`)
    }
    if (event._tag !== "Reply") return
    const { request, response } = event
    if (request._tag === "Acquire" && response._tag === "Granted") {
      this.grantedLeases.add(`${request.sessionId}/${request.name}/${response.token}`)
    }
    if (request._tag === "KeepAlive" && response._tag === "Live" && response.leases !== undefined) {
      for (const lease of response.leases) this.grantedLeases.add(`${request.sessionId}/${lease.name}/${lease.token}`)
    }
  }

  private checkReply(info: StepInfo): void {
    const { client, commands, inc, prev } = info
    const event = info.event as Extract<Engine.Event, { _tag: "Reply" }>
    const { request, response } = event
    const here = ns(client, inc)
    // R1: a grant is adopted or given back in the same step (unless a term of this session already
    // holds that very lease: acquire is idempotent).
    if (request._tag === "Acquire" && response._tag === "Granted") {
      const ours = prev.cached.get(request.name)?.leaseToken === response.token ||
        Array.from(prev.elections.values()).some((e) =>
          e.name === request.name && e.term?.sessionId === request.sessionId && e.term.leaseToken === response.token
        )
      const handled = ours || commands.some((e) =>
        (e._tag === "Elected" && e.name === request.name && e.leaseToken === response.token) ||
        (e._tag === "Call" && e.request._tag === "Release" && e.request.name === request.name &&
          e.request.token === response.token && e.request.sessionId === request.sessionId)
      )
      if (!handled) {
        throw new Violation(
          `${here}: a grant of ${request.name} token ${response.token} (request ${event.requestId}) was neither adopted nor released (R1)`
        )
      }
    }
    // R3: a renewal reply revokes every term adopted before it was sent that it no longer lists.
    if (request._tag === "KeepAlive" && response._tag === "Live") {
      const sent = this.sentStep.get(`${here}/${event.requestId}`) ?? Infinity
      if (response.leases !== undefined && response.version !== undefined) {
        this.listed.set(`${request.sessionId}/${response.version}`, response.leases)
      }
      const leases = response.leases ?? this.listed.get(`${request.sessionId}/${request.known}`)
      if (leases === undefined) {
        throw new Violation(`${here}: renewal reply (request ${event.requestId}) omits a lease list nobody read`)
      }
      for (const term of this.active) {
        if (term.client !== client || term.inc !== inc || term.sessionId !== request.sessionId) continue
        if (term.adoptedStep >= sent) continue
        if (!leases.some((l) => l.name === term.name && l.token === term.leaseToken)) {
          throw new Violation(
            `${here}: renewal reply (request ${event.requestId}) no longer lists ${term.name} token ${term.token}, but the term is not revoked (R3: TAKEN_OVER)`
          )
        }
      }
    }
    // R4: an `Expired` answer to the current renewal or attempt ends every term of that session.
    if (response._tag === "Expired" && "sessionId" in request) {
      const current = request._tag === "KeepAlive"
        ? prev.session.renewing === event.requestId
        : request._tag === "Acquire"
        ? Array.from(prev.elections.values()).some((e) => e.attempt === event.requestId)
        : false
      if (current) {
        for (const term of this.active) {
          if (term.client === client && term.inc === inc && term.sessionId === request.sessionId) {
            throw new Violation(
              `${here}: the backend answered Expired for session ${request.sessionId}, but term ${term.termId} (${term.name} token ${term.token}) is not revoked (R4)`
            )
          }
        }
      }
    }
  }

  // -------------------------------------------------------------------------------------------------
  // After every scheduler event: validity at this true instant
  // -------------------------------------------------------------------------------------------------

  validAt(term: TermRecord, t: number): boolean {
    if (term.revokedAt !== undefined || term.deadAt !== undefined) return false
    const deadline = this.deadlines.get(`${ns(term.client, term.inc)}/${term.sessionSeq}`)
    return deadline !== undefined && this.localNow(term.client, term.inc, t) < deadline
  }

  /** Overlap and resurrection at true instant `t`; returns the valid terms by name. */
  evaluate(t: number): Map<string, TermRecord> {
    const byName = new Map<string, TermRecord>()
    for (const term of this.active) {
      const valid = this.validAt(term, t)
      if (!valid) {
        if (term.invalidSince === undefined) term.invalidSince = t
        continue
      }
      if (term.invalidSince !== undefined) {
        throw new Violation(
          `c${term.client}#${term.inc}: term ${term.termId} (${term.name} token ${term.token}) is valid again at t=${
            fmt(t)
          } after it ended at t=${fmt(term.invalidSince)} (an ended term never becomes valid again)`
        )
      }
      if (term.exempt !== undefined) continue
      const other = byName.get(term.name)
      if (other !== undefined) {
        throw new Violation(
          `two valid terms of ${term.name} at t=${fmt(t)}: c${other.client}#${other.inc} token ${other.token} (adopted t=${
            fmt(other.adoptedAt)
          }, local now ${fmt(this.localNow(other.client, other.inc, t))}) and c${term.client}#${term.inc} token ${term.token} (adopted t=${
            fmt(term.adoptedAt)
          }, local now ${fmt(this.localNow(term.client, term.inc, t))})`
        )
      }
      byName.set(term.name, term)
    }
    checkPools(byName, t)
    return byName
  }

  /**
   * Liveness in the quiet phase: a name with a contender (`contended`) must have a valid term; a gap
   * that began before `quietFrom` counts from `quietFrom`.
   */
  liveness(t: number, quietFrom: number, bound: number, contended: ReadonlySet<string>, led: ReadonlyMap<string, TermRecord>): void {
    for (const name of Array.from(this.gapSince.keys())) {
      if (!contended.has(name) || led.has(name)) {
        const since = this.gapSince.get(name)!
        this.maxGap = Math.max(this.maxGap, t - Math.max(since, quietFrom))
        this.gapSince.delete(name)
      }
    }
    for (const name of contended) {
      if (led.has(name)) continue
      const since = this.gapSince.get(name) ?? t
      this.gapSince.set(name, since)
      const waited = t - Math.max(since, quietFrom)
      if (waited > bound) {
        throw new Violation(
          `liveness: ${name} has had a contender but no leader for ${fmt(waited)} ms of the quiet phase (bound ${fmt(bound)} ms)`
        )
      }
    }
  }

  /** At the end: completions done and terms revoked for every client that is still there. */
  finish(alive: ReadonlyArray<{ client: number; inc: number }>): void {
    for (const { client, inc } of alive) {
      const here = ns(client, inc)
      for (const [key, pending] of this.pending) {
        if (key.startsWith(`${here}/`) && pending.kind !== "refusal") {
          throw new Violation(`${here}: ${pending.kind}${pending.handle === undefined ? "" : ` of handle ${pending.handle}`} never completed`)
        }
      }
      for (const term of this.active) {
        if (term.client === client && term.inc === inc) {
          throw new Violation(`${here}: term ${term.termId} (${term.name} token ${term.token}) was never revoked`)
        }
      }
    }
  }
}

/** The pool rule at one instant, over the valid terms by name (see the module doc). */
const checkPools = (byName: ReadonlyMap<string, TermRecord>, t: number): void => {
  const permits = new Map<string, { weight: number; limits: Set<number>; holders: Array<string> }>()
  for (const [name, term] of byName) {
    const hold = LeaseName.parseHold(name)
    if (hold === undefined) continue
    const who = `c${term.client}#${term.inc} ${name} token ${term.token}`
    if (hold.mode === "read") {
      const writer = byName.get(hold.pool)
      if (writer !== undefined) {
        throw new Violation(
          `a write lock and a read hold of ${hold.pool} valid at t=${fmt(t)}: c${writer.client}#${writer.inc} token ${writer.token} and ${who}`
        )
      }
      continue
    }
    const sum = permits.get(hold.pool) ?? { weight: 0, limits: new Set<number>(), holders: [] }
    sum.weight += hold.weight
    sum.limits.add(hold.limit)
    sum.holders.push(who)
    permits.set(hold.pool, sum)
  }
  for (const [pool, sum] of permits) {
    const [limit] = sum.limits
    if (sum.limits.size > 1 || sum.weight > limit!) {
      throw new Violation(`${sum.weight} permits of semaphore ${pool} (limits ${[...sum.limits].join(", ")}) valid at t=${fmt(t)}: ${sum.holders.join("; ")}`)
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------------

export const fmt = (x: number): string => Number.isFinite(x) ? (Math.round(x * 10) / 10).toString() : String(x)

export const formatRequest = (r: Engine.Request): string => {
  switch (r._tag) {
    case "OpenSession":
      return `OpenSession(ttl ${r.ttl})`
    case "KeepAlive":
      return `KeepAlive(${r.sessionId}${r.known === undefined ? "" : `, known v${r.known}`})`
    case "CloseSession":
      return `CloseSession(${r.sessionId})`
    case "Acquire":
      return `Acquire(${r.sessionId}, ${r.name})`
    case "Release":
      return `Release(${r.sessionId}, ${r.name}, ${r.token})`
    case "Withdraw":
      return `Withdraw(${r.sessionId}, ${r.name})`
    case "Join":
      return `Join(${r.sessionId}, ${r.group})`
    case "Leave":
      return `Leave(${r.sessionId}, ${r.group})`
    case "Members":
      return `Members(${r.group})`
  }
}

export const formatResponse = (r: Engine.Response): string => {
  switch (r._tag) {
    case "Opened":
      return `Opened(${r.sessionId}, ${fmt(r.remaining)})`
    case "Live":
      return `Live(${fmt(r.remaining)}, ${
        r.leases === undefined ? `unchanged v${r.version}` : `v${r.version ?? "-"} [${r.leases.map((l) => `${l.name}:${l.token}`).join(" ")}]`
      }${
        r.groups.length === 0 ? "" : `, groups ${r.groups.map((g) => `${g.group}=[${g.members.join(" ")}]`).join(" ")}`
      })`
    case "Granted":
      return `Granted(${r.token})`
    case "HeldBy":
      return `HeldBy(${r.token}, ${r.remaining === undefined ? "?" : fmt(r.remaining)})`
    case "MemberList":
      return `MemberList[${r.members.join(" ")}]`
    case "Failed":
      return `Failed(${r.error})`
    default:
      return r._tag
  }
}

export const formatEvent = (e: Engine.Event): string => {
  switch (e._tag) {
    case "Boot":
      return "Boot"
    case "Start":
      return `Start(h${e.handle} ${e.kind} ${e.name}${e.hasWork ? " +work" : ""})`
    case "Stop":
      return `Stop(h${e.handle}${e.awaitRelease === true ? " awaitRelease" : ""})`
    case "StepDown":
      return `StepDown(h${e.handle}, cooldown ${fmt(e.cooldown)})`
    case "Timer":
      return `Timer(${e.key})`
    case "Reply":
      return `Reply#${e.requestId} ${formatRequest(e.request)} -> ${formatResponse(e.response)}`
    case "Hint":
      return `Hint(${
        e.hint._tag === "Released"
          ? `Released ${e.hint.name}`
          : e.hint._tag === "Granted"
          ? `Granted ${e.hint.name} to ${e.hint.to} token ${e.hint.token}`
          : e.hint._tag === "Wanted"
          ? `Wanted ${e.hint.name} from ${e.hint.holder}`
          : `GroupChanged ${e.hint.group}`
      })`
    case "WorkExited":
      return `WorkExited(h${e.handle}, term ${e.termId})`
    case "Join":
      return `Join(h${e.handle} ${e.group}/${e.partitions})`
    case "Leave":
      return `Leave(h${e.handle})`
    case "Close":
      return "Close"
  }
}

export const formatCommand = (e: Engine.Command): string | undefined => {
  switch (e._tag) {
    case "Call":
      return `Call#${e.requestId} ${formatRequest(e.request)}`
    case "Arm":
      return `Arm(${e.key} @${fmt(e.at)})`
    case "Disarm":
      return `Disarm(${e.key})`
    case "Deadline":
      return `Deadline(seq ${e.sessionSeq} @${fmt(e.deadline)})`
    case "Elected":
      return `ELECTED(h${e.handle} ${e.name} token ${e.token} term ${e.termId} ${e.sessionId})`
    case "Revoked":
      return `REVOKED(h${e.handle} ${e.name} token ${e.token} term ${e.termId} ${e.reason})`
    case "Complete":
      return `Complete(${e.completion} ${e.outcome._tag})`
    case "Members":
      return `Members(${e.group} owned [${e.owned.join(",")}])`
    case "Publish":
      return e.event._tag === "SessionEnded" || e.event._tag === "SessionOpened" || e.event._tag === "SessionSuspended"
        ? e.event._tag
        : undefined
  }
}

const formatEntry = (entry: TraceEntry): string => {
  if (entry._tag === "note") return `  t=${fmt(entry.t)}  ${typeof entry.text === "string" ? entry.text : entry.text()}`
  const commands = entry.commands.map(formatCommand).filter((x): x is string => x !== undefined)
  return `  t=${fmt(entry.t)} ${ns(entry.client, entry.inc)} L=${fmt(entry.local)}  ${formatEvent(entry.event)}${
    commands.length === 0 ? "" : `\n      => ${commands.join(", ")}`
  }`
}

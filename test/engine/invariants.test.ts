/**
 * Engine invariants over many seeded random event sequences: a single engine against a small model
 * backend (with a competing "other" client), replies delivered late and out of order, failures,
 * expiries, pauses, starts, stops, step-downs, groups, and finally a close.
 *
 * Checked after every step: every `Elected` is followed by exactly one `Revoked` (and a `Revoked` only
 * follows an `Elected`); a term is revoked before its lease is released (rule 2); at most one valid term
 * per name; no term outlives its session's local deadline; nothing is adopted at or after the deadline;
 * at most one renewal in flight and one acquire per election (rule 6); nothing is stranded (every
 * candidate, cooldown, handover, session and group has a call in flight or a timer armed); nothing
 * but give-backs after `close` completed; and `close` always completes.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { Driver, type Call, replyEvent, show, timerEvent } from "./harness.js"

/** mulberry32 */
const rng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const NAMES = ["a", "b", "c"]

/** A toy backend: leases with tokens that only rise, sessions that can die, an "other" client. */
class Model {
  sessions = new Set<string>()
  leases = new Map<string, { session: string; token: bigint }>()
  tokens = new Map<string, bigint>()
  opened = 0

  grant(name: string, session: string): bigint {
    const token = (this.tokens.get(name) ?? 0n) + 1n
    this.tokens.set(name, token)
    this.leases.set(name, { session, token })
    return token
  }

  kill(session: string) {
    this.sessions.delete(session)
    for (const [name, l] of Array.from(this.leases)) if (l.session === session) this.leases.delete(name)
  }

  answer(request: Engine.Request, random: () => number): Engine.Response {
    if (random() < 0.08) return { _tag: "Failed", error: "injected" }
    switch (request._tag) {
      case "OpenSession": {
        const sessionId = `s${++this.opened}`
        this.sessions.add(sessionId)
        return { _tag: "Opened", sessionId, remaining: random() < 0.2 ? 6_000 : 15_000 }
      }
      case "KeepAlive": {
        if (!this.sessions.has(request.sessionId)) return { _tag: "Expired" }
        const leases = Array.from(this.leases)
          .filter(([, l]) => l.session === request.sessionId)
          .map(([name, l]) => ({ name, token: l.token }))
        return { _tag: "Live", remaining: 15_000, leases, groups: [{ group: "g", members: [request.sessionId, "other"] }] }
      }
      case "CloseSession":
        this.kill(request.sessionId)
        return { _tag: "Done" }
      case "Acquire": {
        if (!this.sessions.has(request.sessionId)) return { _tag: "Expired" }
        const held = this.leases.get(request.name)
        if (held === undefined) return { _tag: "Granted", token: this.grant(request.name, request.sessionId) }
        if (held.session === request.sessionId) return { _tag: "Granted", token: held.token }
        return { _tag: "HeldBy", token: held.token, remaining: random() < 0.5 ? undefined : Math.floor(random() * 15_000) }
      }
      case "Release": {
        const held = this.leases.get(request.name)
        if (held?.session === request.sessionId && held.token === request.token) this.leases.delete(request.name)
        return { _tag: "Done" }
      }
      case "Join":
        return this.sessions.has(request.sessionId) ? { _tag: "Joined" } : { _tag: "Expired" }
      case "Leave":
      case "Withdraw":
        return { _tag: "Done" }
      case "Members":
        return { _tag: "MemberList", members: [...this.sessions, "other"] }
    }
  }
}

interface TermInfo {
  readonly name: string
  readonly token: bigint
  readonly sessionId: string
  readonly sessionSeq: number
  readonly handle: number
  revoked: boolean
  workRunning: boolean
}

const simulate = (seed: number, steps: number): void => {
  const random = rng(seed)
  const pick = <A>(xs: ReadonlyArray<A>): A | undefined => xs.length === 0 ? undefined : xs[Math.floor(random() * xs.length)]
  const d = new Driver(undefined, seed)
  const model = new Model()
  const terms = new Map<number, TermInfo>()
  const deadlines = new Map<number, number>()
  const hasWork = new Map<number, boolean>()
  const completions = new Map<number, string>()
  const closeCompletions = new Set<number>()
  let closeDone = false
  let nextHandle = 1
  let nextCompletion = 1
  const fail = (message: string): never => {
    throw new Error(`seed ${seed}, step ${d.log.length}, t=${d.now}: ${message}\n` +
      d.log.slice(-(Number(process.env.SIM_LOG ?? 8))).map((e) => `  @${e.at} ${e.event._tag}${e.event._tag === "Reply" ? ` ${e.event.request._tag}/${e.event.response._tag}` : e.event._tag === "Timer" ? ` ${e.event.key}` : ""} -> ${e.commands.map(show).join("; ")}`).join("\n"))
  }

  const send = (event: Engine.Event, at = d.now) => {
    const before = d.state
    const replied = event._tag === "Reply" ? event.requestId : undefined
    const commands = d.send(event, at)
    const after = d.state
    for (const e of commands) {
      if (closeDone && !(e._tag === "Complete" || (e._tag === "Call" && (e.request._tag === "Release" || e.request._tag === "CloseSession")))) {
        fail(`command after close completed: ${show(e)}`)
      }
      switch (e._tag) {
        case "Deadline":
          deadlines.set(e.sessionSeq, e.deadline)
          break
        case "Elected": {
          if (terms.has(e.termId)) fail(`duplicate Elected for term ${e.termId}`)
          const deadline = deadlines.get(e.sessionSeq) ?? Number.NEGATIVE_INFINITY
          if (!(d.now < deadline)) fail(`${show(e)} adopted at ${d.now}, deadline ${deadline}`)
          for (const t of terms.values()) {
            if (t.name === e.name && !t.revoked) fail(`${show(e)} while token ${t.token} of ${t.name} is not revoked`)
            if (t.name === e.name && t.token >= e.token) fail(`${show(e)} does not rise above ${t.token}`)
          }
          terms.set(e.termId, {
            name: e.name,
            token: e.token,
            sessionId: e.sessionId,
            sessionSeq: e.sessionSeq,
            handle: e.handle,
            revoked: false,
            workRunning: e.kind === "partition" || hasWork.get(e.handle) === true
          })
          break
        }
        case "Revoked": {
          const t = terms.get(e.termId)
          if (t === undefined) fail(`Revoked without Elected: ${show(e)}`)
          else if (t.revoked) fail(`second Revoked: ${show(e)}`)
          else t.revoked = true
          break
        }
        case "Call": {
          const r = e.request
          if (r._tag === "Release") {
            for (const t of terms.values()) {
              if (t.name === r.name && t.token === r.token && t.sessionId === r.sessionId && !t.revoked) {
                fail(`release before revoke: ${show(e)}`)
              }
            }
          }
          if (r._tag === "KeepAlive" && before.session.renewing !== undefined && before.session.renewing !== replied) {
            fail(`second KeepAlive in flight: ${show(e)}`)
          }
          if (r._tag === "Acquire") {
            const owner = Array.from(after.elections.values()).find((x) => x.attempt === e.requestId)
            const prior = owner === undefined ? undefined : before.elections.get(owner.handle)?.attempt
            if (prior !== undefined && prior !== replied) fail(`second Acquire in flight for ${r.name}: ${show(e)}`)
          }
          break
        }
        case "Complete": {
          if (!completions.has(e.completion)) fail(`unknown or repeated completion ${e.completion}`)
          completions.delete(e.completion)
          if (closeCompletions.has(e.completion)) closeDone = true
          break
        }
        default:
          break
      }
    }
    for (const t of terms.values()) {
      const deadline = deadlines.get(t.sessionSeq) ?? Number.NEGATIVE_INFINITY
      if (!t.revoked && d.now >= deadline) fail(`term ${t.name}#${t.token} still valid after its deadline ${deadline}`)
    }
    checkLiveness(after)
    return commands
  }

  /** Nothing is ever stranded: everything waiting has a call in flight or a timer armed to move it on. */
  const checkLiveness = (state: Engine.State) => {
    if (state.closed) return
    const session = state.session
    const timer = (key: string) => state.timers.has(key)
    if (session.status === "OPENING" && session.opening === undefined && !timer("open") && state.closing === undefined) {
      fail("session OPENING with neither an OpenSession in flight nor an open timer")
    }
    if (session.status === "LIVE" || session.status === "SUSPENDED") {
      if (session.renewing === undefined && !timer("renew")) fail(`session ${session.status} without renewal`)
      if (!timer("deadline")) fail(`session ${session.status} without a deadline timer`)
    }
    for (const e of state.elections.values()) {
      const h = e.handle
      switch (e.status) {
        case "CANDIDATE":
          if (session.status === "LIVE" && e.attempt === undefined && !timer(`retry:${h}`)) {
            fail(`candidate ${e.name} (${h}) stranded: no acquire in flight, no retry armed`)
          }
          break
        case "COOLDOWN":
          if (!timer(`cooldown:${h}`)) fail(`${e.name} (${h}) in COOLDOWN without a cooldown timer`)
          break
        case "HANDOVER":
          if (!timer(`handover:${h}`)) fail(`${e.name} (${h}) in HANDOVER without a handover timer`)
          break
        case "LEADER":
          if (e.term === undefined || e.term.revoked) fail(`${e.name} (${h}) LEADER without a valid term`)
          break
        default:
          break
      }
    }
    for (const g of state.groups.values()) {
      if (session.status === "LIVE" && !g.leaving && !g.joined && g.joining === undefined && !timer(`join:${g.handle}`)) {
        fail(`group ${g.group} stranded: not joined, not joining, no retry`)
      }
    }
  }

  const replyOne = () => {
    const c: Call | undefined = pick(Array.from(d.pending.values()))
    if (c === undefined) return
    send(replyEvent(c, model.answer(c.request, random)), d.now + Math.floor(random() * 300))
  }

  const fireEarliest = () => {
    const arms = Array.from(d.armed.values()).sort((x, y) => x.at - y.at)
    const arm = arms[0]
    if (arm === undefined) return
    send(timerEvent(arm.key, arm.id), Math.max(d.now, arm.at))
  }

  const exitWork = () => {
    const running = Array.from(terms.entries()).filter(([, t]) => t.workRunning)
    const chosen = pick(running.filter(([, t]) => t.revoked)) ?? (random() < 0.2 ? pick(running) : undefined)
    if (chosen === undefined) return
    chosen[1].workRunning = false
    send({ _tag: "WorkExited", handle: chosen[1].handle, termId: chosen[0] })
  }

  const started: Array<number> = []
  /** Only elections can step down (the shell offers `stepDown` on election handles, not on locks). */
  const elections: Array<number> = []
  for (let i = 0; i < steps; i++) {
    if (i === 0) {
      send({ _tag: "Boot" })
      continue
    }
    const x = random()
    if (x < 0.32) replyOne()
    else if (x < 0.55) fireEarliest()
    else if (x < 0.6) d.now += Math.floor(random() * 4_000) // a pause: nothing runs meanwhile
    else if (x < 0.65) {
      // The competing client takes or frees a name.
      const name = pick(NAMES)!
      const held = model.leases.get(name)
      if (held === undefined) model.grant(name, "other")
      else if (held.session === "other") {
        model.leases.delete(name)
        send({ _tag: "Hint", hint: { _tag: "Released", name } })
      }
    } else if (x < 0.68) {
      // The backend expires our session (as if renewals had been lost).
      const sid = d.session.id
      if (sid !== undefined) model.kill(sid)
    } else if (x < 0.76) {
      const handle = nextHandle++
      const completion = nextCompletion++
      completions.set(completion, "start")
      const work = random() < 0.5
      hasWork.set(handle, work)
      started.push(handle)
      const kind = random() < 0.4 ? "lock" : "election"
      if (kind === "election") elections.push(handle)
      send({
        _tag: "Start",
        handle,
        name: pick(NAMES)!,
        kind,
        hasWork: work,
        completion
      })
    } else if (x < 0.81) {
      const handle = pick(started)
      if (handle === undefined) continue
      const completion = nextCompletion++
      completions.set(completion, "stop")
      send({ _tag: "Stop", handle, completion })
    } else if (x < 0.85) {
      const handle = pick(elections)
      if (handle === undefined) continue
      const completion = nextCompletion++
      completions.set(completion, "stepDown")
      send({ _tag: "StepDown", handle, cooldown: Math.floor(random() * 8_000), completion })
    } else if (x < 0.93) exitWork()
    else if (x < 0.95) {
      const completion = nextCompletion++
      completions.set(completion, "join")
      send({ _tag: "Join", handle: 10_000 + i, group: "g", partitions: 3, completion })
    } else if (x < 0.97) {
      send({ _tag: "Hint", hint: { _tag: "GroupChanged", group: "g" } })
    } else {
      const g = pick(Array.from(d.state.groups.keys()))
      if (g === undefined) continue
      const completion = nextCompletion++
      completions.set(completion, "leave")
      send({ _tag: "Leave", handle: g, completion })
    }
  }

  // Close, then let the world run until the close completes.
  const completion = nextCompletion++
  completions.set(completion, "close")
  closeCompletions.add(completion)
  send({ _tag: "Close", completion })
  for (let i = 0; i < 2_000 && !closeDone; i++) {
    const x = random()
    if (x < 0.5 && d.pending.size > 0) replyOne()
    else if (x < 0.8) exitWork()
    else fireEarliest()
  }
  if (!closeDone) fail("close never completed")
  // Late replies after the close only give things back.
  for (const c of Array.from(d.pending.values())) send(replyEvent(c, model.answer(c.request, random)))
  for (const t of terms.values()) if (!t.revoked) fail(`term ${t.name}#${t.token} never revoked`)
  const stillWaiting = Array.from(completions.entries()).filter(([, kind]) => kind !== "start")
  // Every stop / stepDown / join / leave / close waiter got its completion.
  if (stillWaiting.length > 0) fail(`waiters never completed: ${JSON.stringify(stillWaiting)}`)
}

describe("Engine invariants over random event sequences", () => {
  // SIM_SEEDS / SIM_STEPS / SIM_SEED_BASE explore further; a failing seed names itself and replays.
  const seeds = Number(process.env.SIM_SEEDS ?? 400)
  const steps = Number(process.env.SIM_STEPS ?? 400)
  const base = Number(process.env.SIM_SEED_BASE ?? 1)
  it(`hold for ${seeds} seeds of ${steps} events each, and close always completes`, () => {
    let checked = 0
    for (let seed = base; seed < base + seeds; seed++) {
      simulate(seed, steps)
      checked++
    }
    expect(checked).toBe(seeds)
  })
})

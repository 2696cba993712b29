/**
 * A small harness for replaying event sequences through the pure `Engine.step`.
 *
 * `Driver` threads the engine state, keeps the clock (`now`, monotonic millis), records every step's
 * commands, and remembers the backend calls still waiting for a reply and the timers still armed, so a
 * test can answer "the pending Acquire of `a`" or fire "the armed renew timer" without hard-coding
 * request or timer ids. `drive(steps)` is the one-shot form for fixed sequences.
 */
import { expect } from "vitest"
import * as Engine from "../../src/Engine.js"
import type * as Session from "../../src/Session.js"

export type Call = Extract<Engine.Command, { readonly _tag: "Call" }>
export type Arm = Extract<Engine.Command, { readonly _tag: "Arm" }>
export type Reply = Extract<Engine.Event, { readonly _tag: "Reply" }>
export type RequestTag = Engine.Request["_tag"]

/** Timings used throughout: a 15 s lease renewed every 5 s. */
export const timing: Session.Timing = {
  leaseDuration: 15_000,
  renewInterval: 5_000,
  drift: 0.01,
  margin: 50,
  retryJitter: 2_500,
  minBackoff: 100
}

/** `sentAt + remaining × (1 − drift) − margin` with `timing`, written out independently of `Session`. */
export const deadlineOf = (sentAt: number, remaining: number, t: Session.Timing = timing): number =>
  sentAt + remaining * (1 - t.drift) - t.margin

// ---------------------------------------------------------------------------------------------------
// Reply constructors
// ---------------------------------------------------------------------------------------------------

export const opened = (sessionId: string, remaining: number = timing.leaseDuration): Engine.Response => ({
  _tag: "Opened",
  sessionId,
  remaining
})

export const live = (
  remaining: number = timing.leaseDuration,
  leases: ReadonlyArray<readonly [string, bigint]> = [],
  groups: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = []
): Engine.Response => ({
  _tag: "Live",
  remaining,
  leases: leases.map(([name, token]) => ({ name, token })),
  groups: groups.map(([group, members]) => ({ group, members }))
})

export const expired: Engine.Response = { _tag: "Expired" }
export const granted = (token: bigint): Engine.Response => ({ _tag: "Granted", token })
export const heldBy = (token?: bigint, remaining?: number): Engine.Response => ({ _tag: "HeldBy", token, remaining })
export const joined: Engine.Response = { _tag: "Joined" }
export const memberList = (...members: ReadonlyArray<string>): Engine.Response => ({ _tag: "MemberList", members })
export const done: Engine.Response = { _tag: "Done" }
export const failed = (error = "boom"): Engine.Response => ({ _tag: "Failed", error })

// ---------------------------------------------------------------------------------------------------
// Event constructors
// ---------------------------------------------------------------------------------------------------

export const boot: Engine.Event = { _tag: "Boot" }

export const start = (
  handle: number,
  name: string,
  options: {
    readonly kind?: "election" | "lock"
    readonly hasWork?: boolean
    readonly completion?: number
    readonly keep?: number
    readonly refusal?: number
  } = {}
): Engine.Event => ({
  _tag: "Start",
  handle,
  name,
  kind: options.kind ?? "election",
  hasWork: options.hasWork ?? false,
  completion: options.completion ?? 1000 + handle,
  ...(options.keep === undefined ? {} : { keep: options.keep }),
  ...(options.refusal === undefined ? {} : { refusal: options.refusal })
})

export const stop = (handle: number, completion: number): Engine.Event => ({ _tag: "Stop", handle, completion })
export const stepDown = (handle: number, cooldown: number, completion: number): Engine.Event => ({
  _tag: "StepDown",
  handle,
  cooldown,
  completion
})
export const released = (name: string): Engine.Event => ({ _tag: "Hint", hint: { _tag: "Released", name } })
export const groupChanged = (group: string): Engine.Event => ({ _tag: "Hint", hint: { _tag: "GroupChanged", group } })
export const workExited = (handle: number, termId: number): Engine.Event => ({ _tag: "WorkExited", handle, termId })
export const joinGroup = (handle: number, group: string, partitions: number, completion: number): Engine.Event => ({
  _tag: "Join",
  handle,
  group,
  partitions,
  completion
})
export const leaveGroup = (handle: number, completion: number): Engine.Event => ({ _tag: "Leave", handle, completion })
export const close = (completion: number): Engine.Event => ({ _tag: "Close", completion })
export const timerEvent = (key: string, id: number): Engine.Event => ({ _tag: "Timer", key, id })
export const replyEvent = (call: Call, response: Engine.Response): Reply => ({
  _tag: "Reply",
  requestId: call.requestId,
  sentAt: call.sentAt,
  request: call.request,
  response
})

// ---------------------------------------------------------------------------------------------------
// Command helpers
// ---------------------------------------------------------------------------------------------------

const subject = (r: Engine.Request): string => {
  switch (r._tag) {
    case "OpenSession":
      return ""
    case "KeepAlive":
    case "CloseSession":
      return ` ${r.sessionId}`
    case "Acquire":
      return ` ${r.name}@${r.sessionId}`
    case "Release":
      return ` ${r.name}#${r.token}@${r.sessionId}`
    case "Withdraw":
      return ` ${r.name}@${r.sessionId}`
    case "Join":
    case "Leave":
      return ` ${r.group}@${r.sessionId}`
    case "Members":
      return ` ${r.group}`
  }
}

/** A compact one-line rendering of a command, so tests can assert whole ordered command lists. */
export const show = (e: Engine.Command): string => {
  switch (e._tag) {
    case "Call":
      return `Call ${e.request._tag}${subject(e.request)}`
    case "Arm":
      return `Arm ${e.key} @${e.at}`
    case "Disarm":
      return `Disarm ${e.key}`
    case "Deadline":
      return `Deadline #${e.sessionSeq} ${e.deadline}`
    case "Elected":
      return `Elected ${e.name}#${e.token}`
    case "Revoked":
      return `Revoked ${e.name}#${e.token} ${e.reason}`
    case "Complete":
      return `Complete ${e.completion} ${e.outcome._tag}`
    case "Members":
      return `Members ${e.group} [${e.members.join(",")}] owned [${e.owned.join(",")}]`
    case "Publish": {
      const ev = e.event
      switch (ev._tag) {
        case "SessionOpened":
        case "SessionSuspended":
        case "SessionLive":
          return `Publish ${ev._tag} ${ev.sessionId}`
        case "SessionEnded":
          return `Publish SessionEnded ${ev.sessionId} ${ev.reason}`
        case "SessionLeaseShortened":
          return `Publish SessionLeaseShortened ${ev.sessionId} granted=${ev.granted} every=${ev.renewEvery}`
        case "Elected":
          return `Publish Elected ${ev.name}#${ev.token}`
        case "Revoked":
          return `Publish Revoked ${ev.name}#${ev.token} ${ev.reason}`
        case "StatusChanged":
          return `Publish StatusChanged ${ev.name} ${ev.status}`
        case "GroupView":
          return `Publish GroupView ${ev.group} [${ev.members.join(",")}]`
        case "PartitionsAssigned":
          return `Publish PartitionsAssigned ${ev.group} [${ev.partitions.join(",")}]`
        case "BackendFailed":
          return `Publish BackendFailed ${ev.operation}`
        case "TokenRegressed":
          return `Publish TokenRegressed ${ev.name} seen=${ev.seen} token=${ev.token ?? "absent"}`
      }
    }
  }
}

export const shows = (commands: ReadonlyArray<Engine.Command>): Array<string> => commands.map(show)

/** The commands of one kind. */
export const only = <T extends Engine.Command["_tag"]>(
  commands: ReadonlyArray<Engine.Command>,
  tag: T
): Array<Extract<Engine.Command, { readonly _tag: T }>> =>
  commands.filter((e): e is Extract<Engine.Command, { readonly _tag: T }> => e._tag === tag)

/** The backend calls among `commands`, optionally of one request kind. */
export const callsOf = (commands: ReadonlyArray<Engine.Command>, tag?: RequestTag): Array<Call> =>
  only(commands, "Call").filter((c) => tag === undefined || c.request._tag === tag)

/** The rendered commands, with the "Publish …" ones dropped (for asserting the operational sequence). */
export const ops = (commands: ReadonlyArray<Engine.Command>): Array<string> =>
  commands.filter((e) => e._tag !== "Publish").map(show)

/** The rendered published events only. */
export const published = (commands: ReadonlyArray<Engine.Command>): Array<string> => only(commands, "Publish").map(show)

// ---------------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------------

export interface Entry {
  readonly at: number
  readonly event: Engine.Event
  readonly before: Engine.State
  readonly after: Engine.State
  readonly commands: ReadonlyArray<Engine.Command>
}

export class Driver {
  state: Engine.State
  now = 0
  readonly log: Array<Entry> = []
  /** Calls the engine made that have not been answered yet, by request id. */
  readonly pending = new Map<number, Call>()
  /** Timers currently armed, by key (the latest `Arm` under that key). */
  readonly armed = new Map<string, Arm>()

  constructor(readonly timing: Session.Timing = timing_, seed = 42) {
    this.state = Engine.initial(timing, seed)
  }

  /** Feeds one event at `at` (default: the current time; time never goes backwards) and returns its commands. */
  send(event: Engine.Event, at: number = this.now): ReadonlyArray<Engine.Command> {
    if (at < this.now) throw new Error(`time goes backwards: ${at} < ${this.now}`)
    this.now = at
    if (event._tag === "Reply") this.pending.delete(event.requestId)
    if (event._tag === "Timer" && this.armed.get(event.key)?.id === event.id) this.armed.delete(event.key)
    const before = this.state
    const [after, commands] = Engine.step(before, event, at)
    this.state = after
    for (const e of commands) {
      if (e._tag === "Call") this.pending.set(e.requestId, e)
      else if (e._tag === "Arm") this.armed.set(e.key, e)
      else if (e._tag === "Disarm") this.armed.delete(e.key)
    }
    this.log.push({ at, event, before, after, commands })
    return commands
  }

  /** Every command produced so far, in order. */
  get commands(): Array<Engine.Command> {
    return this.log.flatMap((entry) => entry.commands)
  }

  /** Pending calls, optionally of one kind and about one lease name or group. */
  calls(tag?: RequestTag, subjectName?: string): Array<Call> {
    return Array.from(this.pending.values()).filter((c) =>
      (tag === undefined || c.request._tag === tag) &&
      (subjectName === undefined ||
        ("name" in c.request && c.request.name === subjectName) ||
        ("group" in c.request && c.request.group === subjectName))
    )
  }

  /** The one pending call of this kind (and name), failing the test when there is not exactly one. */
  call(tag: RequestTag, subjectName?: string): Call {
    const found = this.calls(tag, subjectName)
    expect(found.map((c) => show(c)), `exactly one pending ${tag} ${subjectName ?? ""}`).toHaveLength(1)
    return found[0]!
  }

  /** Answers a pending call (by value, or the one pending call of a kind/name). */
  reply(target: Call | RequestTag, response: Engine.Response, at?: number, subjectName?: string): ReadonlyArray<Engine.Command> {
    const c = typeof target === "string" ? this.call(target, subjectName) : target
    return this.send(replyEvent(c, response), at)
  }

  /** Answers the pending Acquire of `name`. */
  acquireReply(name: string, response: Engine.Response, at?: number): ReadonlyArray<Engine.Command> {
    return this.reply("Acquire", response, at, name)
  }

  /** The armed timer under `key` (failing the test when none is armed). */
  timer(key: string): Arm {
    const arm = this.armed.get(key)
    expect(arm, `timer ${key} armed`).toBeDefined()
    return arm!
  }

  /** Fires the timer armed under `key`, at its due time unless `at` is given. */
  fire(key: string, at?: number): ReadonlyArray<Engine.Command> {
    const arm = this.timer(key)
    return this.send(timerEvent(key, arm.id), at ?? Math.max(this.now, arm.at))
  }

  /** Boot, answer the OpenSession with `sessionId`, return the commands of the reply. */
  open(sessionId = "s1", remaining: number = this.timing.leaseDuration, at?: number): ReadonlyArray<Engine.Command> {
    if (this.calls("OpenSession").length === 0) this.send(boot)
    return this.reply("OpenSession", opened(sessionId, remaining), at)
  }

  /** Starts an election (or lock) and returns the step's commands. */
  start(handle: number, name: string, options?: Parameters<typeof start>[2]): ReadonlyArray<Engine.Command> {
    return this.send(start(handle, name, options))
  }

  /** Start `name` and have the backend grant `token`: returns the `Elected` command. */
  lead(
    handle: number,
    name: string,
    token: bigint,
    options?: Parameters<typeof start>[2]
  ): Extract<Engine.Command, { readonly _tag: "Elected" }> {
    this.start(handle, name, options)
    const commands = this.acquireReply(name, granted(token))
    const elected = only(commands, "Elected")
    expect(elected, `elected on ${name}`).toHaveLength(1)
    return elected[0]!
  }

  /** Fires the renewal timer and answers it `Live` (15 s) listing `leases`, at 5,010 unless `at` is given. */
  renewListing(leases: ReadonlyArray<readonly [string, bigint]>, at: number | undefined = 5_010): ReadonlyArray<Engine.Command> {
    this.fire("renew")
    return this.reply("KeepAlive", live(15_000, leases), at)
  }

  /**
   * Election 1 of `name` is stopped (at 100) while its acquire is in flight, then election 2 of the
   * same name starts (at 150): the abandoned attempt and the new election's, both unanswered.
   */
  restartDuringAcquire(name: string): { readonly old: Call; readonly current: Call } {
    this.start(1, name)
    const old = this.call("Acquire", name)
    this.send(stop(1, 9), 100)
    this.send(start(2, name), 150)
    const current = this.calls("Acquire", name).find((c) => c.requestId !== old.requestId)!
    return { old, current }
  }

  /** The engine's view of an election. */
  election(handle: number): Engine.ElectionState | undefined {
    return this.state.elections.get(handle)
  }

  /** The election of a name (not a queued lock). */
  byName(name: string): Engine.ElectionState | undefined {
    return Engine.electionByName(this.state, name)
  }

  get session(): Engine.SessionState {
    return this.state.session
  }
}

const timing_ = timing

/** Replays `steps` (an event, or a function of the driver giving the next event, each optionally timed). */
export type Step =
  | Engine.Event
  | ((d: Driver) => Engine.Event)
  | { readonly at: number; readonly event: Engine.Event | ((d: Driver) => Engine.Event) }

export const drive = (
  steps: ReadonlyArray<Step>,
  options: { readonly timing?: Session.Timing; readonly seed?: number } = {}
): Driver => {
  const d = new Driver(options.timing ?? timing, options.seed ?? 42)
  for (const step of steps) {
    if (typeof step === "function") d.send(step(d))
    else if ("at" in step && "event" in step) {
      const ev = step.event
      d.send(typeof ev === "function" ? ev(d) : ev, step.at)
    } else d.send(step)
  }
  return d
}

/** A driver with an open, LIVE session `s1` (opened at t = 0 with the full lease). */
export const liveDriver = (options: { readonly timing?: Session.Timing; readonly seed?: number } = {}): Driver => {
  const d = new Driver(options.timing ?? timing, options.seed ?? 42)
  d.open("s1")
  return d
}

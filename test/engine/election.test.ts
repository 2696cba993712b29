/**
 * Engine unit tests: the election state machine of SPEC section 5.1 (candidate, leader, handover,
 * cooldown, stop), candidate timing (section 6), locks and their FIFO queue.
 */
import { describe, expect, it } from "vitest"
import {
  callsOf,
  Driver,
  failed,
  granted,
  heldBy,
  liveDriver,
  only,
  ops,
  published,
  released,
  replyEvent,
  shows,
  start,
  stepDown,
  stop,
  timerEvent,
  workExited
} from "./harness.js"

describe("Engine: [*] -> Candidate (start)", () => {
  it("Start completes Ok, publishes CANDIDATE and sends one Acquire for the live session", () => {
    const d = liveDriver()
    const commands = d.send(start(1, "a", { completion: 11 }), 100)
    expect(shows(commands)).toEqual(["Complete 11 Ok", "Publish StatusChanged a CANDIDATE", "Call Acquire a@s1"])
    expect(callsOf(commands)[0]).toEqual({
      _tag: "Call",
      requestId: expect.any(Number),
      sentAt: 100,
      timeout: 5_000,
      request: { _tag: "Acquire", sessionId: "s1", name: "a" }
    })
    expect(d.election(1)).toMatchObject({ status: "CANDIDATE", attempt: callsOf(commands)[0]!.requestId })
  })

  it("Start before the session is open waits for it (no Acquire without a session)", () => {
    const d = new Driver()
    d.send({ _tag: "Boot" })
    expect(callsOf(d.send(start(1, "a")))).toEqual([])
  })

  it("starting a name already started fails with AlreadyStarted and changes nothing", () => {
    const d = liveDriver()
    d.start(1, "a")
    const before = d.state
    expect(shows(d.send(start(2, "a", { completion: 22 })))).toEqual(["Complete 22 AlreadyStarted"])
    expect(d.state.elections).toEqual(before.elections)
    expect(shows(d.send(start(3, "a", { kind: "lock", completion: 33 })))).toEqual(["Complete 33 AlreadyStarted"])
    d.start(4, "l", { kind: "lock" })
    expect(shows(d.send(start(5, "l", { kind: "election", completion: 55 })))).toEqual(["Complete 55 AlreadyStarted"])
    expect(d.send(start(2, "a", { completion: 22 }))).toMatchObject([{ outcome: { _tag: "AlreadyStarted", name: "a" } }])
  })

  it("a name can be started again once its election has stopped", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.send(stop(1, 9))
    expect(shows(d.send(start(2, "a", { completion: 22 })))).toEqual([
      "Complete 22 Ok",
      "Publish StatusChanged a CANDIDATE",
      "Call Acquire a@s1"
    ])
  })
})

describe("Engine: Candidate -> Leader (Granted)", () => {
  it("Granted for the current attempt, session live, before the deadline: Elected, then LEADER", () => {
    const d = liveDriver()
    d.start(1, "a")
    const commands = d.acquireReply("a", granted(7n), 50)
    expect(shows(commands)).toEqual(["Elected a#7", "Publish Elected a#7", "Publish StatusChanged a LEADER"])
    expect(only(commands, "Elected")[0]).toEqual({
      _tag: "Elected",
      handle: 1,
      termId: expect.any(Number),
      name: "a",
      token: 7n,
      leaseToken: 7n,
      sessionId: "s1",
      sessionSeq: 1,
      kind: "election",
      group: undefined,
      partition: undefined,
      hasWork: false
    })
    expect(d.election(1)?.status).toBe("LEADER")
  })

  it("a leader holds its term across renewals that list its lease", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    for (let i = 0; i < 20; i++) {
      d.fire("renew")
      const commands = d.reply("KeepAlive", { _tag: "Live", remaining: 15_000, leases: [{ name: "a", token: 7n }], groups: [] }, d.now + 10)
      expect(only(commands, "Revoked")).toEqual([])
      expect(callsOf(commands)).toEqual([])
    }
    expect(d.now).toBeGreaterThan(6 * 15_000) // many lease durations
    expect(d.election(1)?.status).toBe("LEADER")
  })
})

describe("Engine: Candidate -> Candidate (HeldBy, retry, hint)", () => {
  it("HeldBy without the holder's remaining: retry at renewInterval/2 + jitter in [0, retryJitter)", () => {
    const d = liveDriver()
    d.start(1, "a")
    const commands = d.acquireReply("a", heldBy(3n), 200)
    expect(ops(commands)).toEqual([expect.stringMatching(/^Arm retry:1 @/)])
    const at = d.timer("retry:1").at
    expect(at).toBeGreaterThanOrEqual(200 + 2_500)
    expect(at).toBeLessThan(200 + 2_500 + 2_500)
    expect(d.election(1)?.status).toBe("CANDIDATE")
    expect(ops(d.fire("retry:1"))).toEqual(["Call Acquire a@s1"])
  })

  it("the jitter is data: the same seed gives the same retry, different seeds spread over [0, retryJitter)", () => {
    const retryAt = (seed: number) => {
      const d = liveDriver({ seed })
      d.start(1, "a")
      d.acquireReply("a", heldBy(3n), 0)
      return d.timer("retry:1").at
    }
    expect(retryAt(7)).toBe(retryAt(7))
    const all = Array.from({ length: 200 }, (_, seed) => retryAt(seed))
    for (const at of all) {
      expect(at).toBeGreaterThanOrEqual(2_500)
      expect(at).toBeLessThan(5_000)
    }
    expect(new Set(all).size).toBeGreaterThan(150)
    expect(Math.min(...all)).toBeLessThan(2_750)
    expect(Math.max(...all)).toBeGreaterThan(4_750)
  })

  it("HeldBy with the holder's remaining: retry just after it, measured from the send time", () => {
    const d = liveDriver()
    d.start(1, "a", {})
    const sentAt = d.call("Acquire", "a").sentAt
    d.acquireReply("a", heldBy(3n, 1_000), sentAt + 30)
    const at = d.timer("retry:1").at
    // sentAt + remaining × (1 + drift) + 1 + a little jitter (well under a renewInterval / 2).
    expect(at).toBeGreaterThanOrEqual(sentAt + 1_010 + 1)
    expect(at).toBeLessThan(sentAt + 1_010 + 1 + 100)
  })

  it("HeldBy with a long remaining: the regular retry comes first", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n, 60_000), 0)
    const at = d.timer("retry:1").at
    expect(at).toBeGreaterThanOrEqual(2_500)
    expect(at).toBeLessThan(5_000)
  })

  it("a failed acquire publishes BackendFailed and retries like HeldBy", () => {
    const d = liveDriver()
    d.start(1, "a")
    const commands = d.acquireReply("a", failed("timeout"), 0)
    expect(published(commands)).toEqual(["Publish BackendFailed acquire"])
    expect(d.timer("retry:1").at).toBeGreaterThanOrEqual(2_500)
    expect(d.election(1)?.attempt).toBeUndefined()
  })

  it("a released hint makes a waiting candidate try at once (its retry timer cancelled)", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    const commands = d.send(released("a"), 300)
    expect(shows(commands)).toEqual(["Disarm retry:1", "Call Acquire a@s1"])
    expect(d.send(released("b"), 301)).toEqual([]) // another name: nothing
  })

  it("a released hint while an acquire is in flight sends nothing now and tries again right after HeldBy", () => {
    const d = liveDriver()
    d.start(1, "a")
    expect(d.send(released("a"), 10)).toEqual([])
    expect(d.send(released("a"), 11)).toEqual([])
    expect(d.calls("Acquire", "a")).toHaveLength(1)
    const commands = d.acquireReply("a", heldBy(3n, 10_000), 20)
    expect(shows(commands)).toEqual(["Call Acquire a@s1"])
    expect(d.armed.has("retry:1")).toBe(false)
    // That second try is an ordinary attempt again: HeldBy now waits for the retry timer.
    d.acquireReply("a", heldBy(3n), 30)
    expect(d.armed.has("retry:1")).toBe(true)
  })

  it("a released hint for a name we lead only makes the session renew at once (no acquire, no revocation)", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    expect(shows(d.send(released("a"), 10))).toEqual(["Call KeepAlive s1"])
  })

  it("a stale retry timer (replaced or cancelled) is ignored: at most one acquire in flight (rule 6)", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    const first = d.timer("retry:1")
    d.send(released("a"), 200) // cancels `first` and acquires
    expect(d.send(timerEvent("retry:1", first.id), first.at)).toEqual([])
    expect(d.calls("Acquire", "a")).toHaveLength(1)
    d.acquireReply("a", heldBy(3n), first.at + 1)
    const second = d.timer("retry:1")
    expect(second.id).not.toBe(first.id)
    expect(d.send(timerEvent("retry:1", first.id), second.at)).toEqual([])
    expect(ops(d.send(timerEvent("retry:1", second.id), second.at))).toEqual(["Call Acquire a@s1"])
    expect(d.send(timerEvent("retry:1", second.id), second.at)).toEqual([])
    expect(d.calls("Acquire", "a")).toHaveLength(1)
  })
})

describe("Engine: Leader -> [*] (stop without work)", () => {
  it("revoked STOPPED first, then released with the term's token, then STOPPED, then the stop completes", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const commands = d.send(stop(1, 50), 1_000)
    expect(shows(commands)).toEqual([
      "Revoked a#7 STOPPED",
      "Publish Revoked a#7 STOPPED",
      "Call Release a#7@s1",
      "Publish StatusChanged a STOPPED",
      "Complete 50 Ok"
    ])
    expect(callsOf(commands)[0]?.request).toEqual({ _tag: "Release", sessionId: "s1", name: "a", token: 7n })
    expect(d.election(1)).toBeUndefined()
    // Nothing is delivered for it after the stop completed.
    expect(d.send(released("a"), 1_100)).toEqual([])
  })

  it("stopping an unknown (or already stopped) election just completes", () => {
    const d = liveDriver()
    expect(shows(d.send(stop(99, 5)))).toEqual(["Complete 5 Ok"])
  })
})

describe("Engine: Leader -> Handover -> [*] (stop with work)", () => {
  const withWork = () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    const commands = d.send(stop(1, 50), 1_000)
    return { d, elected, commands }
  }

  it("stop revokes at once, enters HANDOVER and holds the lease until the deadline at stop time", () => {
    const { d, commands } = withWork()
    expect(shows(commands)).toEqual([
      "Revoked a#7 STOPPED",
      "Publish Revoked a#7 STOPPED",
      "Publish StatusChanged a HANDOVER",
      "Arm handover:1 @14800"
    ])
    expect(d.election(1)?.status).toBe("HANDOVER")
    expect(callsOf(commands)).toEqual([])
  })

  it("WorkExited: release (with the token) only now, then STOPPED and the stop completes", () => {
    const { d, elected } = withWork()
    const commands = d.send(workExited(1, elected.termId), 1_500)
    expect(shows(commands)).toEqual([
      "Disarm handover:1",
      "Call Release a#7@s1",
      "Publish StatusChanged a STOPPED",
      "Complete 50 Ok"
    ])
    expect(d.election(1)).toBeUndefined()
  })

  it("the handover timer at the stop-time deadline releases even if the work never exits", () => {
    const { d, elected } = withWork()
    d.fire("renew")
    d.reply("KeepAlive", { _tag: "Live", remaining: 15_000, leases: [{ name: "a", token: 7n }], groups: [] }, 5_010)
    expect(d.session.deadline).toBe(19_800) // the session lives on; the handover still ends at 14800
    expect(d.timer("handover:1").at).toBe(14_800)
    const commands = d.fire("handover:1")
    expect(d.now).toBe(14_800)
    expect(shows(commands)).toEqual(["Call Release a#7@s1", "Publish StatusChanged a STOPPED", "Complete 50 Ok"])
    // A late exit of the work changes nothing.
    expect(d.send(workExited(1, elected.termId), 15_000)).toEqual([])
  })

  it("if the session's deadline passes during the handover, the stop completes without a second Revoked", () => {
    const { d } = withWork()
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    const commands = d.fire("deadline") // 14800: the session is over, CloseSession frees the lease
    expect(only(commands, "Revoked")).toEqual([])
    expect(shows(commands)).toContain("Complete 50 Ok")
    expect(shows(commands)).toContain("Call CloseSession s1")
    expect(shows(commands).indexOf("Complete 50 Ok")).toBeLessThan(shows(commands).indexOf("Call OpenSession"))
    expect(d.election(1)).toBeUndefined()
  })

  it("a WorkExited for another term of the handle is ignored", () => {
    const { d, elected } = withWork()
    expect(d.send(workExited(1, elected.termId + 1000), 1_100)).toEqual([])
    expect(d.election(1)?.status).toBe("HANDOVER")
  })

  it("WorkExited before stop (the work finished on its own) lets a later stop release at once", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    expect(d.send(workExited(1, elected.termId), 500)).toEqual([])
    expect(d.election(1)?.status).toBe("LEADER")
    const commands = d.send(stop(1, 50), 1_000)
    expect(ops(commands)).toEqual(["Revoked a#7 STOPPED", "Call Release a#7@s1", "Complete 50 Ok"])
  })
})

describe("Engine: step down and cooldown", () => {
  it("Leader -> Cooldown (stepDown without work): revoke STEPPED_DOWN, release, COOLDOWN, complete", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const commands = d.send(stepDown(1, 3_000, 60), 1_000)
    expect(shows(commands)).toEqual([
      "Revoked a#7 STEPPED_DOWN",
      "Publish Revoked a#7 STEPPED_DOWN",
      "Call Release a#7@s1",
      "Publish StatusChanged a COOLDOWN",
      "Arm cooldown:1 @4000",
      "Complete 60 Ok"
    ])
    expect(d.election(1)?.status).toBe("COOLDOWN")
  })

  it("no acquire during the cooldown (not even on a released hint), CANDIDATE and an Acquire after it", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.send(stepDown(1, 3_000, 60), 1_000)
    expect(d.send(released("a"), 1_500)).toEqual([])
    expect(d.send(released("a"), 3_999)).toEqual([])
    expect(d.calls("Acquire")).toEqual([])
    const commands = d.fire("cooldown:1")
    expect(d.now).toBe(4_000)
    expect(shows(commands)).toEqual(["Publish StatusChanged a CANDIDATE", "Call Acquire a@s1"])
    // And it can win again, with a larger token.
    expect(shows(d.acquireReply("a", granted(8n), 4_010))).toContain("Elected a#8")
  })

  it("Leader -> Handover -> Cooldown (stepDown with work): release after WorkExited, then COOLDOWN", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    const down = d.send(stepDown(1, 3_000, 60), 1_000)
    expect(shows(down)).toEqual([
      "Revoked a#7 STEPPED_DOWN",
      "Publish Revoked a#7 STEPPED_DOWN",
      "Publish StatusChanged a HANDOVER",
      "Arm handover:1 @14800"
    ])
    const commands = d.send(workExited(1, elected.termId), 2_000)
    expect(shows(commands)).toEqual([
      "Disarm handover:1",
      "Call Release a#7@s1",
      "Publish StatusChanged a COOLDOWN",
      "Arm cooldown:1 @4000",
      "Complete 60 Ok"
    ])
  })

  it("Handover -> Cooldown also happens at the handover timer when the work never exits", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n, { hasWork: true })
    d.send(stepDown(1, 3_000, 60), 1_000)
    d.fire("renew")
    d.reply("KeepAlive", { _tag: "Live", remaining: 15_000, leases: [{ name: "a", token: 7n }], groups: [] }, 5_000)
    const commands = d.fire("handover:1")
    expect(ops(commands)).toEqual(["Call Release a#7@s1", "Arm cooldown:1 @14800", "Complete 60 Ok"])
    expect(d.election(1)?.status).toBe("COOLDOWN")
  })

  it("Candidate -> Cooldown (stepDown): the pending retry is cancelled, the session leaves the queue", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 10)
    const commands = d.send(stepDown(1, 2_000, 60), 100)
    expect(shows(commands)).toEqual([
      "Call Withdraw a@s1",
      "Disarm retry:1",
      "Publish StatusChanged a COOLDOWN",
      "Arm cooldown:1 @2100",
      "Complete 60 Ok"
    ])
  })

  it("Candidate -> Cooldown with an acquire in flight: a grant arriving later is released, not adopted", () => {
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    d.send(stepDown(1, 2_000, 60), 100)
    const commands = d.send(replyEvent(attempt, granted(9n)), 200)
    expect(shows(commands)).toEqual(["Call Release a#9@s1"])
    expect(d.election(1)?.status).toBe("COOLDOWN")
  })

  it("Cooldown -> [*] (stop): the cooldown timer is cancelled, STOPPED, complete", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.send(stepDown(1, 3_000, 60), 1_000)
    const commands = d.send(stop(1, 61), 1_500)
    expect(shows(commands)).toEqual(["Disarm cooldown:1", "Publish StatusChanged a STOPPED", "Complete 61 Ok"])
    expect(d.election(1)).toBeUndefined()
  })

  it("Candidate -> [*] (stop): the retry is cancelled, the session leaves the queue, STOPPED, complete", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 10)
    const commands = d.send(stop(1, 61), 100)
    expect(shows(commands)).toEqual([
      "Disarm retry:1",
      "Call Withdraw a@s1",
      "Publish StatusChanged a STOPPED",
      "Complete 61 Ok"
    ])
  })

  it("stop during a stepDown's handover: the handover ends in STOPPED and completes both waiters in order", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    d.send(stepDown(1, 3_000, 60), 1_000)
    expect(d.send(stop(1, 61), 1_100)).toEqual([])
    const commands = d.send(workExited(1, elected.termId), 1_200)
    expect(shows(commands)).toEqual([
      "Disarm handover:1",
      "Call Release a#7@s1",
      "Publish StatusChanged a STOPPED",
      "Complete 60 Ok",
      "Complete 61 Ok"
    ])
  })
})

describe("Engine: locks", () => {
  it("two locks of one name queue FIFO: the second acquires only after the first ends", () => {
    const d = liveDriver()
    d.start(1, "L", { kind: "lock", completion: 11 })
    const queued = d.send(start(2, "L", { kind: "lock", completion: 12 }), 10)
    expect(shows(queued)).toEqual(["Complete 12 Ok"]) // no error, no Acquire, no status event
    expect(d.election(2)?.status).toBe("QUEUED")
    expect(d.calls("Acquire", "L")).toHaveLength(1)
    d.acquireReply("L", granted(5n), 20)
    expect(d.calls("Acquire")).toEqual([])
    const commands = d.send(stop(1, 13), 30)
    expect(shows(commands)).toEqual([
      "Revoked L#5 STOPPED",
      "Publish Revoked L#5 STOPPED",
      "Call Release L#5@s1",
      "Publish StatusChanged L STOPPED",
      "Complete 13 Ok",
      "Publish StatusChanged L CANDIDATE",
      "Call Acquire L@s1"
    ])
    const second = d.acquireReply("L", granted(6n), 40)
    expect(only(second, "Elected")).toMatchObject([{ handle: 2, name: "L", token: 6n, kind: "lock" }])
  })

  it("three queued locks enter in call order", () => {
    const d = liveDriver()
    d.start(1, "L", { kind: "lock" })
    d.start(3, "L", { kind: "lock" })
    d.start(2, "L", { kind: "lock" })
    const order: Array<number> = []
    for (let token = 1n; token <= 3n; token++) {
      const elected = d.acquireReply("L", granted(token), d.now + 1)
      const handle = only(elected, "Elected")[0]!.handle
      order.push(handle)
      d.send(stop(handle, 100 + handle), d.now + 1)
    }
    expect(order).toEqual([1, 3, 2])
  })

  it("a queued lock that is stopped (timed out) leaves the queue silently and never acquires", () => {
    const d = liveDriver()
    d.start(1, "L", { kind: "lock" })
    d.start(2, "L", { kind: "lock" })
    expect(shows(d.send(stop(2, 22), 10))).toEqual(["Complete 22 Ok"])
    d.acquireReply("L", granted(5n), 20)
    const commands = d.send(stop(1, 21), 30)
    expect(callsOf(commands, "Acquire")).toEqual([])
    expect(d.state.elections.size).toBe(0)
  })

  it("a lock ends for good when its term is lost involuntarily, and the next queued lock starts", () => {
    const d = liveDriver()
    d.lead(1, "L", 5n, { kind: "lock" })
    d.start(2, "L", { kind: "lock" })
    d.fire("renew")
    const commands = d.reply("KeepAlive", { _tag: "Live", remaining: 15_000, leases: [], groups: [] }, 5_000)
    expect(shows(commands).filter((x) => !x.startsWith("Deadline") && !x.startsWith("Arm"))).toEqual([
      "Publish TokenRegressed L seen=5 token=absent",
      "Revoked L#5 TAKEN_OVER",
      "Publish Revoked L#5 TAKEN_OVER",
      "Publish StatusChanged L STOPPED",
      "Publish StatusChanged L CANDIDATE",
      "Call Acquire L@s1"
    ])
    expect(d.election(1)).toBeUndefined()
    expect(d.election(2)?.status).toBe("CANDIDATE")
  })

  it("a lock stopped while it is acquiring gives the late grant back (a timed-out lock never takes the lock later)", () => {
    const d = liveDriver()
    d.start(1, "L", { kind: "lock" })
    const attempt = d.call("Acquire", "L")
    d.send(stop(1, 9), 1_000)
    const commands = d.send(replyEvent(attempt, granted(5n)), 1_100)
    expect(shows(commands)).toEqual(["Call Release L#5@s1"])
    expect(only(commands, "Elected")).toEqual([])
  })
})

describe("Engine: Elected / Revoked pairing", () => {
  it("every Elected is followed by exactly one Revoked, whatever ends the term", () => {
    const d = liveDriver()
    d.lead(1, "a", 1n)
    d.send(stepDown(1, 0, 1), 10) // STEPPED_DOWN
    d.fire("cooldown:1")
    d.acquireReply("a", granted(2n), 20)
    d.fire("renew")
    d.reply("KeepAlive", { _tag: "Live", remaining: 15_000, leases: [], groups: [] }, 5_000) // TAKEN_OVER
    d.fire("retry:1")
    d.acquireReply("a", granted(3n), d.now)
    d.fire("renew")
    d.reply("KeepAlive", { _tag: "Expired" }, d.now) // SESSION_EXPIRED
    d.reply("OpenSession", { _tag: "Opened", sessionId: "s2", remaining: 15_000 }, d.now)
    d.acquireReply("a", granted(4n), d.now)
    d.fire("deadline") // DEADLINE_PASSED
    d.reply("OpenSession", { _tag: "Opened", sessionId: "s3", remaining: 15_000 }, d.now)
    const elected5 = d.acquireReply("a", granted(5n), d.now)
    d.send(stop(1, 2), d.now) // STOPPED
    expect(only(elected5, "Elected")).toHaveLength(1)
    const terms = d.commands.filter((e) => e._tag === "Elected" || e._tag === "Revoked").map(shows1)
    expect(terms).toEqual([
      "Elected a#1",
      "Revoked a#1 STEPPED_DOWN",
      "Elected a#2",
      "Revoked a#2 TAKEN_OVER",
      "Elected a#3",
      "Revoked a#3 SESSION_EXPIRED",
      "Elected a#4",
      "Revoked a#4 DEADLINE_PASSED",
      "Elected a#5",
      "Revoked a#5 STOPPED"
    ])
  })
})

const shows1 = (e: Parameters<typeof shows>[0][number]) => shows([e])[0]

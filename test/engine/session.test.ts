/**
 * Engine unit tests: the session (SPEC sections 2, 5.1 rule 4, 6): opening, the local deadline,
 * renewal, halving backoff, deadline passed, expiry (never revived), shortened leases.
 */
import { describe, expect, it } from "vitest"
import {
  boot,
  callsOf,
  deadlineOf,
  drive,
  Driver,
  expired,
  failed,
  live,
  liveDriver,
  only,
  opened,
  ops,
  published,
  replyEvent,
  shows,
  show,
  start,
  timerEvent,
  timing
} from "./harness.js"

describe("Engine: opening a session", () => {
  it("Boot sends exactly one OpenSession with ttl = leaseDuration and timeout = renewInterval", () => {
    const d = new Driver()
    const commands = d.send(boot, 0)
    expect(commands).toEqual([
      { _tag: "Call", requestId: expect.any(Number), sentAt: 0, timeout: 5_000, request: { _tag: "OpenSession", ttl: 15_000 } }
    ])
    expect(d.session.status).toBe("OPENING")
    expect(d.session.seq).toBe(1)
  })

  it("Opened: LIVE, SessionOpened, Deadline at sentAt + remaining × (1 − drift) − margin, renew at sentAt + renewInterval", () => {
    const d = new Driver()
    d.send(boot, 1_000)
    // The reply takes 200 ms: the deadline counts from the send time, not the receive time.
    const commands = d.reply("OpenSession", opened("s1", 15_000), 1_200)
    const deadline = 1_000 + 15_000 * 0.99 - 50
    expect(deadline).toBe(15_800)
    expect(shows(commands)).toEqual([
      "Publish SessionOpened s1",
      "Deadline #1 15800",
      "Arm deadline @15800",
      "Arm renew @6000"
    ])
    expect(d.session).toMatchObject({ id: "s1", status: "LIVE", deadline: 15_800, every: 5_000 })
  })

  it("Opened: every election already started tries one acquire with the new session", () => {
    const d = new Driver()
    d.send(boot, 0)
    expect(shows(d.send(start(1, "a")))).toEqual(["Complete 1001 Ok", "Publish StatusChanged a CANDIDATE"])
    expect(shows(d.send(start(2, "b")))).toEqual(["Complete 1002 Ok", "Publish StatusChanged b CANDIDATE"])
    const commands = d.reply("OpenSession", opened("s1"), 10)
    expect(ops(commands)).toEqual([
      "Deadline #1 14800",
      "Arm deadline @14800",
      "Arm renew @5000",
      "Call Acquire a@s1",
      "Call Acquire b@s1"
    ])
  })

  it("a failed OpenSession publishes BackendFailed and retries after renewInterval/2 + jitter", () => {
    const d = new Driver()
    d.send(boot, 0)
    const commands = d.reply("OpenSession", failed("connection refused"), 100)
    expect(published(commands)).toEqual(["Publish BackendFailed openSession"])
    const arm = d.timer("open")
    expect(arm.at).toBeGreaterThanOrEqual(100 + 2_500)
    expect(arm.at).toBeLessThan(100 + 2_500 + 2_500)
    expect(callsOf(commands)).toEqual([])
    const retry = d.fire("open")
    expect(ops(retry)).toEqual(["Call OpenSession"])
    expect(d.session.seq).toBe(2)
  })

  it("an Opened reply that arrives after its own local deadline is closed, not used", () => {
    const d = new Driver()
    d.send(boot, 0)
    // remaining 1000 → deadline 0 + 990 − 50 = 940, but the reply arrives at 1000.
    const commands = d.reply("OpenSession", opened("s1", 1_000), 1_000)
    expect(ops(commands)).toEqual(["Call CloseSession s1", "Arm open @1100"])
    expect(d.session.status).toBe("OPENING")
    expect(d.session.id).toBeUndefined()
  })

  it("a reply to an OpenSession that is no longer current closes that session", () => {
    const d = new Driver()
    d.send(boot, 0)
    const first = d.call("OpenSession")
    d.reply(first, failed(), 10)
    d.fire("open")
    const second = d.call("OpenSession")
    // The first request's reply comes again (a duplicate / late delivery) with a session: close it.
    const commands = d.send(replyEvent(first, opened("s-old")))
    expect(ops(commands)).toEqual(["Call CloseSession s-old"])
    expect(d.session.opening).toBe(second.requestId)
  })
})

describe("Engine: renewal", () => {
  it("the renew timer sends one KeepAlive for the session with ttl = leaseDuration", () => {
    const d = liveDriver()
    const commands = d.fire("renew")
    expect(d.now).toBe(5_000)
    expect(commands).toEqual([
      {
        _tag: "Call",
        requestId: expect.any(Number),
        sentAt: 5_000,
        timeout: 5_000,
        request: { _tag: "KeepAlive", sessionId: "s1", ttl: 15_000 }
      }
    ])
  })

  it("a successful renewal moves the deadline to sentAt + remaining × (1 − drift) − margin and re-arms renew", () => {
    const d = liveDriver()
    d.fire("renew")
    const commands = d.reply("KeepAlive", live(15_000), 5_300)
    expect(ops(commands)).toEqual([
      `Deadline #1 ${deadlineOf(5_000, 15_000)}`,
      `Arm deadline @${deadlineOf(5_000, 15_000)}`,
      "Arm renew @10000"
    ])
    expect(d.session.deadline).toBe(19_800)
  })

  it("a renewal never shortens the deadline (a smaller remaining keeps the later deadline)", () => {
    const d = new Driver()
    d.send(boot, 0)
    d.reply("OpenSession", opened("s1", 20_000), 10)
    expect(d.session.deadline).toBe(deadlineOf(0, 20_000)) // 19750
    d.fire("renew")
    // This reply alone would give 5000 + 11880 − 50 = 16830 < 19750.
    const commands = d.reply("KeepAlive", live(12_000), 5_010)
    expect(only(commands, "Deadline")).toEqual([{ _tag: "Deadline", sessionSeq: 1, deadline: 19_750 }])
    expect(d.session.deadline).toBe(19_750)
    expect(d.timer("deadline").at).toBe(19_750)
    expect(published(commands)).toEqual([]) // 11830 of validity still fits two renewals: not shortened
  })

  it("a renewal is not sent while one is in flight (rule 6), and a stale renew timer is ignored", () => {
    const d = liveDriver()
    const arm = d.timer("renew")
    d.fire("renew")
    // The same timer delivered twice (or late): its id is no longer armed.
    expect(d.send(timerEvent("renew", arm.id), 5_001)).toEqual([])
    expect(d.calls("KeepAlive")).toHaveLength(1)
    // A timer id that was never armed does nothing either.
    expect(d.send(timerEvent("renew", 999_999), 5_002)).toEqual([])
  })

  it("a failed renewal makes the session SUSPENDED and retries after half the time left", () => {
    const d = liveDriver() // deadline 14800
    d.fire("renew")
    const commands = d.reply("KeepAlive", failed("timeout"), 5_100)
    expect(shows(commands)).toEqual([
      "Publish BackendFailed keepAlive",
      "Publish SessionSuspended s1",
      `Arm renew @${5_100 + (14_800 - 5_100) / 2}` // 9950
    ])
    expect(d.session.status).toBe("SUSPENDED")
  })

  it("the renewal backoff halves the time left, floored at minBackoff, until the deadline", () => {
    const d = liveDriver() // deadline 14800
    const arms: Array<number> = []
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    arms.push(d.timer("renew").at)
    for (let i = 0; i < 7; i++) {
      d.fire("renew")
      expect(d.calls("KeepAlive")).toHaveLength(1)
      d.reply("KeepAlive", failed(), d.now)
      arms.push(d.timer("renew").at)
    }
    // (14800 − t) / 2 each time: 4900, 2450, 1225, 612.5, 306.25, 153.125, then the 100 ms floor.
    expect(arms).toEqual([9_900, 12_350, 13_575, 14_187.5, 14_493.75, 14_646.875, 14_746.875, 14_846.875])
    expect(d.session.status).toBe("SUSPENDED")
  })

  it("the renewal backoff is capped at renewInterval", () => {
    const d = new Driver()
    d.send(boot, 0)
    d.reply("OpenSession", opened("s1", 60_000), 0) // deadline 59350, half the time left ≫ 5000
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    expect(d.timer("renew").at).toBe(10_000)
  })

  it("a successful renewal after a failure makes the session LIVE again", () => {
    const d = liveDriver()
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    d.fire("renew")
    const commands = d.reply("KeepAlive", live(15_000), 10_000)
    expect(published(commands)).toContain("Publish SessionLive s1")
    expect(d.session.status).toBe("LIVE")
    expect(d.session.deadline).toBe(deadlineOf(9_900, 15_000))
  })

  it("no acquisition is started while the session is SUSPENDED", () => {
    const d = liveDriver()
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    const commands = d.send(start(1, "a"), 5_010)
    expect(callsOf(commands)).toEqual([])
    expect(d.election(1)?.status).toBe("CANDIDATE")
  })

  it("a candidate whose retry came due while SUSPENDED tries again once the session is LIVE", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", { _tag: "HeldBy", token: 3n, remaining: undefined }, 100)
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    const retry = d.fire("retry:1")
    expect(callsOf(retry)).toEqual([]) // suspended: no acquire now
    d.fire("renew")
    const commands = d.reply("KeepAlive", live(15_000), 9_950)
    expect(d.session.status).toBe("LIVE")
    expect(ops(commands)).toContain("Call Acquire a@s1")
  })
})

describe("Engine: the local deadline passes", () => {
  it("all terms are revoked DEADLINE_PASSED, the session ends, and a new one is opened", () => {
    const d = liveDriver() // deadline 14800
    d.lead(1, "a", 7n)
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    const commands = d.fire("deadline") // at 14800
    expect(d.now).toBe(14_800)
    expect(shows(commands)).toEqual([
      "Revoked a#7 DEADLINE_PASSED",
      "Publish Revoked a#7 DEADLINE_PASSED",
      "Publish StatusChanged a CANDIDATE",
      "Publish SessionEnded s1 DEADLINE_PASSED",
      "Call CloseSession s1",
      "Disarm renew",
      "Disarm deadline",
      "Call OpenSession"
    ])
    expect(d.session).toMatchObject({ seq: 2, status: "OPENING", id: undefined })
    // The election stays a candidate and competes again with the new session.
    const reopened = d.reply("OpenSession", opened("s2"), 14_900)
    expect(ops(reopened)).toContain("Call Acquire a@s2")
  })

  it("the deadline is checked on every event, not only by the timer", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    // A hint arrives at 20000 (a process pause: the deadline timer never fired).
    const commands = d.send({ _tag: "Hint", hint: { _tag: "Released", name: "other" } }, 20_000)
    expect(shows(commands).slice(0, 2)).toEqual(["Revoked a#7 DEADLINE_PASSED", "Publish Revoked a#7 DEADLINE_PASSED"])
    expect(ops(commands)).toContain("Call OpenSession")
  })

  it("a keepAlive reply arriving after the deadline never revives the session", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.fire("renew")
    const keepAlive = d.call("KeepAlive")
    // The KeepAlive hangs; the reply comes at 14900, after the deadline (14800), with no timer before it.
    const commands = d.send(replyEvent(keepAlive, live(15_000, [["a", 7n]])), 14_900)
    expect(shows(commands).slice(0, 1)).toEqual(["Revoked a#7 DEADLINE_PASSED"])
    expect(only(commands, "Deadline")).toEqual([])
    expect(only(commands, "Elected")).toEqual([])
    expect(d.session.status).toBe("OPENING")
  })

  it("a keepAlive reply arriving after the deadline timer fired is ignored entirely", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.fire("renew")
    const keepAlive = d.call("KeepAlive")
    d.fire("deadline")
    expect(d.send(replyEvent(keepAlive, live(15_000, [["a", 7n]])), 15_000)).toEqual([])
    expect(d.session.deadline).toBe(Number.NEGATIVE_INFINITY)
    expect(d.byName("a")?.term).toBeUndefined()
  })

  it("the new session's terms never reuse the old session's deadline (Deadline is per incarnation)", () => {
    const d = liveDriver()
    d.fire("deadline")
    const commands = d.reply("OpenSession", opened("s2"), 15_000)
    expect(only(commands, "Deadline")).toEqual([{ _tag: "Deadline", sessionSeq: 2, deadline: deadlineOf(14_800, 15_000) }])
  })
})

describe("Engine: the backend expires the session", () => {
  it("keepAlive Expired: terms revoked SESSION_EXPIRED, SessionEnded, a new session (never revived)", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.fire("renew")
    const commands = d.reply("KeepAlive", expired, 5_100)
    expect(shows(commands)).toEqual([
      "Revoked a#7 SESSION_EXPIRED",
      "Publish Revoked a#7 SESSION_EXPIRED",
      "Publish StatusChanged a CANDIDATE",
      "Publish SessionEnded s1 SESSION_EXPIRED",
      "Disarm deadline",
      "Call OpenSession"
    ])
    expect(d.session).toMatchObject({ seq: 2, status: "OPENING", id: undefined })
    // Nothing ever renews s1 again.
    const reopened = d.reply("OpenSession", opened("s2"), 5_200)
    expect(callsOf(reopened).map((c) => c.request)).toEqual([{ _tag: "Acquire", sessionId: "s2", name: "a" }])
  })

  it("an acquire answered Expired for the current session ends it the same way", () => {
    const d = liveDriver()
    d.start(1, "a")
    const commands = d.acquireReply("a", expired, 100)
    expect(published(commands)).toContain("Publish SessionEnded s1 SESSION_EXPIRED")
    expect(ops(commands)).toContain("Call OpenSession")
  })

  it("an acquire answered Expired for an older session does not end the current one", () => {
    const d = liveDriver()
    d.fire("renew")
    d.reply("KeepAlive", expired, 5_000)
    d.reply("OpenSession", opened("s2"), 5_010)
    d.start(1, "a")
    const staleCall = { ...d.call("Acquire", "a"), request: { _tag: "Acquire" as const, sessionId: "s1", name: "a" } }
    // Forge a reply to the current attempt as if it had gone to s1: the engine checks the session id.
    const commands = d.send(replyEvent(staleCall, expired), 5_020)
    expect(published(commands)).not.toContain("Publish SessionEnded s2 SESSION_EXPIRED")
    expect(d.session).toMatchObject({ id: "s2", status: "LIVE" })
  })
})

describe("Engine: a backend that grants less than leaseDuration", () => {
  const shortDriver = () => {
    const d = new Driver()
    d.send(boot, 0)
    // 6000 granted → local validity 6000 × 0.99 − 50 = 5890 < 2 × renewInterval.
    const commands = d.reply("OpenSession", opened("s1", 6_000), 10)
    return { d, commands }
  }

  it("publishes SessionLeaseShortened and renews every third of the granted local validity", () => {
    const { d, commands } = shortDriver()
    const every = 5_890 / 3
    expect(shows(commands)).toEqual([
      "Publish SessionOpened s1",
      `Publish SessionLeaseShortened s1 granted=6000 every=${every}`,
      "Deadline #1 5890",
      "Arm deadline @5890",
      `Arm renew @${every}`
    ])
    expect(d.session.every).toBe(every)
  })

  it("keeps renewing every third of the validity, with calls timing out after that period", () => {
    const { d } = shortDriver()
    const every = 5_890 / 3
    const keepAlive = d.fire("renew")
    expect(only(keepAlive, "Call")[0]?.timeout).toBe(every)
    d.reply("KeepAlive", live(6_000), d.now + 5)
    expect(d.timer("renew").at).toBeCloseTo(2 * every, 9)
    expect(d.session.deadline).toBeCloseTo(every + 5_890, 9)
  })

  it("publishes SessionLeaseShortened once per session", () => {
    const { d } = shortDriver()
    let count = 0
    for (let i = 0; i < 5; i++) {
      d.fire("renew")
      const commands = d.reply("KeepAlive", live(6_000), d.now)
      count += published(commands).filter((p) => p.startsWith("Publish SessionLeaseShortened")).length
    }
    expect(count).toBe(0)
    expect(d.session.status).toBe("LIVE")
    // A new session publishes it again (once).
    d.fire("renew")
    d.reply("KeepAlive", expired, d.now)
    const reopened = d.reply("OpenSession", opened("s2", 6_000), d.now)
    expect(published(reopened).filter((p) => p.startsWith("Publish SessionLeaseShortened"))).toHaveLength(1)
  })

  it("holds a term across many granted lifetimes without DEADLINE_PASSED", () => {
    const { d } = shortDriver()
    d.lead(1, "a", 1n)
    for (let i = 0; i < 30; i++) {
      d.fire("renew")
      const commands = d.reply("KeepAlive", live(6_000, [["a", 1n]]), d.now + 20)
      expect(only(commands, "Revoked")).toEqual([])
    }
    expect(d.now).toBeGreaterThan(30 * 1_900)
    expect(d.byName("a")?.status).toBe("LEADER")
  })

  it("a full-length grant is not shortened", () => {
    const d = liveDriver()
    expect(d.session.every).toBe(timing.renewInterval)
    expect(d.log.flatMap((e) => published(e.commands)).some((p) => p.includes("Shortened"))).toBe(false)
  })
})

describe("Engine: replays are exact", () => {
  const script = [
    boot,
    (d: Driver) => replyEvent(d.call("OpenSession"), opened("s1")),
    start(1, "a"),
    (d: Driver) => replyEvent(d.call("Acquire", "a"), { _tag: "HeldBy" as const, token: 1n, remaining: undefined }),
    { at: 100, event: start(2, "b") },
    (d: Driver) => replyEvent(d.call("Acquire", "b"), { _tag: "Failed" as const, error: "x" }),
    { at: 5_000, event: (d: Driver) => timerEvent("renew", d.timer("renew").id) },
    { at: 5_010, event: (d: Driver) => replyEvent(d.call("KeepAlive"), failed()) }
  ]

  it("the same events with the same seed give the same commands, jitter included", () => {
    const one = drive(script, { seed: 5 })
    const two = drive(script, { seed: 5 })
    expect(one.commands.map(show)).toEqual(two.commands.map(show))
    expect(one.commands.map(show)).toContain("Publish SessionSuspended s1")
    expect(one.state).toEqual(two.state)
  })

  it("another seed changes only the jitter", () => {
    const one = drive(script, { seed: 5 })
    const other = drive(script, { seed: 6 })
    const strip = (d: Driver) => d.commands.map((e) => e._tag === "Arm" && e.key.startsWith("retry") ? e.key : show(e))
    expect(strip(one)).toEqual(strip(other))
    expect(one.timer("retry:1").at).not.toBe(other.timer("retry:1").at)
  })
})

describe("Engine: state is never mutated in place", () => {
  it("step returns a new state and leaves its input exactly as it was", () => {
    const d = liveDriver()
    d.lead(1, "a", 5n, { hasWork: true })
    const before = d.state
    const copy = structuredClone(before)
    d.fire("renew")
    d.reply("KeepAlive", live(15_000, [["a", 5n]]), 5_010)
    d.send(start(2, "b"), 5_020)
    d.send({ _tag: "Stop", handle: 1, completion: 9 }, 5_030)
    d.send({ _tag: "Close", completion: 10 }, 5_040)
    expect(before).toEqual(copy)
    expect(before.elections.get(1)?.status).toBe("LEADER")
    expect(d.state.closing).toBeDefined()
  })
})

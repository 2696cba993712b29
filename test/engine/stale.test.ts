/**
 * Engine unit tests: stale and racing replies (SPEC 5.1 rules 1 and 3): which grants are adopted,
 * which are given back, and what a renewal reply's lease list does to the terms.
 */
import { describe, expect, it } from "vitest"
import {
  callsOf,
  expired,
  granted,
  heldBy,
  live,
  liveDriver,
  only,
  opened,
  ops,
  replyEvent,
  shows,
  stepDown,
  stop,
  workExited
} from "./harness.js"

describe("Engine rule 1: a reply to an abandoned attempt", () => {
  it("a Granted reply to an attempt abandoned by stop is released with its token, not adopted", () => {
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    d.send(stop(1, 9), 100)
    const commands = d.send(replyEvent(attempt, granted(4n)), 200)
    expect(commands).toEqual([
      {
        _tag: "Call",
        requestId: expect.any(Number),
        sentAt: 200,
        timeout: 5_000,
        request: { _tag: "Release", sessionId: "s1", name: "a", token: 4n }
      }
    ])
  })

  it("a HeldBy reply to an abandoned attempt only takes the session out of the queue it may have joined", () => {
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    d.send(stop(1, 9), 100)
    expect(shows(d.send(replyEvent(attempt, heldBy(4n, 1_000)), 200))).toEqual(["Call Withdraw a@s1"])
  })

  it("an old attempt's grant is not adopted by a new election of the same name", () => {
    const d = liveDriver()
    const { current, old } = d.restartDuringAcquire("a")
    const commands = d.send(replyEvent(old, granted(4n)), 200)
    expect(shows(commands)).toEqual(["Call Release a#4@s1"])
    expect(d.election(2)).toMatchObject({ status: "CANDIDATE", attempt: current.requestId, term: undefined })
    expect(shows(d.send(replyEvent(current, granted(5n)), 210))).toContain("Elected a#5")
  })

  it("a grant to an attempt of an expired session incarnation is released with that session's id", () => {
    const d = liveDriver()
    d.start(1, "a")
    const old = d.call("Acquire", "a")
    d.fire("renew")
    d.reply("KeepAlive", expired, 5_000)
    d.reply("OpenSession", opened("s2"), 5_010)
    const commands = d.send(replyEvent(old, granted(4n)), 5_020)
    expect(shows(commands)).toEqual(["Call Release a#4@s1"])
    expect(d.election(1)?.term).toBeUndefined()
    expect(d.calls("Acquire", "a").map((c) => c.request)).toEqual([{ _tag: "Acquire", sessionId: "s2", name: "a" }])
  })
})

describe("Engine rule 1: two attempts of one name in flight for one session (acquire is idempotent)", () => {
  // Lock 1 times out (is stopped) while its acquire is in flight; queued lock 2 of the same name is
  // promoted and sends its own acquire. A backend answers both with the same token (same session).
  const race = () => {
    const d = liveDriver()
    d.start(1, "L", { kind: "lock" })
    const first = d.call("Acquire", "L")
    d.start(2, "L", { kind: "lock" })
    d.send(stop(1, 9), 100)
    const second = d.calls("Acquire", "L").find((c) => c.requestId !== first.requestId)!
    expect(second).toBeDefined()
    return { d, first, second }
  }

  it("the abandoned attempt's grant does not release the lease the current term holds with that token", () => {
    const { d, first, second } = race()
    expect(shows(d.send(replyEvent(second, granted(5n)), 200))).toContain("Elected L#5")
    const commands = d.send(replyEvent(first, granted(5n)), 210)
    expect(callsOf(commands)).toEqual([])
    expect(d.election(2)).toMatchObject({ status: "LEADER", term: { token: 5n, revoked: false } })
  })

  it("when the abandoned grant comes back first it is released, and the same token is then refused", () => {
    const { d, first, second } = race()
    expect(shows(d.send(replyEvent(first, granted(5n)), 200))).toEqual(["Call Release L#5@s1"])
    const commands = d.send(replyEvent(second, granted(5n)), 210)
    expect(only(commands, "Elected")).toEqual([])
    expect(ops(commands)).toEqual(["Call Release L#5@s1", expect.stringMatching(/^Arm retry:2 @/)])
    d.fire("retry:2")
    expect(shows(d.acquireReply("L", granted(6n)))).toContain("Elected L#6")
  })
})

describe("Engine rule 1: a grant arriving after the deadline", () => {
  it("is not adopted (the session is over for us) and is given back", () => {
    // An Acquire sent at 0 that the backend answers only at 14900, after the local deadline (14800).
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    const commands = d.send(replyEvent(attempt, granted(4n)), 14_900)
    expect(only(commands, "Elected")).toEqual([])
    expect(shows(commands)).toContain("Call Release a#4@s1")
    expect(shows(commands)).toContain("Publish SessionEnded s1 DEADLINE_PASSED")
    expect(d.election(1)).toMatchObject({ status: "CANDIDATE", term: undefined })
  })

  it("is not adopted after the deadline timer already ended the session", () => {
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    d.fire("deadline")
    const commands = d.send(replyEvent(attempt, granted(4n)), 14_900)
    expect(shows(commands)).toEqual(["Call Release a#4@s1"])
  })
})

describe("Engine rule 1: a grant whose token is not above one this session released", () => {
  const afterStepDown = () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.send(stepDown(1, 1_000, 60), 100) // releases a#7
    d.fire("cooldown:1") // 1100: candidate again, acquiring
    return d
  }

  it("a grant with the released token is released again, not adopted, and the candidate retries", () => {
    const d = afterStepDown()
    const commands = d.acquireReply("a", granted(7n), 1_200)
    expect(only(commands, "Elected")).toEqual([])
    expect(ops(commands)).toEqual(["Call Release a#7@s1", expect.stringMatching(/^Arm retry:1 @/)])
    expect(d.election(1)).toMatchObject({ status: "CANDIDATE", term: undefined })
  })

  it("a grant with a lower token is not adopted either", () => {
    const d = afterStepDown()
    const commands = d.acquireReply("a", granted(6n), 1_200)
    expect(only(commands, "Elected")).toEqual([])
    expect(shows(commands)).toContain("Call Release a#6@s1")
  })

  it("a grant with a larger token is adopted", () => {
    const d = afterStepDown()
    expect(shows(d.acquireReply("a", granted(8n), 1_200))).toContain("Elected a#8")
  })

  it("a release of one name does not constrain another name", () => {
    const d = afterStepDown()
    d.start(2, "b")
    expect(shows(d.acquireReply("b", granted(3n), 1_200))).toContain("Elected b#3")
  })
})

describe("Engine rule 3: the renewal reply's lease list", () => {
  it("a held lease missing from the reply: revoked TAKEN_OVER, back to CANDIDATE, retry; no release", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const commands = d.renewListing([])
    expect(shows(commands)).toEqual([
      "Deadline #1 19800",
      "Arm deadline @19800",
      "Arm renew @10000",
      // The store lost the lease of a live session (rule 7).
      "Publish TokenRegressed a seen=7 token=absent",
      "Revoked a#7 TAKEN_OVER",
      "Publish Revoked a#7 TAKEN_OVER",
      "Publish StatusChanged a CANDIDATE",
      expect.stringMatching(/^Arm retry:1 @/)
    ])
    expect(callsOf(commands)).toEqual([])
    const retry = d.timer("retry:1").at
    expect(retry).toBeGreaterThanOrEqual(5_010 + 2_500)
    expect(retry).toBeLessThan(5_010 + 5_000)
    expect(ops(d.fire("retry:1"))).toEqual(["Call Acquire a@s1"])
  })

  it("a held lease listed with another token is taken over too, and that other lease (unwanted) is released", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n, { kind: "lock" })
    const commands = d.renewListing([["a", 9n]])
    const names = shows(commands)
    expect(names).toContain("Revoked a#7 TAKEN_OVER")
    expect(names).toContain("Call Release a#9@s1")
    expect(names.indexOf("Revoked a#7 TAKEN_OVER")).toBeLessThan(names.indexOf("Call Release a#9@s1"))
  })

  it("an election whose term was taken over adopts the lease listed with a higher token (handed to it)", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const names = shows(d.renewListing([["a", 9n]]))
    expect(names).toContain("Revoked a#7 TAKEN_OVER")
    expect(names).toContain("Elected a#9")
    expect(names.indexOf("Revoked a#7 TAKEN_OVER")).toBeLessThan(names.indexOf("Elected a#9"))
    expect(names.some((line) => line.startsWith("Call Release"))).toBe(false)
  })

  it("an owned lease that no election holds or is acquiring is released with its token", () => {
    const d = liveDriver()
    const commands = d.renewListing([["ghost", 3n]])
    expect(ops(commands)).toEqual([
      "Deadline #1 19800",
      "Arm deadline @19800",
      "Arm renew @10000",
      "Call Release ghost#3@s1"
    ])
  })

  it("an owned lease an election is acquiring right now is kept", () => {
    const d = liveDriver()
    d.start(1, "a")
    const commands = d.renewListing([["a", 3n]])
    expect(callsOf(commands)).toEqual([])
  })

  it("an owned lease whose election is cooling down is released", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    d.send(stepDown(1, 60_000, 60), 100)
    d.fire("renew")
    // The earlier release was lost: the backend still lists a#7 for us.
    const commands = d.reply("KeepAlive", live(15_000, [["a", 7n]]), 5_010)
    expect(shows(callsOf(commands))).toEqual(["Call Release a#7@s1"])
  })

  it("a term adopted after the keepAlive was sent is not taken over by that reply", () => {
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    d.fire("renew") // KeepAlive sent at 5000, before the grant is known
    const keepAlive = d.call("KeepAlive")
    d.send(replyEvent(attempt, granted(7n)), 5_005)
    expect(d.election(1)?.status).toBe("LEADER")
    const commands = d.send(replyEvent(keepAlive, live(15_000, [])), 5_010)
    expect(only(commands, "Revoked")).toEqual([])
    expect(callsOf(commands)).toEqual([])
    expect(d.election(1)?.status).toBe("LEADER")
    // The next renewal, sent after the adoption, does take it over if it omits the lease.
    expect(shows(d.renewListing([], 10_010))).toContain("Revoked a#7 TAKEN_OVER")
  })

  it("a handover term missing from the reply ends the handover at once, without a second Revoked or a release", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    d.send(stop(1, 50), 1_000)
    const commands = d.renewListing([])
    expect(only(commands, "Revoked")).toEqual([])
    expect(callsOf(commands)).toEqual([])
    expect(shows(commands)).toEqual(expect.arrayContaining(["Disarm handover:1", "Publish StatusChanged a STOPPED", "Complete 50 Ok"]))
    expect(d.send(workExited(1, elected.termId), 5_020)).toEqual([])
  })
})

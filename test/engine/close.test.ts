/**
 * Engine unit tests: `Close` (SPEC sections 2, 4 and 5.1): everything revoked and released, the session
 * closed, completion after the CloseSession reply, and nothing delivered afterwards.
 */
import { describe, expect, it } from "vitest"
import {
  close,
  done,
  Driver,
  failed,
  granted,
  live,
  liveDriver,
  only,
  opened,
  released,
  replyEvent,
  shows,
  start,
  stepDown,
  stop,
  timerEvent,
  workExited
} from "./harness.js"

describe("Engine: Close", () => {
  it("revokes and releases every term, closes the session, and completes only after the CloseSession reply", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const commands = d.send(close(90), 1_000)
    expect(shows(commands)).toEqual([
      "Revoked a#7 STOPPED",
      "Publish Revoked a#7 STOPPED",
      "Call Release a#7@s1",
      "Publish StatusChanged a STOPPED",
      "Disarm deadline",
      "Disarm renew",
      "Call CloseSession s1",
      "Publish SessionEnded s1 STOPPED"
    ])
    expect(d.session.status).toBe("CLOSED")
    expect(only(commands, "Complete")).toEqual([])
    expect(shows(d.reply("CloseSession", done, 1_100))).toEqual(["Complete 90 Ok"])
  })

  it("completes even when the CloseSession call fails (the backend expires the session anyway)", () => {
    const d = liveDriver()
    d.send(close(90), 1_000)
    expect(shows(d.reply("CloseSession", failed(), 1_100))).toEqual(["Complete 90 Ok"])
  })

  it("waits for every handover, revoking at once but releasing each lease after its work exits", () => {
    const d = liveDriver()
    d.lead(1, "a", 1n)
    const b = d.lead(2, "b", 2n, { hasWork: true })
    d.start(3, "c")
    const attemptC = d.call("Acquire", "c")
    d.lead(4, "d", 4n)
    d.send(stepDown(4, 60_000, 40), 500)

    const commands = d.send(close(90), 1_000)
    expect(shows(commands)).toEqual([
      "Revoked a#1 STOPPED",
      "Publish Revoked a#1 STOPPED",
      "Call Release a#1@s1",
      "Publish StatusChanged a STOPPED",
      "Revoked b#2 STOPPED",
      "Publish Revoked b#2 STOPPED",
      "Publish StatusChanged b HANDOVER",
      "Arm handover:2 @14800",
      "Publish StatusChanged c STOPPED",
      "Disarm cooldown:4",
      "Publish StatusChanged d STOPPED"
    ])
    // A stale grant for the abandoned attempt of c is given back.
    expect(shows(d.send(replyEvent(attemptC, granted(3n)), 1_100))).toEqual(["Call Release c#3@s1"])
    const exit = d.send(workExited(2, b.termId), 1_200)
    expect(shows(exit)).toEqual([
      "Disarm handover:2",
      "Call Release b#2@s1",
      "Publish StatusChanged b STOPPED",
      "Disarm deadline",
      "Disarm renew",
      "Call CloseSession s1",
      "Publish SessionEnded s1 STOPPED"
    ])
    expect(shows(d.reply("CloseSession", done, 1_300))).toEqual(["Complete 90 Ok"])
  })

  it("a second Close waits for the same completion", () => {
    const d = liveDriver()
    d.send(close(90), 1_000)
    expect(d.send(close(91), 1_001)).toEqual([])
    expect(shows(d.reply("CloseSession", done, 1_100))).toEqual(["Complete 90 Ok", "Complete 91 Ok"])
  })

  it("delivers nothing after it completed: no events, no timers, no elections", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const renew = d.timer("renew")
    d.send(close(90), 1_000)
    d.reply("CloseSession", done, 1_100)
    expect(d.send(timerEvent("renew", renew.id), 5_000)).toEqual([])
    expect(d.send(released("a"), 5_001)).toEqual([])
    expect(d.send({ _tag: "Hint", hint: { _tag: "GroupChanged", group: "g" } }, 5_002)).toEqual([])
    expect(d.send(workExited(1, 1), 5_003)).toEqual([])
    expect(d.send({ _tag: "Boot" }, 5_004)).toEqual([])
    expect(shows(d.send(start(2, "b", { completion: 20 }), 5_005))).toEqual(["Complete 20 Closed"])
    expect(shows(d.send({ _tag: "Join", handle: 3, group: "g", partitions: 2, completion: 21 }, 5_006))).toEqual([
      "Complete 21 Closed"
    ])
    expect(shows(d.send(stop(1, 22), 5_007))).toEqual(["Complete 22 Ok"])
    expect(shows(d.send(stepDown(1, 0, 23), 5_008))).toEqual(["Complete 23 Ok"])
    expect(shows(d.send(close(24), 5_009))).toEqual(["Complete 24 Ok"])
    expect(d.state.elections.size).toBe(0)
    expect(d.state.timers.size).toBe(0)
  })

  it("a late KeepAlive reply after close changes nothing", () => {
    const d = liveDriver()
    d.fire("renew")
    const keepAlive = d.call("KeepAlive")
    d.send(close(90), 5_010)
    d.reply("CloseSession", done, 5_020)
    expect(d.send(replyEvent(keepAlive, live(15_000, [["a", 1n]])), 5_030)).toEqual([])
    expect(d.session.status).toBe("CLOSED")
  })

  it("Close before the session opened completes at once, and a late Opened session is closed", () => {
    const d = new Driver()
    d.send({ _tag: "Boot" }, 0)
    d.send(start(1, "a"), 1)
    const openCall = d.call("OpenSession")
    const commands = d.send(close(90), 10)
    expect(shows(commands)).toEqual(["Publish StatusChanged a STOPPED", "Complete 90 Ok"])
    expect(shows(d.send(replyEvent(openCall, opened("s1")), 20))).toEqual(["Call CloseSession s1"])
  })

  it("Start and Join during a close in progress fail with Closed", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n, { hasWork: true })
    d.send(close(90), 1_000)
    expect(shows(d.send(start(2, "b", { completion: 20 }), 1_001))).toEqual(["Complete 20 Closed"])
    expect(shows(d.send({ _tag: "Join", handle: 3, group: "g", partitions: 2, completion: 21 }, 1_002))).toEqual([
      "Complete 21 Closed"
    ])
  })

  it("a close waiting on a handover completes when the session's deadline passes meanwhile", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n, { hasWork: true })
    d.fire("renew")
    d.reply("KeepAlive", failed(), 5_000)
    d.send(close(90), 6_000)
    const commands = d.fire("deadline") // the work never exits and the session cannot be renewed
    expect(only(commands, "Revoked")).toEqual([])
    expect(shows(commands)).toContain("Call CloseSession s1")
    expect(shows(commands)).not.toContain("Call OpenSession")
    const closeCalls = d.calls("CloseSession")
    expect(closeCalls.length).toBeGreaterThanOrEqual(1)
    const completions = closeCalls.flatMap((c) => shows(d.send(replyEvent(c, done), 14_900)))
    expect(completions).toEqual(["Complete 90 Ok"])
  })

  it("a close waiting on a handover completes when the backend says the session expired", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n, { hasWork: true })
    d.send(close(90), 1_000)
    d.fire("renew")
    const commands = d.reply("KeepAlive", { _tag: "Expired" }, 5_000)
    expect(shows(commands)).not.toContain("Call OpenSession")
    const completions = d.calls("CloseSession").flatMap((c) => shows(d.send(replyEvent(c, done), 5_100)))
    expect(completions).toEqual(["Complete 90 Ok"])
  })
})

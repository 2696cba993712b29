/**
 * Engine unit tests: a candidate that was told `HeldBy` (the backend may have queued its session as a
 * waiter) and stops wanting the name withdraws; nothing else does.
 */
import { describe, expect, it } from "vitest"
import { close, granted, heldBy, liveDriver, ops, replyEvent, shows, stepDown, stop } from "./harness.js"

const withdrawals = (commands: Parameters<typeof ops>[0]) => shows(commands).filter((e) => e.startsWith("Call Withdraw"))

describe("Engine: withdrawing from the waiter queue", () => {
  it("a queued lock that stops (timeout, interruption: both are a Stop) withdraws", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock" })
    d.acquireReply("a", heldBy(3n, 1_000), 10)
    expect(withdrawals(d.send(stop(1, 60), 100))).toEqual(["Call Withdraw a@s1"])
  })

  it("a candidate never told HeldBy does not withdraw", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock" })
    expect(withdrawals(d.send(stop(1, 60), 100))).toEqual([])
  })

  it("a leader that stops releases and does not withdraw, even if it was queued before its grant", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n, 1_000), 10)
    d.fire("retry:1")
    d.acquireReply("a", granted(4n))
    const commands = d.send(stop(1, 60))
    expect(withdrawals(commands)).toEqual([])
    expect(shows(commands)).toContain("Call Release a#4@s1")
  })

  it("a lock queued behind another lock of the same name in this client keeps the session's place", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock" })
    d.start(2, "a", { kind: "lock" })
    d.acquireReply("a", heldBy(3n, 1_000), 10)
    const commands = d.send(stop(1, 60), 100)
    expect(withdrawals(commands)).toEqual([])
    // The next lock takes over the candidacy (and the session's place in the backend's queue).
    expect(shows(commands)).toContain("Call Acquire a@s1")
    d.acquireReply("a", heldBy(3n, 1_000), 110)
    expect(withdrawals(d.send(stop(2, 61), 200))).toEqual(["Call Withdraw a@s1"])
  })

  it("closing the client withdraws its queued candidates before closing the session", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock" })
    d.start(3, "b")
    d.acquireReply("a", heldBy(3n, 1_000), 10)
    d.acquireReply("b", heldBy(5n, 1_000), 10)
    const calls = shows(d.send(close(70), 100)).filter((e) => e.startsWith("Call"))
    expect(calls).toEqual(["Call Withdraw a@s1", "Call Withdraw b@s1", "Call CloseSession s1"])
  })

  it("an abandoned attempt's HeldBy withdraws only while no election of this client wants the name", () => {
    const d = liveDriver()
    d.start(1, "a")
    const first = d.call("Acquire", "a")
    d.send(stepDown(1, 1_000, 60), 100)
    // Cooling down: the election does not want the name now.
    expect(shows(d.send(replyEvent(first, heldBy(4n, 1_000)), 150))).toEqual(["Call Withdraw a@s1"])
    d.fire("cooldown:1")
    const second = d.call("Acquire", "a")
    d.send(stop(1, 61))
    d.start(2, "a")
    // A new election of the name is a candidate again: the late reply must not take it out of the queue.
    expect(d.send(replyEvent(second, heldBy(4n, 1_000)))).toEqual([])
  })

  it("a waiter of an ended session does not withdraw (the backend skips waiters whose session is gone)", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n, 1_000), 10)
    d.fire("renew")
    d.reply("KeepAlive", { _tag: "Expired" })
    d.open("s2")
    expect(withdrawals(d.send(stop(1, 60)))).toEqual([])
  })
})

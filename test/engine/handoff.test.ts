/**
 * The targeted `released` hint (FIFO hand-off): a backend that reserved the lease for one waiting
 * session names it in `to`; every other session ignores the hint, that one (or a hint without `to`)
 * acquires at once as before.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { heldBy, liveDriver, released, shows } from "./harness.js"

const releasedTo = (name: string, to: string): Engine.Event => ({ _tag: "Hint", hint: { _tag: "Released", name, to } })

describe("Engine: released hint reserved for a session", () => {
  it("a hint reserved for another session is ignored: no acquire, the retry timer stays armed", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    const retry = d.timer("retry:1")
    expect(d.send(releasedTo("a", "s2"), 300)).toEqual([])
    expect(d.calls("Acquire", "a")).toHaveLength(0)
    expect(d.timer("retry:1")).toEqual(retry)
  })

  it("a hint reserved for another session during an attempt does not mark it hinted", () => {
    const d = liveDriver()
    d.start(1, "a")
    expect(d.send(releasedTo("a", "s2"), 10)).toEqual([])
    d.acquireReply("a", heldBy(3n, 10_000), 20)
    expect(d.calls("Acquire", "a")).toHaveLength(0)
    expect(d.armed.has("retry:1")).toBe(true)
  })

  it("a hint reserved for this session acquires at once, like a plain one", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    expect(shows(d.send(releasedTo("a", "s1"), 300))).toEqual(["Disarm retry:1", "Call Acquire a@s1"])
  })

  it("a hint reserved for this session while an attempt is in flight tries again right after HeldBy", () => {
    const d = liveDriver()
    d.start(1, "a")
    expect(d.send(releasedTo("a", "s1"), 10)).toEqual([])
    expect(shows(d.acquireReply("a", heldBy(3n, 10_000), 20))).toEqual(["Call Acquire a@s1"])
  })

  it("a hint without `to` still wakes every candidate", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    expect(shows(d.send(released("a"), 300))).toEqual(["Disarm retry:1", "Call Acquire a@s1"])
  })
})

describe("Engine: a released hint for a name this client leads", () => {
  it("renews at once, so a session the backend lost early ends its terms promptly", () => {
    const d = liveDriver()
    d.lead(1, "a", 5n)
    const effects = d.send(released("a"), 200)
    expect(shows(effects).filter((line) => line.startsWith("Call KeepAlive"))).toHaveLength(1)
    // The backend answers that the session is gone: the term ends now, not at the next period.
    const revoked = d.reply("KeepAlive", { _tag: "Expired" }, 210)
    expect(shows(revoked)).toContain("Revoked a#5 SESSION_EXPIRED")
  })

  it("does not renew twice while a renewal is in flight", () => {
    const d = liveDriver()
    d.lead(1, "a", 5n)
    d.send(released("a"), 200)
    expect(shows(d.send(released("a"), 201)).filter((line) => line.startsWith("Call KeepAlive"))).toEqual([])
  })
})

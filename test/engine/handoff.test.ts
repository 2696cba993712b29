/**
 * The FIFO hand-off hints. The targeted `released` hint: a backend that reserved the lease for one
 * waiting session names it in `to`; every other session ignores the hint, that one (or a hint without
 * `to`) acquires at once as before. The pushed grant: a backend that handed the lease to a waiting
 * session says so with the token; that session adopts it when it can tell the grant is fresh.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { done, failed, granted, heldBy, live, liveDriver, released, shows, stepDown } from "./harness.js"

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
    const commands = d.send(released("a"), 200)
    expect(shows(commands).filter((line) => line.startsWith("Call KeepAlive"))).toHaveLength(1)
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

const grantedTo = (name: string, to: string, token: bigint): Engine.Event => ({
  _tag: "Hint",
  hint: { _tag: "Granted", name, to, token }
})

describe("Engine: a lease the backend hands to this session (pushed grant)", () => {
  it("a queued candidate adopts a grant above the token it was refused with, without a round trip", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    expect(shows(d.send(grantedTo("a", "s1", 4n), 300))).toEqual([
      "Disarm retry:1",
      "Elected a#4",
      "Publish Elected a#4",
      "Publish StatusChanged a LEADER"
    ])
    expect(d.byName("a")?.status).toBe("LEADER")
    expect(d.calls("Acquire", "a")).toHaveLength(0)
  })

  it("a grant not above the token the candidate has seen is a late message of an earlier grant: given back", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    expect(shows(d.send(grantedTo("a", "s1", 3n), 300))).toEqual(["Call Release a#3@s1"])
    expect(d.byName("a")?.status).toBe("CANDIDATE")
  })

  it("a candidate that has seen no token (its acquire timed out) cannot tell a fresh grant from a stale one: it asks, and a Granted reply makes the term", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", { _tag: "Failed", error: "timeout" }, 100)
    // Not given back: a waiter queued by the timed-out acquire would lose its place in the queue.
    expect(shows(d.send(grantedTo("a", "s1", 9n), 300))).toEqual(["Disarm retry:1", "Call Acquire a@s1"])
    expect(d.calls("Release", "a")).toHaveLength(0)
    expect(shows(d.acquireReply("a", granted(9n), 310))).toContain("Elected a#9")
    expect(d.byName("a")?.status).toBe("LEADER")
  })

  it("a candidate that has seen no token asks; a HeldBy reply says the pushed grant was stale: nothing is adopted", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", { _tag: "Failed", error: "timeout" }, 100)
    d.send(grantedTo("a", "s1", 9n), 300)
    d.acquireReply("a", heldBy(12n), 310)
    expect(d.byName("a")?.status).toBe("CANDIDATE")
    // Seen a token now: a later duplicate of the stale grant is judged against it, and given back.
    expect(shows(d.send(grantedTo("a", "s1", 9n), 320))).toEqual(["Call Release a#9@s1"])
  })

  it("with an acquire in flight, the candidate tries again right after its reply instead", () => {
    const d = liveDriver()
    d.start(1, "a")
    expect(d.send(grantedTo("a", "s1", 4n), 10)).toEqual([])
    expect(shows(d.acquireReply("a", heldBy(3n, 10_000), 20))).toEqual(["Call Acquire a@s1"])
    expect(shows(d.acquireReply("a", granted(4n), 30))).toContain("Elected a#4")
  })

  it("a duplicate of the grant already adopted changes nothing", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    d.send(grantedTo("a", "s1", 4n), 300)
    expect(d.send(grantedTo("a", "s1", 4n), 310)).toEqual([])
  })

  it("a grant after the term ended (stepped down, released) is not adopted again", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    d.send(grantedTo("a", "s1", 4n), 300)
    d.send(stepDown(1, 10, 2001), 400)
    d.reply("Release", done, 410)
    d.fire("cooldown:1", 500)
    const late = shows(d.send(grantedTo("a", "s1", 4n), 600))
    expect(late.some((line) => line.startsWith("Elected"))).toBe(false)
  })

  it("nobody wants it (no candidate of that name): given back", () => {
    const d = liveDriver()
    expect(shows(d.send(grantedTo("a", "s1", 4n), 300))).toEqual(["Call Release a#4@s1"])
  })

  it("a grant to another session of a name we lead renews at once", () => {
    const d = liveDriver()
    d.lead(1, "a", 5n)
    const commands = shows(d.send(grantedTo("a", "s2", 6n), 200))
    expect(commands.filter((line) => line.startsWith("Call KeepAlive"))).toHaveLength(1)
  })

  it("a grant to another session is ignored by a candidate", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    expect(d.send(grantedTo("a", "s2", 4n), 300)).toEqual([])
  })

  /** A candidate of "a" queued (refused with token 3) whose session's renewal then failed at 5,100. */
  const queuedThenSuspended = () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    d.fire("renew", 5_000)
    d.reply("KeepAlive", failed("timeout"), 5_100)
    expect(d.session.status).toBe("SUSPENDED")
    return d
  }

  it("a grant pushed while the session is SUSPENDED is kept, not given back, and adopted once a renewal lists it", () => {
    const d = queuedThenSuspended()
    // Giving it back would cost the waiter its place in the store's queue (a reader behind a waiting
    // writer would then go first); adopting it now would start a term on a session in doubt.
    expect(shows(d.send(grantedTo("a", "s1", 4n), 5_200))).toEqual([])
    expect(d.calls("Release", "a")).toHaveLength(0)
    expect(d.byName("a")?.status).toBe("CANDIDATE")
    d.fire("renew")
    expect(shows(d.reply("KeepAlive", live(15_000, [["a", 4n]]), 9_960))).toContain("Elected a#4")
    expect(d.byName("a")?.status).toBe("LEADER")
  })

  it("a grant kept while SUSPENDED goes with the session when its deadline passes: never adopted", () => {
    const d = queuedThenSuspended()
    d.send(grantedTo("a", "s1", 4n), 5_200)
    const commands = shows(d.fire("deadline"))
    expect(commands.some((line) => line.startsWith("Elected"))).toBe(false)
    expect(d.byName("a")?.status).toBe("CANDIDATE")
  })

  it("a grant whose message was lost is adopted when the renewal lists the lease", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n), 100)
    d.fire("renew", 5_000)
    expect(shows(d.reply("KeepAlive", live(15_000, [["a", 4n]]), 5_010))).toContain("Elected a#4")
  })

  it("a renewal listing a lease whose token the candidate has already seen gives it back", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(4n), 100)
    d.fire("renew", 5_000)
    const commands = shows(d.reply("KeepAlive", live(15_000, [["a", 4n]]), 5_010))
    expect(commands).toContain("Call Release a#4@s1")
    expect(commands.some((line) => line.startsWith("Elected"))).toBe(false)
  })
})

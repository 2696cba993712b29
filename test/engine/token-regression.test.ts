/**
 * Engine rule 7: tokens only rise. A token of a name at or below the highest this client has seen
 * for it (from a grant, a hand-off grant, a renewal's lease list or a `HeldBy`) is reported with
 * `TokenRegressed`; the grant is not adopted but given back, and no term of the name starts for one
 * lease duration (`quiet`), so every session that held it before the store lost it has ended its
 * term first. The memory is bounded: names without an election are kept up to `idleNamesKept`.
 */
import { describe, expect, it } from "vitest"
import * as Engine from "../../src/Engine.js"
import {
  callsOf,
  expired,
  granted,
  heldBy,
  live,
  liveDriver,
  only,
  opened,
  published,
  released,
  replyEvent,
  shows,
  start,
  stop,
  timing
} from "./harness.js"

/** One lease duration on our clock, drift and margin included (`quietPeriod` in the engine). */
const quiet = timing.leaseDuration * (1 + timing.drift) + timing.margin

const regressions = (commands: ReadonlyArray<Engine.Command>) =>
  only(commands, "Publish").map((p) => p.event).filter((e) => e._tag === "TokenRegressed")

describe("Engine rule 7: a token at or below one seen is reported and not adopted at once", () => {
  it("a lock granted a lower token than the previous lock of the name saw: reported, given back, quiet, then adopted", () => {
    const d = liveDriver()
    d.lead(1, "L", 5n, { kind: "lock" })
    d.send(stop(1, 11), 100)
    d.reply("Release", { _tag: "Done" }, 110)
    d.start(2, "L", { kind: "lock" })
    const commands = d.acquireReply("L", granted(3n), 200)
    expect(published(commands)).toContain("Publish TokenRegressed L seen=5 token=3")
    expect(only(commands, "Elected")).toEqual([])
    expect(shows(commands)).toContain("Call Release L#3@s1")
    // No acquire before the quiet period is over, not even on a `released` hint.
    expect(d.timer("retry:2").at).toBeGreaterThanOrEqual(200 + quiet)
    expect(callsOf(d.send(released("L"), 1_000), "Acquire")).toEqual([])
    expect(d.timer("retry:2").at).toBe(200 + quiet)
    // After it, the next grant above the regressed token starts the term (reported once).
    while (d.timer("renew").at < d.timer("retry:2").at) {
      d.fire("renew")
      d.reply("KeepAlive", live(15_000, []))
    }
    expect(callsOf(d.fire("retry:2"), "Acquire")).toHaveLength(1)
    const next = d.acquireReply("L", granted(4n))
    expect(shows(next)).toContain("Elected L#4")
    expect(regressions(next)).toEqual([])
  })

  it("a try-lock during the quiet period is not acquired at once (no waiting)", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(9n, 1_000), 10)
    d.fire("retry:1")
    d.acquireReply("a", heldBy(1n, 1_000)) // regression: a is quiet
    const commands = d.send({ ...start(2, "b", { kind: "lock" }) }, d.now)
    expect(callsOf(commands, "Acquire")).toHaveLength(1) // another name is not quiet
    d.send(stop(1, 12))
    const tried = d.send({ ...start(3, "a", { kind: "lock" }), tryCompletion: 77 } as Engine.Event)
    expect(callsOf(tried, "Acquire")).toEqual([])
    expect(shows(tried)).toContain("Complete 77 NotAcquired")
  })

  it("across sessions: a new session granted token 1 after the store forgot token 5", () => {
    const d = liveDriver()
    d.lead(1, "a", 5n)
    d.fire("renew")
    d.reply("KeepAlive", expired, 5_010)
    d.reply("OpenSession", opened("s2"), 5_020)
    const commands = d.acquireReply("a", granted(1n), 5_030)
    expect(regressions(commands)).toEqual([expect.objectContaining({ name: "a", seen: 5n, token: 1n })])
    expect(only(commands, "Elected")).toEqual([])
    expect(shows(commands)).toContain("Call Release a#1@s2")
  })

  it.each([
    { held: 9n, grant: 2n, case: "a HeldBy token counts as seen: a later grant below it is a regression" },
    { held: 1n, grant: 1n, case: "the same token granted to us that another holder had (both holding token 1 after a restart) is a regression" }
  ])("$case", ({ grant, held }) => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(held, 1_000), 10)
    d.send(released("a"), 20)
    const commands = d.acquireReply("a", granted(grant), 30)
    expect(published(commands)).toContain(`Publish TokenRegressed a seen=${held} token=${grant}`)
    expect(only(commands, "Elected")).toEqual([])
  })

  it("a HeldBy below a token seen before the request was sent is a regression (the store restarted under a holder)", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(9n, 1_000), 10)
    d.fire("retry:1")
    const commands = d.acquireReply("a", heldBy(1n, 1_000))
    expect(published(commands)).toContain("Publish TokenRegressed a seen=9 token=1")
  })

  it("a renewal listing our lease with a lower token: reported, the term revoked TAKEN_OVER, the low lease given back", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const commands = d.renewListing([["a", 2n]])
    expect(published(commands)).toContain("Publish TokenRegressed a seen=7 token=2")
    expect(shows(commands)).toContain("Revoked a#7 TAKEN_OVER")
    expect(shows(commands)).toContain("Call Release a#2@s1")
    // The retry finds the name quiet: no acquire, the retry waits for the quiet period to end.
    expect(callsOf(d.fire("retry:1"), "Acquire")).toEqual([])
    expect(d.timer("retry:1").at).toBe(5_010 + quiet)
  })

  it("a renewal no longer listing a lease of the live session: reported with no token, no quiet period", () => {
    const d = liveDriver()
    d.lead(1, "a", 7n)
    const commands = d.renewListing([])
    expect(regressions(commands)).toEqual([expect.objectContaining({ name: "a", seen: 7n, token: undefined })])
    expect(d.timer("retry:1").at).toBeLessThan(5_010 + quiet)
  })
})

describe("Engine rule 7: what is not a regression", () => {
  it("rising tokens, repeated HeldBy of one holder, and the renewal listing our own term", () => {
    const d = liveDriver()
    d.start(1, "a")
    d.acquireReply("a", heldBy(3n, 100), 10)
    d.fire("retry:1")
    d.acquireReply("a", heldBy(3n, 100))
    d.fire("retry:1")
    d.acquireReply("a", granted(4n))
    d.fire("renew")
    d.reply("KeepAlive", live(15_000, [["a", 4n]]))
    expect(regressions(d.commands)).toEqual([])
    expect(d.byName("a")?.term?.token).toBe(4n)
  })

  it("a reply to a request sent before a higher token was recorded predates it: not reported", () => {
    const d = liveDriver()
    d.start(1, "a")
    const attempt = d.call("Acquire", "a")
    // A hand-off to another session is heard before our (older) acquire's answer.
    d.send({ _tag: "Hint", hint: { _tag: "Granted", name: "a", to: "s9", token: 9n } }, 10)
    const commands = d.send(replyEvent(attempt, heldBy(8n, 1_000)), 20)
    expect(regressions(commands)).toEqual([])
  })

  it("a late grant to an abandoned attempt is not reported (it may predate what was seen since)", () => {
    const d = liveDriver()
    const { current, old } = d.restartDuringAcquire("a")
    d.send(replyEvent(current, granted(6n)), 160)
    const commands = d.send(replyEvent(old, granted(5n)), 200)
    expect(regressions(commands)).toEqual([])
  })

  it("a pushed grant at or below a token seen is never adopted (a late hint), and not reported", () => {
    const d = liveDriver()
    d.lead(1, "a", 5n)
    d.send(stop(1, 11), 100)
    d.start(2, "a")
    d.acquireReply("a", heldBy(1n, 1_000), 200) // the store restarted: reported once
    const commands = d.send({ _tag: "Hint", hint: { _tag: "Granted", name: "a", to: "s1", token: 5n } }, 300)
    expect(only(commands, "Elected")).toEqual([])
    expect(shows(commands)).toContain("Call Release a#5@s1")
    expect(regressions(commands)).toEqual([])
  })
})

describe("Engine rule 7: the memory stays bounded", () => {
  it("names without an election are kept up to idleNamesKept, least recently used dropped first; names in use never", () => {
    const d = liveDriver()
    d.lead(1, "kept", 1n)
    const names = Engine.idleNamesKept + 5
    for (let i = 0; i < names; i++) {
      const handle = 10 + i
      d.lead(handle, `n${i}`, 2n, { kind: "lock" })
      d.send(stop(handle, 100_000 + i))
    }
    expect(d.state.idleNames.size).toBe(Engine.idleNamesKept)
    expect(d.state.tokens.size).toBe(Engine.idleNamesKept + 1)
    expect(d.state.tokens.has("kept")).toBe(true)
    expect(d.state.tokens.has("n0")).toBe(false)
    // A name's (empty) index entry lives as long as its memory, no longer.
    expect(d.state.electionsByName.size).toBe(Engine.idleNamesKept + 1)
    expect(d.state.electionsByName.get(`n${names - 1}`)).toEqual([])
    expect(d.state.electionsByName.has("n0")).toBe(false)
    expect(d.state.tokens.get(`n${names - 1}`)?.token).toBe(2n)
    // A remembered idle name is still checked when used again.
    d.start(5, `n${names - 1}`, { kind: "lock" })
    expect(published(d.acquireReply(`n${names - 1}`, granted(1n)))).toContain(
      `Publish TokenRegressed n${names - 1} seen=2 token=1`
    )
    expect(d.state.idleNames.has(`n${names - 1}`)).toBe(false)
  })
})

/**
 * Engine unit tests: failed work (issue 8 item 1). The shell reports a failed or dead work as
 * `WorkExited { stepDown }`: the term is given up (the work has already exited, so the lease is
 * released at once) and the election stays out of the race for the backoff.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { granted, joined, joinGroup, liveDriver, memberList, only, ops, shows, stop } from "./harness.js"

const failedWork = (handle: number, termId: number, stepDown: number): Engine.Event => ({
  _tag: "WorkExited",
  handle,
  termId,
  stepDown
})

describe("Engine: failed work steps down", () => {
  it("revokes STEPPED_DOWN, releases with the token, COOLDOWN until now + backoff, then competes again", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    const commands = d.send(failedWork(1, elected.termId, 2_000), 1_000)
    expect(shows(commands)).toEqual([
      "Revoked a#7 STEPPED_DOWN",
      "Publish Revoked a#7 STEPPED_DOWN",
      "Call Release a#7@s1",
      "Publish StatusChanged a COOLDOWN",
      "Arm cooldown:1 @3000"
    ])
    expect(shows(d.fire("cooldown:1"))).toEqual(["Publish StatusChanged a CANDIDATE", "Call Acquire a@s1"])
    expect(d.now).toBe(3_000)
    expect(shows(d.acquireReply("a", granted(8n), 3_010))).toContain("Elected a#8")
  })

  it("a failure report for an older term of the election changes nothing", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    expect(d.send(failedWork(1, elected.termId + 1000, 2_000), 1_000)).toEqual([])
    expect(d.election(1)?.status).toBe("LEADER")
  })

  it("during a handover (stop) the failure only ends the handover, as a plain exit does", () => {
    const d = liveDriver()
    const elected = d.lead(1, "a", 7n, { hasWork: true })
    d.send(stop(1, 50), 1_000)
    const commands = d.send(failedWork(1, elected.termId, 2_000), 1_100)
    expect(ops(commands)).toEqual(["Disarm handover:1", "Call Release a#7@s1", "Complete 50 Ok"])
    expect(d.election(1)).toBeUndefined()
  })

  it("a partition whose work failed is given up and competed for again after the backoff", () => {
    const d = liveDriver()
    d.send(joinGroup(1, "g", 2, 70), 10)
    d.reply("Join", joined, 20)
    d.reply("Members", memberList("s1"), 30)
    const elected = only(d.acquireReply("g.0", granted(5n), 40), "Elected")[0]!
    d.acquireReply("g.1", granted(6n), 40)
    const commands = d.send(failedWork(elected.handle, elected.termId, 1_000), 100)
    expect(shows(commands)).toEqual([
      "Revoked g.0#5 STEPPED_DOWN",
      "Publish Revoked g.0#5 STEPPED_DOWN",
      "Call Release g.0#5@s1",
      "Publish StatusChanged g.0 COOLDOWN",
      `Arm cooldown:${elected.handle} @1100`
    ])
    expect(d.byName("g.1")?.status).toBe("LEADER")
    expect(ops(d.fire(`cooldown:${elected.handle}`))).toContain("Call Acquire g.0@s1")
  })
})

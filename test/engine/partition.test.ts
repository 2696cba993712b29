/**
 * Engine unit tests: partition groups (SPEC sections 4 and 9): Join → Join call → Members → one
 * partition election per owned partition; a view change hands over the partitions no longer owned.
 */
import { describe, expect, it } from "vitest"
import * as PartitionAssignment from "../../src/PartitionAssignment.js"
import {
  callsOf,
  type Driver,
  expired,
  failed,
  granted,
  groupChanged,
  joined,
  joinGroup,
  leaveGroup,
  live,
  liveDriver,
  memberList,
  only,
  opened,
  ops,
  published,
  shows,
  workExited
} from "./harness.js"

const G = "g"
const N = 6
const owned = (members: ReadonlyArray<string>, me = "s1") => PartitionAssignment.owned(N, members, me)

// The fixture relies on s3 taking some, not all, of s1's partitions when it joins [s1, s2].
const two = owned(["s1", "s2"])
const three = owned(["s1", "s2", "s3"])
const lost = two.filter((p) => !three.includes(p))
const kept = two.filter((p) => three.includes(p))

/** A live session `s1` in group `g` of 6 partitions, view [s1, s2], leading every partition it owns. */
const inGroup = (): { d: Driver; termOf: Map<number, number> } => {
  const d = liveDriver()
  d.send(joinGroup(1, G, N, 70), 10)
  d.reply("Join", joined, 20)
  d.reply("Members", memberList("s2", "s1"), 30)
  const termOf = new Map<number, number>()
  for (const p of two) {
    const commands = d.acquireReply(`${G}.${p}`, granted(BigInt(100 + p)), 40)
    termOf.set(p, only(commands, "Elected")[0]!.termId)
  }
  return { d, termOf }
}

describe("Engine: partition groups", () => {
  it("the fixture splits the partitions (precondition)", () => {
    expect(two.length).toBeGreaterThan(0)
    expect(two.length).toBeLessThan(N)
    expect(lost.length).toBeGreaterThan(0)
    expect(kept.length).toBeGreaterThan(0)
    expect(three.every((p) => two.includes(p))).toBe(true) // a joiner only takes partitions away
  })

  it("Join completes, then sends one Join call for the live session", () => {
    const d = liveDriver()
    const commands = d.send(joinGroup(1, G, N, 70), 10)
    expect(shows(commands)).toEqual(["Complete 70 Ok", "Call Join g@s1"])
  })

  it("Join before the session is open joins once it opens", () => {
    const d = liveDriver()
    d.fire("renew")
    d.reply("KeepAlive", expired, 5_000) // a new session is opening
    expect(ops(d.send(joinGroup(1, G, N, 70), 5_010))).toEqual(["Complete 70 Ok"])
    expect(ops(d.reply("OpenSession", opened("s2"), 5_020))).toContain("Call Join g@s2")
  })

  it("Joined → Members call → the view: GroupView, PartitionsAssigned, Members, one election per owned partition", () => {
    const d = liveDriver()
    d.send(joinGroup(1, G, N, 70), 10)
    expect(shows(d.reply("Join", joined, 20))).toEqual(["Call Members g"])
    const commands = d.reply("Members", memberList("s2", "s1"), 30)
    expect(shows(commands)).toEqual([
      "Publish GroupView g [s1,s2]",
      `Publish PartitionsAssigned g [${two.join(",")}]`,
      `Members g [s1,s2] owned [${two.join(",")}]`,
      ...two.flatMap((p) => [`Publish StatusChanged g.${p} CANDIDATE`, `Call Acquire g.${p}@s1`])
    ])
    expect(only(commands, "Members")[0]).toMatchObject({ handle: 1, group: G })
  })

  it("a granted partition is elected as kind partition with its group and number", () => {
    const d = liveDriver()
    d.send(joinGroup(1, G, N, 70), 10)
    d.reply("Join", joined, 20)
    d.reply("Members", memberList("s1", "s2"), 30)
    const p = two[0]!
    const commands = d.acquireReply(`${G}.${p}`, granted(9n), 40)
    expect(only(commands, "Elected")).toMatchObject([
      { name: `${G}.${p}`, token: 9n, kind: "partition", group: G, partition: p, sessionId: "s1" }
    ])
    expect(only(commands, "Elected")[0]!.handle).toBeLessThan(0) // engine-made handles are negative
  })

  it("a view change hands over (revoke, HANDOVER) only the partitions no longer owned", () => {
    const { d } = inGroup()
    d.send(groupChanged(G), 100)
    const commands = d.reply("Members", memberList("s1", "s2", "s3"), 110)
    const revoked = only(commands, "Revoked")
    expect(revoked.map((r) => r.name).sort()).toEqual(lost.map((p) => `${G}.${p}`).sort())
    expect(revoked.every((r) => r.reason === "STOPPED")).toBe(true)
    expect(published(commands)).toEqual(expect.arrayContaining([
      "Publish GroupView g [s1,s2,s3]",
      `Publish PartitionsAssigned g [${three.join(",")}]`,
      ...lost.map((p) => `Publish StatusChanged g.${p} HANDOVER`)
    ]))
    expect(callsOf(commands)).toEqual([]) // no release before the work exits
    for (const p of kept) expect(d.byName(`${G}.${p}`)?.status).toBe("LEADER")
    for (const p of lost) expect(d.byName(`${G}.${p}`)?.status).toBe("HANDOVER")
  })

  it("a lost partition is released after its work exits, then stopped", () => {
    const { d, termOf } = inGroup()
    d.send(groupChanged(G), 100)
    d.reply("Members", memberList("s1", "s2", "s3"), 110)
    const p = lost[0]!
    const handle = d.byName(`${G}.${p}`)!.handle
    const commands = d.send(workExited(handle, termOf.get(p)!), 120)
    expect(shows(commands)).toEqual([
      `Disarm handover:${handle}`,
      `Call Release g.${p}#${100 + p}@s1`,
      `Publish StatusChanged g.${p} STOPPED`
    ])
    expect(d.byName(`${G}.${p}`)).toBeUndefined()
  })

  it("a view that changes nothing produces nothing", () => {
    const { d } = inGroup()
    d.send(groupChanged(G), 100)
    expect(d.reply("Members", memberList("s2", "s1"), 110)).toEqual([])
  })

  it("the view also comes with each renewal reply", () => {
    const { d } = inGroup()
    d.fire("renew")
    const leases = two.map((p) => [`${G}.${p}`, BigInt(100 + p)] as const)
    const commands = d.reply("KeepAlive", live(15_000, leases, [[G, ["s1", "s2", "s3"]]]), 5_010)
    expect(only(commands, "Revoked").map((r) => r.name).sort()).toEqual(lost.map((p) => `${G}.${p}`).sort())
  })

  it("a member leaving gives us the partitions we now win, as new candidates", () => {
    const d = liveDriver()
    d.send(joinGroup(1, G, N, 70), 10)
    d.reply("Join", joined, 20)
    d.reply("Members", memberList("s1", "s2", "s3"), 30)
    d.send(groupChanged(G), 40)
    const commands = d.reply("Members", memberList("s1", "s2"), 50)
    expect(callsOf(commands, "Acquire").map((c) => c.request)).toEqual(
      lost.map((p) => ({ _tag: "Acquire", sessionId: "s1", name: `${G}.${p}` }))
    )
  })

  it("one GroupChanged hint, one Members call in flight at a time", () => {
    const { d } = inGroup()
    d.send(groupChanged(G), 100)
    expect(d.send(groupChanged(G), 101)).toEqual([])
    expect(d.calls("Members")).toHaveLength(1)
    expect(d.send(groupChanged("other"), 102)).toEqual([])
  })

  it("a partition regained during its handover is led again once the handover ends", () => {
    const { d, termOf } = inGroup()
    d.send(groupChanged(G), 100)
    d.reply("Members", memberList("s1", "s2", "s3"), 110) // s3 arrives: lost partitions in HANDOVER
    d.send(groupChanged(G), 120)
    d.reply("Members", memberList("s1", "s2"), 130) // s3 leaves again before the work exited
    const p = lost[0]!
    const handle = d.byName(`${G}.${p}`)!.handle
    d.send(workExited(handle, termOf.get(p)!), 140)
    // Let any timer the engine armed for this election (and due before the deadline) run.
    for (const [key, arm] of Array.from(d.armed)) {
      if (key.endsWith(`:${handle}`) && arm.at < d.session.deadline) d.fire(key)
    }
    expect(d.calls("Acquire", `${G}.${p}`)).toHaveLength(1)
    expect(d.byName(`${G}.${p}`)?.status).toBe("CANDIDATE")
  })

  it("Leave stops every partition (with handover), then sends Leave and completes", () => {
    const { d, termOf } = inGroup()
    const commands = d.send(leaveGroup(1, 71), 100)
    expect(only(commands, "Revoked")).toHaveLength(two.length)
    expect(only(commands, "Complete")).toEqual([])
    let last: ReadonlyArray<unknown> = []
    for (const p of two) {
      const handle = d.byName(`${G}.${p}`)!.handle
      last = shows(d.send(workExited(handle, termOf.get(p)!), 110))
    }
    expect(last.slice(-4)).toEqual([
      "Call Leave g@s1",
      "Publish PartitionsAssigned g []",
      "Members g [] owned []",
      "Complete 71 Ok"
    ])
    expect(d.state.groups.size).toBe(0)
  })

  it("joining a group twice fails with AlreadyStarted", () => {
    const d = liveDriver()
    d.send(joinGroup(1, G, N, 70), 10)
    expect(shows(d.send(joinGroup(2, G, N, 72), 11))).toEqual(["Complete 72 AlreadyStarted"])
  })

  it("a failed Join is retried after renewInterval/2 + jitter", () => {
    const d = liveDriver()
    d.send(joinGroup(1, G, N, 70), 10)
    const commands = d.reply("Join", failed(), 20)
    expect(published(commands)).toEqual(["Publish BackendFailed join"])
    const at = d.timer("join:1").at
    expect(at).toBeGreaterThanOrEqual(20 + 2_500)
    expect(at).toBeLessThan(20 + 5_000)
    expect(ops(d.fire("join:1"))).toEqual(["Call Join g@s1"])
  })

  it("a Join answered Expired ends the session; the new session joins again and recomputes the view", () => {
    const d = liveDriver()
    d.send(joinGroup(1, G, N, 70), 10)
    const commands = d.reply("Join", expired, 20)
    expect(published(commands)).toContain("Publish SessionEnded s1 SESSION_EXPIRED")
    d.reply("OpenSession", opened("s9"), 30)
    d.reply("Join", joined, 40)
    const view = d.reply("Members", memberList("s9", "s2"), 50)
    expect(only(view, "Members")[0]).toMatchObject({ members: ["s2", "s9"], owned: owned(["s2", "s9"], "s9") })
  })

  it("a renewal reply that no longer lists the group makes us join it again", () => {
    const { d } = inGroup()
    d.fire("renew")
    const leases = two.map((p) => [`${G}.${p}`, BigInt(100 + p)] as const)
    const commands = d.reply("KeepAlive", live(15_000, leases, []), 5_010)
    expect(ops(commands)).toContain("Call Join g@s1")
  })
})

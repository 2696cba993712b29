/**
 * Three Node processes (examples/zookeeper-leader.ts on SimbaZookeeperLive) elect one leader on the
 * standalone ZooKeeper, each in its own process group (signalled as a group, only these pids):
 *
 * - `kill -9` of the leader: its session expires on the server (at most T + tickTime after its last
 *   ping, T the negotiated session timeout), the watch fires, one new leader, with a larger token;
 * - SIGSTOP of the new leader past the session timeout: the server expires it and the third process
 *   leads; on SIGCONT the paused process finds its term ended (its local deadline passed long ago)
 *   and competes again on a new session;
 * - SIGTERM of the leader: the lease node is deleted and the waiting process leads within a round
 *   trip or two (the watch), long before any expiry;
 * - the fenced register (a ZooKeeper node updated by compare-and-set) never accepts a token below one
 *   it accepted before, and each token is one process's.
 *
 * The woken process can be aborted by the `zookeeper` addon itself (a libuv assertion in its poll
 * handling after a connection timed out; README, ZooKeeper, "Known addon defect"): seen once in a CI
 * run of this test, in none of 16 local runs of it (10 beside two CPU burners) nor in 24 rounds of a
 * script pausing a leader the same way. Then the test does what a supervisor would: it checks
 * that the process died of that assertion (anything else fails the test), starts a replacement, and
 * expects the replacement to take over at the graceful stop instead. It says so on stderr.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import ZooKeeper from "zookeeper"
import { processes, sleep } from "../support/processes.js"

/** leaseDuration = the session timeout asked for; the server grants it as asked (within [1 s, 60 s]). */
const leaseDuration = 2400
const tickTime = 500
/**
 * A crashed or paused holder's node goes at most T + tickTime after its last ping (the server expires
 * sessions in tickTime buckets); the watch then takes a round trip. Slack for a loaded 2-core machine
 * (event-loop stalls of the surviving processes, stdout piping): 1 s.
 */
const expiryBound = leaseDuration + tickTime + 1000

const suffix = randomBytes(6).toString("hex")
const name = `mp-${suffix}`
const fence = `/simba-test-fence/mp-${suffix}`
const children = processes()
const { lines } = children

const start = () =>
  children.spawnScript("examples/zookeeper-leader.ts", {
    stderr: "collect",
    env: {
      LEADER_NAME: name,
      FENCE_NODE: fence,
      WRITE_EVERY_MS: "20",
      SIMBA_LEASE_DURATION: `${leaseDuration}ms`,
      SIMBA_ZK_CONNECT: "127.0.0.1:2181",
      SIMBA_ZK_ROOT: "/simba-test"
    }
  })

const signal = (pid: number, sig: NodeJS.Signals) => children.signal(pid, sig)

/** Waits, printing the lines other than writes when it runs out (they tell the story). */
const waitFor = (what: string, predicate: () => boolean, timeoutMs: number) =>
  children.waitFor(what, predicate, timeoutMs).catch((error: Error) => {
    const events = lines.filter((l) => l.words[0] !== "WRITE").map((l) => `${Math.round(l.at)} ${l.pid} ${l.text}`)
    throw new Error(`${error.message.split(";")[0]}; lines other than writes:\n${events.join("\n")}`)
  })

const elected = () => lines.filter((l) => l.words[0] === "ELECTED")

/** The process `pid` was aborted by the addon's libuv assertion (see the module comment). */
const abortedByAddon = (pid: number): boolean => {
  const child = children.byPid(pid)
  return child.signalCode === "SIGABRT" && /deps\/uv\/src\/unix\/[a-z]+\.c:\d+: uv_\w+: Assertion/.test(children.stderrOf(pid))
}

afterAll(async () => {
  await children.stopAll()
  const zk = new ZooKeeper({ connect: "127.0.0.1:2181", timeout: 5000 })
  await new Promise<void>((resolve) => {
    zk.once("connect", () => resolve())
    zk.init({})
  })
  await zk.delete_(fence, -1).catch(() => undefined)
  zk.close()
})

describe("three processes on ZooKeeper", () => {
  it("kill -9, SIGSTOP past the session timeout, SIGTERM: one leader at a time, the fenced register never goes back", async () => {
    for (let i = 0; i < 3; i++) start()
    await waitFor("three processes ready", () => lines.filter((l) => l.words[0] === "READY").length === 3, 60_000)
    await waitFor("a leader", () => elected().length >= 1, 10_000)
    await sleep(1500)
    expect(elected()).toHaveLength(1)
    const first = elected()[0]!

    // Crash: no goodbye; the server expires its session, the others' watch fires.
    const killedAt = performance.now()
    signal(first.pid, "SIGKILL")
    await waitFor("a second leader", () => elected().length >= 2, expiryBound + 5000)
    const second = elected()[1]!
    const failover = second.at - killedAt
    expect(second.pid).not.toBe(first.pid)
    expect(failover).toBeLessThanOrEqual(expiryBound)
    expect(BigInt(second.words[1]!)).toBeGreaterThan(BigInt(first.words[1]!))
    await sleep(500)
    expect(elected()).toHaveLength(2)

    // Pause past the session timeout: the server expires it; the third process leads.
    const pausedAt = performance.now()
    signal(second.pid, "SIGSTOP")
    await waitFor("a third leader", () => elected().length >= 3, expiryBound + 5000)
    const third = elected()[2]!
    const takeover = third.at - pausedAt
    expect(third.pid).not.toBe(second.pid)
    expect(third.pid).not.toBe(first.pid)
    expect(takeover).toBeLessThanOrEqual(expiryBound)
    expect(BigInt(third.words[1]!)).toBeGreaterThan(BigInt(second.words[1]!))
    await sleep(Math.max(0, leaseDuration + 1500 - (performance.now() - pausedAt)))
    const resumedAt = lines.length
    signal(second.pid, "SIGCONT")
    const woken = children.byPid(second.pid)
    const wokenExited = () => woken.exitCode !== null || woken.signalCode !== null
    const sinceResumed = () => lines.slice(resumedAt).filter((l) => l.pid === second.pid)
    // The woken process ends its term (revoked) and competes again on a new session (or the addon aborted it).
    await waitFor("the paused leader's revocation", () =>
      sinceResumed().some((l) => l.words[0] === "REVOKED") || wokenExited(), 10_000)
    await waitFor("the woken process's new session (or its exit)", () =>
      sinceResumed().some((l) => l.text.includes("SessionOpened")) || wokenExited(), 10_000)
    let standby = second.pid
    if (wokenExited()) {
      expect(abortedByAddon(second.pid), `the woken process exited (${woken.signalCode ?? woken.exitCode}) but not by the addon's assertion`).toBe(true)
      process.stderr.write(
        `zookeeper multi-process: the woken process ${second.pid} was aborted by the zookeeper addon (libuv assertion); ` +
          "starting a replacement, which must take over at the graceful stop\n"
      )
      const replacement = start()
      await waitFor("the replacement ready", () => lines.some((l) => l.words[0] === "READY" && l.pid === replacement.pid), 60_000)
      standby = replacement.pid!
    }
    await sleep(leaseDuration)
    expect(elected()).toHaveLength(3)

    // Graceful stop: the lease node is deleted, the woken process's watch fires.
    const stoppedAt = performance.now()
    signal(third.pid, "SIGTERM")
    await waitFor("a fourth leader", () => elected().length >= 4, 10_000)
    const fourth = elected()[3]!
    const handover = fourth.at - stoppedAt
    expect(fourth.pid).toBe(standby)
    expect(handover).toBeLessThan(leaseDuration / 2)
    expect(BigInt(fourth.words[1]!)).toBeGreaterThan(BigInt(third.words[1]!))
    const revokedThird = lines.find((l) => l.words[0] === "REVOKED" && l.pid === third.pid)
    expect(revokedThird).toBeDefined()
    expect(revokedThird!.at).toBeLessThanOrEqual(fourth.at)
    // The fourth leader writes too (its first write follows its election by a round trip or two; its
    // process may have moved on to a later term of its own meanwhile).
    await waitFor("an accepted write of the fourth leader", () =>
      lines.some((l) =>
        l.words[0] === "WRITE" && l.pid === fourth.pid && l.words[2] === "accepted" &&
        BigInt(l.words[1]!) >= BigInt(fourth.words[1]!)
      ), 5000)
    await children.stopAll()

    // The fenced register: accepted writes in the order ZooKeeper applied them (node versions)
    // carry tokens that never go down, and each token is one process's.
    const writes = lines.filter((l) => l.words[0] === "WRITE")
    const accepted = writes.filter((l) => l.words[2] === "accepted")
      .map((l) => ({ token: BigInt(l.words[1]!), version: Number(l.words[3]), pid: l.pid }))
      .sort((a, b) => a.version - b.version)
    expect(accepted.length).toBeGreaterThan(10)
    expect(new Set(accepted.map((w) => w.version)).size).toBe(accepted.length)
    const owner = new Map<bigint, number>()
    let previous = 0n
    for (const write of accepted) {
      expect(write.token).toBeGreaterThanOrEqual(previous)
      previous = write.token
      expect(owner.get(write.token) ?? write.pid).toBe(write.pid)
      owner.set(write.token, write.pid)
    }
    // Only elected terms wrote, and each of the first three (they ran for seconds) did.
    const electedTokens = new Set(elected().map((l) => l.words[1]!))
    for (const write of accepted) expect(electedTokens.has(String(write.token))).toBe(true)
    for (const term of [first, second, third]) expect(accepted.some((w) => String(w.token) === term.words[1])).toBe(true)
    // Only the paused process may have had a write in flight when it was stopped: the register refused it.
    expect(writes.filter((l) => l.words[2] === "rejected" && l.pid !== second.pid)).toEqual([])
    console.log(
      `zookeeper multi-process: failover after kill -9 ${failover.toFixed(0)} ms, after SIGSTOP ${takeover.toFixed(0)} ms ` +
        `(bound ${expiryBound} ms), graceful handover ${handover.toFixed(1)} ms, ${accepted.length} fenced writes`
    )
  }, 120_000)
})

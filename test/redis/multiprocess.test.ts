/**
 * Three Node processes (examples/redis-leader.ts on SimbaRedisLive) elect one leader on the real
 * Redis. `kill -9` of the leader: exactly one new leader within leaseDuration + renewInterval, never
 * two at once (checked on the fenced list they all write to). A graceful stop (SIGTERM) hands over
 * through the `released` hint, long before the lease would have run out.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { processes, sleep } from "../support/processes.js"

const leaseDuration = 2000
const renewInterval = leaseDuration / 3

const suffix = randomBytes(6).toString("hex")
const name = `mp-${suffix}`
const list = `simba-test:mp:${suffix}`
const children = processes()
const { lines, waitFor } = children

const start = () =>
  children.spawnScript("examples/redis-leader.ts", {
    env: {
      LEADER_NAME: name,
      FENCED_LIST: list,
      WRITE_EVERY_MS: "20",
      SIMBA_LEASE_DURATION: `${leaseDuration}ms`,
      SIMBA_REDIS_KEY_PREFIX: `simba-mp-${suffix}`,
      // A new prefix looks like a wiped store: the first grant waits one lock-delay (the lease duration).
      SIMBA_REDIS_LOCK_DELAY: `${leaseDuration} millis`
    }
  })

const elected = () => lines.filter((l) => l.words[0] === "ELECTED")

afterAll(async () => {
  await children.stopAll()
  const redis = new Redis("redis://127.0.0.1:6379")
  const keys = await redis.keys(`simba-mp-${suffix}*`)
  if (keys.length > 0) await redis.del(...keys)
  await redis.del(list, `${list}:top`)
  await redis.quit()
})

describe("three processes on Redis", () => {
  it("kill -9 of the leader: one new leader within leaseDuration + renewInterval; SIGTERM: prompt handover; never two leaders", async () => {
    for (let i = 0; i < 3; i++) start()
    await waitFor("three processes ready", () => lines.filter((l) => l.words[0] === "READY").length === 3, 60_000)
    await waitFor("a leader", () => elected().length >= 1, 10_000)
    // Let the leader write for a while: nobody else may be elected.
    await sleep(1500)
    expect(elected()).toHaveLength(1)
    const first = elected()[0]!

    // Crash: no goodbye, its session must expire on the server first.
    const killedAt = performance.now()
    children.signal(first.pid, "SIGKILL")
    await waitFor("a second leader", () => elected().length >= 2, 10_000)
    const second = elected()[1]!
    expect(second.pid).not.toBe(first.pid)
    const failover = second.at - killedAt
    expect(failover).toBeLessThanOrEqual(leaseDuration + renewInterval)
    expect(BigInt(second.words[1]!)).toBeGreaterThan(BigInt(first.words[1]!))
    await sleep(500)
    expect(elected()).toHaveLength(2)

    // Graceful stop: the work is interrupted, the lease released, the last process takes over at once.
    const stoppedAt = performance.now()
    children.signal(second.pid, "SIGTERM")
    await waitFor("a third leader", () => elected().length >= 3, 10_000)
    const third = elected()[2]!
    const handover = third.at - stoppedAt
    expect(third.pid).not.toBe(second.pid)
    expect(handover).toBeLessThan(leaseDuration / 2)
    const revokedSecond = lines.find((l) => l.words[0] === "REVOKED" && l.pid === second.pid)
    expect(revokedSecond).toBeDefined()
    expect(revokedSecond!.at).toBeLessThanOrEqual(third.at)
    await sleep(300)
    await children.stopAll()

    // The fenced list: tokens never go down, and each token belongs to exactly one process.
    const redis = new Redis("redis://127.0.0.1:6379")
    const entries = (await redis.lrange(list, 0, -1)).map((entry) => entry.split(":"))
    await redis.quit()
    expect(entries.length).toBeGreaterThan(10)
    const owner = new Map<string, string>()
    let previous = 0n
    for (const [token, pid] of entries) {
      expect(BigInt(token!)).toBeGreaterThanOrEqual(previous)
      previous = BigInt(token!)
      expect(owner.get(token!) ?? pid).toBe(pid)
      owner.set(token!, pid!)
    }
    expect(new Set(entries.map(([token]) => token)).size).toBe(3)
    expect(lines.filter((l) => l.words[0] === "WRITE" && l.words[2] === "rejected")).toEqual([])
    console.log(`multi-process: failover after kill -9 ${failover.toFixed(0)} ms (bound ${leaseDuration + renewInterval} ms), graceful handover ${handover.toFixed(1)} ms, ${entries.length} fenced writes`)
  }, 120_000)
})

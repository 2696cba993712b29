/**
 * Semaphores under faults, on Redis: four processes of test/chaos/permits.ts take 1 of 2 permits again
 * and again. One holder is paused (SIGSTOP) past its lease and resumed; another holder is killed
 * (kill -9). Checks, from the lines they print on the machine's shared monotonic clock:
 * - never more than 2 permits held at once: the intervals from a term's `start` to its last `v` (its
 *   last successful `ensureValid`) never overlap more than 2 deep;
 * - every token is used by one process and one term only;
 * - the permits of the paused and of the killed holder come back: after each fault, within the
 *   lease arithmetic's bound (leaseDuration + renewInterval + 1 s), two terms hold at once again.
 */
import { afterAll, describe, expect, it } from "vitest"
import { randomBytes } from "node:crypto"
import { type Line, monotonicMs, processes } from "../support/processes.js"

const leaseDuration = 2000
const renewInterval = Math.round(leaseDuration / 3)
const bound = leaseDuration + renewInterval + 1000
const limit = 2

const children = processes()
afterAll(() => children.stopAll())

interface Held {
  readonly tok: string
  readonly pid: number
  readonly start: number
  readonly last: number
}

/** Every term that printed at least one `v`: from its `start` to its last `v`. */
const heldIntervals = (lines: ReadonlyArray<Line>): Array<Held> => {
  const byToken = new Map<string, { pid: number; start?: number; last?: number; pids: Set<number> }>()
  for (const line of lines) {
    const ev = line.json?.ev
    if (ev !== "start" && ev !== "v") continue
    const tok = String(line.json?.tok)
    const entry = byToken.get(tok) ?? { pid: line.pid, pids: new Set<number>() }
    entry.pids.add(line.pid)
    if (ev === "start") entry.start = Number(line.json?.mono)
    else entry.last = Number(line.json?.mono)
    byToken.set(tok, entry)
  }
  for (const [tok, entry] of byToken) expect(entry.pids.size, `token ${tok} used by processes ${[...entry.pids].join(", ")}`).toBe(1)
  return [...byToken].flatMap(([tok, e]) => e.start !== undefined && e.last !== undefined ? [{ tok, pid: e.pid, start: e.start, last: e.last }] : [])
}

/** The most intervals overlapping at one instant (within [from, to]), and when. */
const deepest = (held: ReadonlyArray<Held>, from = -Infinity, to = Infinity) => {
  const edges = held.flatMap((h) => [{ at: h.start, d: 1 }, { at: h.last, d: -1 }])
    .filter((e) => e.at >= from && e.at <= to)
    .sort((a, b) => a.at - b.at || b.d - a.d)
  // Intervals already open at `from`.
  let depth = held.filter((h) => h.start < from && h.last >= from).length
  let most = depth
  for (const e of edges) {
    depth += e.d
    most = Math.max(most, depth)
  }
  return most
}

describe("chaos, semaphore on Redis", () => {
  it("SIGSTOP of a holder, kill -9 of a holder: never more than limit permits held, the permits come back", async () => {
    const suffix = randomBytes(5).toString("hex")
    const env = {
      CHAOS_NAME: `chaos-permits-${suffix}`,
      CHAOS_LIMIT: String(limit),
      SIMBA_LEASE_DURATION: `${leaseDuration}ms`,
      SIMBA_REDIS_URL: "redis://127.0.0.1:6379",
      SIMBA_REDIS_KEY_PREFIX: `simba-chaos-permits-${suffix}`,
      // A new prefix has no boot marker: the lock-delay needs to outlast only these processes'
      // leases (not the default 15 s, which would eat half of the wait below).
      SIMBA_REDIS_LOCK_DELAY: `${leaseDuration} millis`
    }
    const pids = Array.from({ length: 4 }, () => children.spawnScript("test/chaos/permits.ts", { env }).pid!)
    const { lines } = children
    const mine = () => lines.filter((l) => pids.includes(l.pid))
    const valid = () => mine().filter((l) => l.json?.ev === "v")
    // Four processes compile and start (seconds on a loaded 2-core machine), then the lock-delay.
    await children.waitFor("40 valid checks", () => valid().length >= 40, 45_000)
    expect(mine().filter((l) => l.json?.ev === "fatal")).toEqual([])

    /** A process whose latest term started and has not ended: a holder now. */
    const holderNow = (except: ReadonlyArray<number>) => {
      for (const pid of pids.filter((p) => !except.includes(p))) {
        const own = mine().filter((l) => l.pid === pid && (l.json?.ev === "start" || l.json?.ev === "end"))
        if (own.at(-1)?.json?.ev === "start") return pid
      }
      return undefined
    }
    const awaitHolder = async (except: ReadonlyArray<number>) => {
      let pid: number | undefined
      await children.waitFor("a holder", () => (pid = holderNow(except)) !== undefined, 10_000)
      return pid!
    }

    // Fault 1: a holder paused past its lease, then resumed.
    const paused = await awaitHolder([])
    const pausedAt = monotonicMs()
    children.signal(paused, "SIGSTOP")
    await new Promise((resolve) => setTimeout(resolve, leaseDuration + 1500))
    children.signal(paused, "SIGCONT")
    // The window that shows the paused holder's permit back ends before the next fault.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, pausedAt + bound + 1500 - monotonicMs())))
    // Fault 2: a holder killed.
    const killed = await awaitHolder([paused])
    const killedAt = monotonicMs()
    children.signal(killed, "SIGKILL")
    await new Promise((resolve) => setTimeout(resolve, bound + 1500))
    const endAt = monotonicMs()
    await children.stopAll()

    expect(mine().filter((l) => l.json?.ev === "fatal")).toEqual([])
    const held = heldIntervals(mine())
    expect(held.length).toBeGreaterThan(20)
    // Safety: never more than `limit` at once, over the whole run.
    expect(deepest(held)).toBeLessThanOrEqual(limit)
    // Liveness: `limit` held at once again within the bound after each fault (the paused holder's
    // permit once its session expired, the killed one's likewise).
    expect(deepest(held, pausedAt + bound, pausedAt + bound + 1500), "after the pause").toBe(limit)
    expect(deepest(held, killedAt + bound, endAt), "after the kill").toBe(limit)
    // The paused process, resumed, saw its term end: no `v` of a term that started before the pause after it.
    const stale = held.filter((h) => h.pid === paused && h.start < pausedAt && h.last > pausedAt + leaseDuration)
    expect(stale).toEqual([])
  }, 120_000)
})

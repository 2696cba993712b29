/**
 * `simba` on Redis with real processes (see `harness.ts`): lock and elect as on every backend, and
 * the try that exits 75, `status --json`, a wiped store under a running command, `watch`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Redis } from "ioredis"
import { spawn } from "node:child_process"
import { root, sleep } from "../support/processes.js"
import { find, holdCommand, linesOf, lockAndElectCases, procs, redis, say, simba, startup, statusOf, uniqueName } from "./harness.js"

describe("simba lock and elect on redis", () => lockAndElectCases(redis))

describe("simba on redis", () => {
  it("a try on a held lock exits 75 at once, and the holder is listed by status --json", { timeout: 60_000 }, async () => {
    const name = uniqueName("try")
    const holder = simba(redis, ["lock", name, "--", ...holdCommand("a")])
    await procs.waitFor("the command runs", () => find(holder, "HOLD") !== undefined, startup + 10_000)
    const token = find(holder, "HOLD")!.words[3]!
    const attempt = simba(redis, ["lock", "--timeout", "0", name, "--", "sh", "-c", say("RAN")])
    expect(await statusOf(attempt)).toBe(75)
    expect(find(attempt, "RAN")).toBeUndefined()
    expect(procs.stderrOf(attempt.pid!)).toMatch(/not acquired/)
    // The try was not queued behind the holder: it ended while the holder still holds.
    expect(holder.exitCode).toBeNull()

    const status = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "status", "--json"], {
      cwd: root,
      env: { ...process.env, ...redis.env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    status.stdout.on("data", (chunk: Buffer) => void (out += chunk.toString()))
    expect(await statusOf(status)).toBe(0)
    const listed = JSON.parse(out) as { backend: string; leases: Array<{ name: string; holder: string | null; token: string }> }
    expect(listed.backend).toBe("redis")
    const lease = listed.leases.find((l) => l.name === name)
    expect(lease?.token).toBe(token)
    expect(lease?.holder).toMatch(/^[0-9a-f]{32}$/)
    procs.signal(holder, "SIGTERM")
    expect(await statusOf(holder)).toBe(0)
  })

  it("the store wiped under a running command: SIGTERM to it and exit 76", { timeout: 60_000 }, async () => {
    const name = uniqueName("wiped")
    const holder = simba(redis, ["lock", name, "--", ...holdCommand("a")])
    await procs.waitFor("the command runs", () => find(holder, "HOLD") !== undefined, startup + 10_000)
    const client = new Redis("redis://127.0.0.1:6379", { lazyConnect: true })
    await client.connect()
    try {
      // Everything under this file's key prefix, as a FLUSHALL would lose it (other files' keys stay).
      const keys = await client.keys(`${redis.env.SIMBA_REDIS_KEY_PREFIX}*`)
      expect(keys.length).toBeGreaterThan(0)
      await client.del(...keys)
    } finally {
      client.disconnect()
    }
    expect(await statusOf(holder)).toBe(76)
    expect(find(holder, "TERM")).toBeDefined()
  })

  it("watch prints the lease being held and freed", { timeout: 60_000 }, async () => {
    const name = uniqueName("watch")
    const watcher = simba(redis, ["watch", "--every", "200ms", "--json", name])
    await sleep(startup / 2)
    const run = simba(redis, ["lock", name, "--", "sh", "-c", `${say("RAN $SIMBA_TOKEN")}; sleep 1`])
    expect(await statusOf(run)).toBe(0)
    const token = find(run, "RAN")!.words[1]
    await procs.waitFor("watch saw it freed", () => linesOf(watcher).some((l) => l.json?.event === "LeaseFreed"), startup)
    const events = linesOf(watcher).map((l) => l.json).filter((j) => j !== undefined)
    expect(events.find((e) => e.event === "LeaseHeld")).toMatchObject({ name, token })
    expect(events.find((e) => e.event === "LeaseFreed")).toMatchObject({ name, token })
    procs.signal(watcher, "SIGINT")
    expect(await statusOf(watcher)).toBe(0)
  })
})


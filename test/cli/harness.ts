/**
 * The `simba` command with real processes on real servers, shared by the files of `test/cli/`:
 * `node --import tsx src/cli/main.ts` spawned in its own process group, its commands in theirs.
 * Every case uses its own lease name, and each backend its own key prefix, tables or root, so files
 * running in parallel share nothing. `lockAndElectCases` is what every backend passes.
 *
 * Timing: leases of 2 s (ZooKeeper 2.4 s) with a 400 ms margin. Bounds on hand-over come from that
 * arithmetic (lease + renew interval) plus room for starting processes on a loaded machine.
 */
import { afterAll, expect, it } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { processes, signalGroup, sleep } from "../support/processes.js"
import { mysqlUrl, pgUrl } from "../sql/SqlServers.js"

const suffix = randomBytes(4).toString("hex")

export interface Backend {
  readonly name: string
  readonly env: Record<string, string>
  /** Lease duration + renew interval, in ms: the bound on a hand-over after a crash. */
  readonly handOver: number
}

const common = { SIMBA_MARGIN: "400ms", SIMBA_LOG_LEVEL: "Warning" }

export const redis: Backend = {
  name: "redis",
  env: { ...common, SIMBA_BACKEND: "redis", SIMBA_REDIS_KEY_PREFIX: `cli-${suffix}`, SIMBA_REDIS_LOCK_DELAY: "0", SIMBA_LEASE_DURATION: "2s" },
  handOver: 2_000 + 667
}

export const backends: ReadonlyArray<Backend> = [
  redis,
  {
    name: "postgres",
    env: { ...common, SIMBA_BACKEND: "postgres", SIMBA_PG_URL: pgUrl, SIMBA_PG_TABLE_PREFIX: `cli_${suffix}_`, SIMBA_LEASE_DURATION: "2s" },
    handOver: 2_000 + 667
  },
  {
    name: "mysql",
    env: { ...common, SIMBA_BACKEND: "mysql", SIMBA_MYSQL_URL: mysqlUrl, SIMBA_MYSQL_TABLE_PREFIX: `cli_${suffix}_`, SIMBA_LEASE_DURATION: "2s" },
    handOver: 2_000 + 667
  },
  {
    name: "zookeeper",
    env: { ...common, SIMBA_BACKEND: "zookeeper", SIMBA_ZK_ROOT: `/simba-cli-${suffix}`, SIMBA_LEASE_DURATION: "2400ms", SIMBA_MARGIN: "200ms" },
    handOver: 2_400 + 800
  }
]

/** Room for spawning `node` processes and their commands on a loaded 2-core machine. */
export const startup = 4_000

export const procs = processes()
afterAll(() => procs.stopAll())

/** Commands the children run: a line to stdout (the `simba` process's, which the test reads). */
export const say = (text: string) => `echo "${text}"`
/** A command that reports itself (its pid is its process group) and runs until signalled. */
export const holdCommand = (label: string, onTerm: "exit" | "ignore" = "exit") =>
  [
    "sh",
    "-c",
    `trap '${onTerm === "exit" ? `echo TERM ${label} $$; exit 0` : `echo TERM-IGNORED ${label} $$`}' TERM; ` +
    `echo HOLD ${label} $SIMBA_LEASE $SIMBA_TOKEN $$; while true; do sleep 0.1; done`
  ]

export const simba = (backend: Backend, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  procs.spawnScript("src/cli/main.ts", { args, env: { ...backend.env, ...env }, stderr: "collect" })

export const statusOf = (child: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode)
    child.once("exit", (code) => resolve(code))
  })

export const linesOf = (child: ChildProcess) => procs.lines.filter((line) => line.pid === child.pid)
export const find = (child: ChildProcess, word: string) => linesOf(child).find((line) => line.words[0] === word)

/** Kills a command left behind by a `simba` killed with SIGKILL (its group is its pid). */
export const killGroup = (pid: number) => {
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // already gone
  }
}

export const uniqueName = (label: string) => `cli.${randomBytes(6).toString("hex")}.${label}`

/** The `lock` and `elect` cases, on `backend`. */
export const lockAndElectCases = (backend: Backend): void => {
  it("two simba lock processes never run their commands at once, and each sees a rising token", { timeout: 60_000 }, async () => {
    const name = uniqueName("exclusive")
    const body = `${say("START $SIMBA_TOKEN")}; sleep 0.4; ${say("END $SIMBA_TOKEN")}`
    const runs = [0, 1, 2].map(() => simba(backend, ["lock", name, "--", "sh", "-c", body]))
    expect(await Promise.all(runs.map(statusOf))).toEqual([0, 0, 0])
    const events = procs.lines
      .filter((line) => runs.some((run) => run.pid === line.pid) && (line.words[0] === "START" || line.words[0] === "END"))
      .map((line) => ({ kind: line.words[0], token: BigInt(line.words[1]!), at: line.mono }))
    expect(events.length).toBe(6)
    // Strictly alternating START/END, one holder at a time, tokens rising in the order of the holds.
    for (let i = 0; i < events.length; i += 2) {
      expect(events[i]!.kind).toBe("START")
      expect(events[i + 1]).toMatchObject({ kind: "END", token: events[i]!.token })
      if (i > 0) expect(events[i]!.token).toBeGreaterThan(events[i - 1]!.token)
    }
  })

  it("a lost term stops the command (SIGTERM) and exits 76; SIGKILL after --grace for one that ignores it", { timeout: 60_000 }, async () => {
    for (const onTerm of ["exit", "ignore"] as const) {
      const name = uniqueName(`lost-${onTerm}`)
      const holder = simba(backend, ["lock", "--grace", "1s", name, "--", ...holdCommand("a", onTerm)])
      await procs.waitFor("the command runs", () => find(holder, "HOLD") !== undefined, startup + 10_000)
      const commandPid = Number(find(holder, "HOLD")!.words[4])
      // Frozen past its lease: the store expires the session; on waking, the client's deadline has passed.
      procs.signal(holder, "SIGSTOP")
      await sleep(backend.handOver + 1_000)
      procs.signal(holder, "SIGCONT")
      expect(await statusOf(holder)).toBe(76)
      expect(find(holder, onTerm === "exit" ? "TERM" : "TERM-IGNORED")).toBeDefined()
      expect(procs.stderrOf(holder.pid!)).toMatch(/lost/)
      // The command is gone (killed after the grace when it ignored SIGTERM).
      expect(() => process.kill(commandPid, 0)).toThrow()
    }
  })

  it("SIGTERM to simba reaches the command; simba exits with its status and the lease is free right after", { timeout: 60_000 }, async () => {
    const name = uniqueName("forward")
    const holder = simba(backend, ["lock", name, "--", ...holdCommand("a")])
    await procs.waitFor("the command runs", () => find(holder, "HOLD") !== undefined, startup + 10_000)
    procs.signal(holder, "SIGTERM")
    expect(await statusOf(holder)).toBe(0)
    expect(find(holder, "TERM")).toBeDefined()
    const next = simba(backend, ["lock", "--timeout", "0", name, "--", "sh", "-c", say("NEXT $SIMBA_TOKEN")])
    expect(await statusOf(next)).toBe(0)
    expect(BigInt(find(next, "NEXT")!.words[1]!)).toBeGreaterThan(BigInt(find(holder, "HOLD")!.words[3]!))
  })

  it("simba elect: one of three runs the command; kill -9 of it hands over within a lease and a renew interval", { timeout: 90_000 }, async () => {
    const name = uniqueName("elect")
    const electors = [0, 1, 2].map(() => simba(backend, ["elect", name, "--", ...holdCommand("leader")]))
    const leaders = () => electors.filter((e) => find(e, "HOLD") !== undefined)
    await procs.waitFor("a leader runs the command", () => leaders().length > 0, startup + 10_000)
    // Every elector competes (its signal handling is in place): a SIGTERM to a `simba` still loading
    // its modules ends it by the signal, as it would any Node process.
    await procs.waitFor(
      "all three compete",
      () => electors.every((e) => procs.stderrOf(e.pid!).includes(`simba: competing for ${name}`)),
      startup + 10_000
    )
    await sleep(1_000)
    expect(leaders().length).toBe(1)
    const first = leaders()[0]!
    const firstLine = find(first, "HOLD")!
    // kill -9 of the leader: `simba` dies at once; its command (another group) is killed with it here.
    signalGroup(first, "SIGKILL")
    killGroup(Number(firstLine.words[4]))
    const killedAt = performance.now()
    const rest = electors.filter((e) => e !== first)
    await procs.waitFor("another elector runs the command", () => rest.some((e) => find(e, "HOLD") !== undefined), backend.handOver + startup)
    const second = rest.find((e) => find(e, "HOLD") !== undefined)!
    const secondLine = find(second, "HOLD")!
    expect(secondLine.at - killedAt).toBeLessThan(backend.handOver + startup)
    expect(BigInt(secondLine.words[3]!)).toBeGreaterThan(BigInt(firstLine.words[3]!))
    // Stopping an elector: its command gets the signal, and it exits with the command's status.
    for (const e of rest) procs.signal(e, "SIGTERM")
    expect(await Promise.all(rest.map(statusOf))).toEqual([0, 0])
    expect(find(second, "TERM")).toBeDefined()
  })
}

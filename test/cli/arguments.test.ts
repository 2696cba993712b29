/**
 * `simba` arguments and configuration (exit 78 with the variable or flag, the value and the rule),
 * an unreachable store (69), a missing command (127), and the in-memory backend, which lives in one
 * process: it serves `--help` and a lock around one command.
 */
import { describe, expect, it } from "@effect/vitest"
import { exited } from "../support/processes.js"
import { linesOf, procs, statusOf } from "./harness.js"

describe("simba: configuration and arguments", () => {
  const exitOf = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
    const child = procs.spawnScript("src/cli/main.ts", { args, env: { SIMBA_BACKEND: "", ...env }, stderr: "collect" })
    const code = await statusOf(child)
    await exited(child)
    return { code, stderr: procs.stderrOf(child.pid!), stdout: linesOf(child).map((l) => l.text).join("\n") }
  }

  it("bad configuration exits 78 with a message naming the variable or flag, the value and the rule", { timeout: 60_000 }, async () => {
    const bareNumber = await exitOf(["lock", "x", "--", "true"], { SIMBA_BACKEND: "memory", SIMBA_LEASE_DURATION: "5" })
    expect(bareNumber.code).toBe(78)
    expect(bareNumber.stderr).toMatch(/SIMBA_LEASE_DURATION="5".*unit/)
    const flag = await exitOf(["lock", "--timeout", "soon", "x", "--", "true"], { SIMBA_BACKEND: "memory" })
    expect(flag.code).toBe(78)
    expect(flag.stderr).toMatch(/--timeout "soon"/)
    const noBackend = await exitOf(["lock", "x", "--", "true"], {})
    expect(noBackend.code).toBe(78)
    expect(noBackend.stderr).toMatch(/SIMBA_BACKEND/)
    const badName = await exitOf(["lock", "no spaces", "--", "true"], { SIMBA_BACKEND: "memory" })
    expect(badName.code).toBe(78)
    expect(badName.stderr).toMatch(/invalid/i)
    const password = await exitOf(["status"], { SIMBA_BACKEND: "redis", SIMBA_REDIS_URL: "http://user:hunter2@127.0.0.1:6379" })
    expect(password.code).toBe(78)
    expect(password.stderr).not.toMatch(/hunter2/)
  })

  it("an unreachable backend exits 69; a missing command 127", { timeout: 60_000 }, async () => {
    const unreachable = await exitOf(["lock", "x", "--", "true"], { SIMBA_BACKEND: "redis", SIMBA_REDIS_URL: "redis://127.0.0.1:1" })
    expect(unreachable.code).toBe(69)
    expect(unreachable.stderr).toMatch(/cannot reach the redis backend/)
    const missing = await exitOf(["lock", "x", "--", "/nonexistent/command"], { SIMBA_BACKEND: "memory" })
    expect(missing.code).toBe(127)
  })

  it("on the in-memory backend: --help, and lock runs the command with its status", { timeout: 60_000 }, async () => {
    const help = await exitOf(["lock", "--help"], {})
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/SIMBA_TOKEN/)
    const run = await exitOf(["lock", "x", "--", "sh", "-c", "echo TOKEN $SIMBA_TOKEN; exit 7"], { SIMBA_BACKEND: "memory" })
    expect(run.code).toBe(7)
    expect(run.stdout).toMatch(/^TOKEN 1$/m)
  })
})

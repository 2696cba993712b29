/**
 * The runnable examples that need no server run to completion: `npm start` (examples/demo.ts) tells
 * its story and exits 0 by itself; the fenced-HTTP and SimbaTest walk-throughs exit 0. Each runs as
 * `node --import tsx file.ts` in its own process group, killed if it overruns. (Every example is
 * type-checked by `npx tsc --noEmit`: tsconfig.json includes examples/.)
 */
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { runNode } from "../readme/snippets.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const run = (file: string) => runNode(["--import", "tsx", join(root, "examples", file)], { cwd: root, millis: 60_000 })

describe("examples", () => {
  it.concurrent("demo.ts (npm start): election, handover, fenced write refused, failing work, schedule; exits 0", async () => {
    const result = await run("demo.ts")
    const output = `exit ${String(result.code)}\n${result.stdout}\n${result.stderr}`
    expect(result.code, output).toBe(0)
    const lines = result.stdout.split("\n")
    const at = (pattern: RegExp) => lines.findIndex((line) => pattern.test(line))
    // 1. a leader, it stops, and another client leads with the next token
    const firstLeader = /(\w+)\s+leads "reporter" \(token 1\)/.exec(result.stdout)?.[1]
    expect(firstLeader, output).toBeDefined()
    expect(at(new RegExp(`${firstLeader}\\s+stops leading "reporter"`)), output).toBeLessThan(at(/leads "reporter" \(token 2\)/))
    expect(result.stdout, output).not.toMatch(new RegExp(`${firstLeader}\\s+leads "reporter" \\(token 2\\)`))
    // 2. the stale holder's write is refused by the fence, after the newer write went through
    expect(at(/wrote orders with token 2/), output).toBeGreaterThan(-1)
    expect(at(/late write REFUSED: .*token 1 is below 2/), output).toBeGreaterThan(at(/wrote orders with token 2/))
    // 3. the failing leader's term ends and another client takes over
    const failed = /(\w+)\s+sync fails/.exec(result.stdout)?.[1]
    const next = /(\w+)\s+leads "sync" \(token 2\)/.exec(result.stdout)?.[1]
    expect(failed, output).toBeDefined()
    expect(next, output).toBeDefined()
    expect(next).not.toBe(failed)
    // 4. the schedule's first run comes at its first recurrence (2 s), not at the election
    const seconds = (line: string | undefined) => Number(line?.trim().split("s")[0])
    const started = seconds(lines[at(/the schedule starts now/)])
    const firstRun = seconds(lines[at(/scheduled run/)])
    expect(firstRun - started, output).toBeGreaterThanOrEqual(1.9)
    expect(at(/--- done ---/), output).toBeGreaterThan(-1)
  }, 90_000)

  it.concurrent("fenced-http.ts: the stale request is refused", async () => {
    const result = await run("fenced-http.ts")
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0)
    expect(result.stdout).toMatch(/late request was refused/)
  }, 90_000)

  it.concurrent("testing-with-simbatest.ts: its checks pass", async () => {
    const result = await run("testing-with-simbatest.ts")
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0)
  }, 90_000)
})

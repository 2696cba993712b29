/**
 * Engine unit tests: an acquire answered `Conflict` (the store holds the name as another kind of lock
 * or another semaphore limit). A lock ends: its `refusal` completion is answered with the store's
 * reason and the lock is removed (nothing queued, nothing to release). An election, which has no
 * refusal, logs it as a failed attempt and keeps trying.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { liveDriver, shows } from "./harness.js"

const conflict: Engine.Response = { _tag: "Conflict", held: "semaphore of 3 permits", asked: "lock" }

describe("Engine: a Conflict reply", () => {
  it("ends a lock: its refusal completion names both, the lock is removed, nothing is released or withdrawn", () => {
    const d = liveDriver()
    d.start(1, "jobs", { kind: "lock", refusal: 77 })
    const commands = d.acquireReply("jobs", conflict, 10)
    const completed = commands.filter((c): c is Extract<Engine.Command, { _tag: "Complete" }> => c._tag === "Complete")
    expect(completed.map((c) => [c.completion, c.outcome])).toContainEqual([
      77,
      { _tag: "Conflict", name: "jobs", held: "semaphore of 3 permits", asked: "lock" }
    ])
    expect(shows(commands).filter((c) => c.startsWith("Call Release") || c.startsWith("Call Withdraw"))).toEqual([])
    expect(d.state.elections.size).toBe(0)
    // No retry.
    expect(d.armed.has("retry:1")).toBe(false)
  })

  it("an election keeps trying (no refusal to answer); a failed attempt is what it sees", () => {
    const d = liveDriver()
    d.start(1, "jobs")
    const commands = d.acquireReply("jobs", conflict, 10)
    expect(shows(commands).filter((c) => c.startsWith("Complete"))).toEqual([])
    expect(d.state.elections.size).toBe(1)
    expect(d.armed.has("retry:1")).toBe(true)
    expect(shows(d.fire("retry:1")).filter((c) => c.startsWith("Call Acquire"))).toHaveLength(1)
  })
})

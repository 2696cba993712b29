/**
 * Engine unit tests: a lock's stop answers in the step that sends the release (the release is off
 * the caller's path), unless the stop asks to wait for it (`awaitRelease`): then it answers when the
 * backend answers the release, confirmed or failed, also after the client closed.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { close, granted, liveDriver, shows } from "./harness.js"

const stopWaiting = (handle: number, completion: number): Engine.Event => ({ _tag: "Stop", handle, completion, awaitRelease: true })
const completions = (commands: ReadonlyArray<Engine.Command>) => shows(commands).filter((c) => c.startsWith("Complete"))

const holding = () => {
  const d = liveDriver()
  d.start(1, "a", { kind: "lock" })
  d.acquireReply("a", granted(4n), 10)
  return d
}

describe("Engine: the release of a stopped lock", () => {
  it("by default the stop is answered in the step that sends the release", () => {
    const d = holding()
    const commands = shows(d.send({ _tag: "Stop", handle: 1, completion: 60 }, 100))
    expect(commands).toContain("Call Release a#4@s1")
    expect(commands).toContain("Complete 60 Ok")
  })

  it("awaitRelease: answered when the backend confirms the release, not before", () => {
    const d = holding()
    const commands = d.send(stopWaiting(1, 60), 100)
    expect(shows(commands)).toContain("Call Release a#4@s1")
    expect(completions(commands)).toEqual([])
    expect(completions(d.reply("Release", { _tag: "Done" }, 110, "a"))).toEqual(["Complete 60 Ok"])
  })

  it("awaitRelease: a failed release answers too (it is left to the next renewal), and is published", () => {
    const d = holding()
    d.send(stopWaiting(1, 60), 100)
    const commands = shows(d.reply("Release", { _tag: "Failed", error: "timeout" }, 110, "a"))
    expect(commands).toContain("Complete 60 Ok")
    expect(commands.some((c) => c.includes("BackendFailed"))).toBe(true)
  })

  it("awaitRelease: a release answered after the client closed still answers its stop", () => {
    const d = holding()
    d.send(stopWaiting(1, 60), 100)
    d.send(close(70), 101)
    d.reply("CloseSession", { _tag: "Done" }, 102)
    expect(completions(d.reply("Release", { _tag: "Done" }, 110, "a"))).toEqual(["Complete 60 Ok"])
  })

  it("awaitRelease on a lock that holds nothing (still a candidate) is answered at once", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock" })
    expect(completions(d.send(stopWaiting(1, 60), 100))).toEqual(["Complete 60 Ok"])
  })
})

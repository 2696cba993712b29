/**
 * Engine bugs the simulation found, replayed as short scripted event sequences on `Engine.step`.
 * To see the simulation find them again: `npx tsx test/simulation/mutate.ts regress-unrecorded-release
 * regress-release-current-term` re-introduces each bug in a temporary copy of the engine; with `--keep`,
 * `SIM_ENGINE=<mutant> npx vitest run test/simulation` runs these tests (and the simulation) against it.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import type { Timing } from "../../src/Session.js"
import { loadEngine } from "./scheduler.js"

/** The real engine, or `SIM_ENGINE`'s mutant (so `mutate.ts --keep` mutants can be run against these too). */
const engine = await loadEngine()

const timing: Timing = {
  leaseDuration: 1500,
  renewInterval: 500,
  drift: 0.01,
  margin: 5,
  retryJitter: 250,
  minBackoff: 20
}

/** Drives one engine; remembers every command and answers calls by request id. */
const driver = () => {
  let state = engine.initial(timing, 1)
  const calls: Array<Extract<Engine.Command, { _tag: "Call" }>> = []
  const arms = new Map<string, Extract<Engine.Command, { _tag: "Arm" }>>()
  const step = (event: Engine.Event, now: number): ReadonlyArray<Engine.Command> => {
    const [next, commands] = engine.step(state, event, now)
    state = next
    for (const e of commands) {
      if (e._tag === "Call") calls.push(e)
      if (e._tag === "Arm") arms.set(e.key, e)
    }
    return commands
  }
  const lastCall = (tag: Engine.Request["_tag"]) => {
    const call = calls.filter((c) => c.request._tag === tag).at(-1)
    if (call === undefined) throw new Error(`no ${tag} call`)
    return call
  }
  const reply = (call: Extract<Engine.Command, { _tag: "Call" }>, response: Engine.Response, now: number) =>
    step({ _tag: "Reply", requestId: call.requestId, sentAt: call.sentAt, request: call.request, response }, now)
  const fire = (key: string, now: number) => {
    const arm = arms.get(key)
    if (arm === undefined) throw new Error(`no timer ${key}`)
    return step({ _tag: "Timer", key, id: arm.id }, Math.max(now, arm.at))
  }
  return { step, reply, fire, lastCall, arms }
}

const releases = (commands: ReadonlyArray<Engine.Command>) =>
  commands.filter((e) => e._tag === "Call" && e.request._tag === "Release")

describe("engine regressions found by the simulation", () => {
  it("a lease a renewal lists for a candidate that has seen no token is asked for, not released: the reply makes the term", () => {
    const d = driver()
    d.step({ _tag: "Boot" }, 0)
    d.reply(d.lastCall("OpenSession"), { _tag: "Opened", sessionId: "s1", remaining: 1500 }, 10)
    d.step({ _tag: "Start", handle: 1, name: "a", kind: "election", hasWork: false, completion: 1 }, 20)
    const first = d.lastCall("Acquire")
    // The acquire is granted on the backend, but its reply is lost: the client sees a timeout.
    d.reply(first, { _tag: "Failed", error: "timed out" }, 520)
    // The renewal lists the lease; the candidate cannot tell it from a stale listing, so it asks.
    d.fire("renew", 510)
    const renewed = d.reply(
      d.lastCall("KeepAlive"),
      { _tag: "Live", remaining: 1500, leases: [{ name: "a", token: 1n }], groups: [] },
      530
    )
    expect(releases(renewed)).toEqual([])
    const asked = d.lastCall("Acquire")
    expect(asked.requestId).not.toBe(first.requestId)
    // Acquire is idempotent: the same token, which is now a reply to a request, and adopted.
    const granted = d.reply(asked, { _tag: "Granted", token: 1n }, 540)
    expect(granted.filter((e) => e._tag === "Elected")).toHaveLength(1)
    expect(releases(granted)).toEqual([])
  })

  it("a lease released as unclaimed at renewal is not adopted when a retried acquire races the release", () => {
    const d = driver()
    d.step({ _tag: "Boot" }, 0)
    d.reply(d.lastCall("OpenSession"), { _tag: "Opened", sessionId: "s1", remaining: 1500 }, 10)
    d.step({ _tag: "Start", handle: 1, name: "a", kind: "election", hasWork: false, completion: 1 }, 20)
    // Refused with the holder's token 5: a listed token not above it is not trusted, and given back.
    d.reply(d.lastCall("Acquire"), { _tag: "HeldBy", token: 5n, remaining: undefined }, 30)
    d.fire("renew", 510)
    const renewed = d.reply(
      d.lastCall("KeepAlive"),
      { _tag: "Live", remaining: 1500, leases: [{ name: "a", token: 1n }], groups: [] },
      530
    )
    expect(releases(renewed)).toHaveLength(1)
    // The retry reaches the backend before that release does: acquire is idempotent, same token.
    d.fire("retry:1", 530)
    const granted = d.reply(d.lastCall("Acquire"), { _tag: "Granted", token: 1n }, 800)
    // Adopting it would make a term of a lease the release in flight is about to free.
    expect(granted.filter((e) => e._tag === "Elected")).toEqual([])
    expect(releases(granted)).toHaveLength(1)
  })

  it("a late grant to an abandoned attempt does not release the lease the current term holds", () => {
    const d = driver()
    d.step({ _tag: "Boot" }, 0)
    d.reply(d.lastCall("OpenSession"), { _tag: "Opened", sessionId: "s1", remaining: 1500 }, 10)
    d.step({ _tag: "Start", handle: 1, name: "a", kind: "election", hasWork: false, completion: 1 }, 20)
    const abandoned = d.lastCall("Acquire")
    // Step down with no cooldown while the attempt is in flight, and compete again at once.
    d.step({ _tag: "StepDown", handle: 1, cooldown: 0, completion: 2 }, 30)
    d.fire("cooldown:1", 30)
    const current = d.lastCall("Acquire")
    expect(current.requestId).not.toBe(abandoned.requestId)
    // Both attempts reach the backend and are granted the same token (acquire is idempotent).
    const elected = d.reply(current, { _tag: "Granted", token: 1n }, 60)
    expect(elected.filter((e) => e._tag === "Elected")).toHaveLength(1)
    const late = d.reply(abandoned, { _tag: "Granted", token: 1n }, 70)
    expect(releases(late)).toEqual([])
  })
})

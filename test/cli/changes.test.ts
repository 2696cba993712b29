/** `simba watch`'s lines: what changed between two reads of the store (a pure function). */
import { describe, expect, it } from "@effect/vitest"
import * as ConfigError from "effect/ConfigError"
import * as Option from "effect/Option"
import { changes } from "../../src/cli/inspect.js"
import * as Status from "../../src/cli/status.js"
import type { Inventory } from "../../src/LeaseBackend.js"

const empty: Inventory = { sessions: [], leases: [], groups: [] }
const held: Inventory = {
  sessions: [{ sessionId: "s1", remaining: undefined }, { sessionId: "s2", remaining: undefined }],
  leases: [{ name: "a", holder: "s1", token: 5n, waiters: ["s2"] }, { name: "b", holder: undefined, token: 2n, waiters: [] }],
  groups: [{ group: "g", members: ["s1", "s2"] }]
}

describe("simba watch: changes between two reads", () => {
  it("the first read against an empty store lists the current state", () => {
    expect(changes(empty, held, Option.none())).toEqual([
      { event: "SessionOpened", sessionId: "s1" },
      { event: "SessionOpened", sessionId: "s2" },
      { event: "LeaseHeld", name: "a", holder: "s1", token: "5" },
      { event: "WaitersChanged", name: "a", waiters: ["s2"] },
      { event: "GroupView", group: "g", members: ["s1", "s2"] }
    ])
  })

  it("a hand-over, a session gone, a group shrunk; nothing for what did not change", () => {
    const after: Inventory = {
      sessions: [{ sessionId: "s2", remaining: undefined }],
      leases: [{ name: "a", holder: "s2", token: 6n, waiters: [] }, { name: "b", holder: undefined, token: 2n, waiters: [] }],
      groups: [{ group: "g", members: ["s2"] }]
    }
    expect(changes(held, after, Option.none())).toEqual([
      { event: "SessionEnded", sessionId: "s1" },
      { event: "LeaseHeld", name: "a", holder: "s2", token: "6" },
      { event: "WaitersChanged", name: "a", waiters: [] },
      { event: "GroupView", group: "g", members: ["s2"] }
    ])
    expect(changes(after, after, Option.none())).toEqual([])
  })

  it("a lease freed, or gone from the listing (ZooKeeper drops a free node), is LeaseFreed with its last token; NAME filters", () => {
    const freed: Inventory = { ...held, leases: [{ name: "b", holder: undefined, token: 2n, waiters: [] }] }
    expect(changes(held, freed, Option.some("a"))).toEqual([
      { event: "LeaseFreed", name: "a", token: "5" },
      { event: "WaitersChanged", name: "a", waiters: [] }
    ])
    expect(changes(held, freed, Option.some("b"))).toEqual([])
  })

  it("maps failures to exit statuses", () => {
    expect(Status.ofFailure(new Status.UsageError({ text: "bad" })).status).toBe(Status.badConfiguration)
    expect(Status.ofFailure(ConfigError.MissingData(["X"], "missing")).status).toBe(Status.badConfiguration)
    expect(Status.ofFailure(new Status.UnreachableError({ backend: "redis", cause: "down" })).status).toBe(Status.unavailable)
    expect(Status.ofFailure(new Error("boom")).status).toBe(Status.internalError)
  })
})

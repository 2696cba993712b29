/**
 * Versioned renewals (SPEC section 7): the engine names the version of the last lease list it read,
 * and a reply that omits the list stands for that list, so rule 3 (TAKEN_OVER, releasing leases
 * nobody wants) works exactly as with full lists.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { liveDriver, ops, published } from "./harness.js"

const liveV = (
  version: string,
  leases: ReadonlyArray<readonly [string, bigint]> | undefined,
  remaining = 15_000
): Engine.Response => ({
  _tag: "Live",
  remaining,
  version,
  leases: leases?.map(([name, token]) => ({ name, token })),
  groups: []
})

const keepAliveKnown = (call: { readonly request: Engine.Request }) =>
  call.request._tag === "KeepAlive" ? call.request.known : "not a KeepAlive"

describe("Engine: versioned renewals", () => {
  it("the first renewal of a session names no version; later ones name the last version read", () => {
    const d = liveDriver()
    d.lead(1, "a", 1n)
    d.fire("renew", 5_000)
    expect(keepAliveKnown(d.call("KeepAlive"))).toBeUndefined()
    d.reply("KeepAlive", liveV("7", [["a", 1n]]), 5_010)
    d.fire("renew", 10_000)
    expect(keepAliveKnown(d.call("KeepAlive"))).toBe("7")
    d.reply("KeepAlive", liveV("7", undefined), 10_010)
    d.fire("renew", 15_000)
    expect(keepAliveKnown(d.call("KeepAlive"))).toBe("7")
    expect(d.byName("a")?.status).toBe("LEADER")
  })

  it("an unchanged reply keeps the term and releases nothing", () => {
    const d = liveDriver()
    d.lead(1, "a", 1n)
    d.fire("renew", 5_000)
    d.reply("KeepAlive", liveV("7", [["a", 1n]]), 5_010)
    d.fire("renew", 10_000)
    const commands = d.reply("KeepAlive", liveV("7", undefined), 10_010)
    expect(ops(commands).filter((op) => op.startsWith("Revoked") || op.includes("Release"))).toEqual([])
    expect(d.byName("a")?.term?.token).toBe(1n)
  })

  it("an unchanged reply stands for the remembered list: a term adopted before it, missing there, is TAKEN_OVER", () => {
    // The backend listed no lease at version 7; a grant the engine adopted later would have changed
    // the version, so "unchanged since 7" with a term adopted before the request means it is gone.
    const d = liveDriver()
    d.fire("renew", 5_000)
    d.reply("KeepAlive", liveV("7", []), 5_010)
    d.lead(1, "a", 1n)
    d.fire("renew", 10_000)
    const commands = d.reply("KeepAlive", liveV("7", undefined), 10_010)
    expect(ops(commands)).toContain("Revoked a#1 TAKEN_OVER")
  })

  it("a lease in the remembered list that nobody wants is released again on an unchanged reply", () => {
    const d = liveDriver()
    d.fire("renew", 5_000)
    const first = d.reply("KeepAlive", liveV("3", [["orphan", 4n]]), 5_010)
    expect(ops(first)).toContain("Call Release orphan#4@s1")
    d.fire("renew", 10_000)
    const again = d.reply("KeepAlive", liveV("3", undefined), 10_010)
    expect(ops(again)).toContain("Call Release orphan#4@s1")
  })

  it("a reply that omits a list the engine never read is a failed renewal, not a success", () => {
    const d = liveDriver()
    d.lead(1, "a", 1n)
    d.fire("renew", 5_000)
    const commands = d.reply("KeepAlive", liveV("9", undefined), 5_010)
    expect(published(commands).some((event) => event.startsWith("Publish BackendFailed keepAlive"))).toBe(true)
    expect(d.session.status).toBe("SUSPENDED")
    expect(d.session.leaseView).toBeUndefined()
  })

  it("a new session forgets the version of the old one", () => {
    const d = liveDriver()
    d.fire("renew", 5_000)
    d.reply("KeepAlive", liveV("7", []), 5_010)
    d.fire("renew", 10_000)
    d.reply("KeepAlive", { _tag: "Expired" }, 10_010)
    d.reply("OpenSession", { _tag: "Opened", sessionId: "s2", remaining: 15_000 }, 10_020)
    d.fire("renew", 15_020)
    const renewal = d.call("KeepAlive")
    expect(renewal.request).toMatchObject({ sessionId: "s2" })
    expect(keepAliveKnown(renewal)).toBeUndefined()
  })

  it("a backend without versions (no version field) is always read from its list", () => {
    const d = liveDriver()
    d.lead(1, "a", 1n)
    d.fire("renew", 5_000)
    d.reply("KeepAlive", { _tag: "Live", remaining: 15_000, leases: [{ name: "a", token: 1n }], groups: [] }, 5_010)
    expect(d.session.leaseView).toBeUndefined()
    d.fire("renew", 10_000)
    expect(keepAliveKnown(d.call("KeepAlive"))).toBeUndefined()
  })
})

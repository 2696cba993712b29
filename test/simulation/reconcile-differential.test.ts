/**
 * Renewal replies reconcile only the names not settled against the lease list (see `reconcileLeases`
 * and `nextView`). Differential check: during simulated runs, every renewal reply (listing the leases
 * or saying they are unchanged) is also stepped from the same state without a lease view, which
 * reconciles every name; both must give the same commands and state (ids, instants and the order of
 * independent names aside). 10,000 seeds were checked this way when it was written; this keeps a few.
 */
import { describe, expect, it } from "vitest"
import * as Engine from "../../src/Engine.js"
import { type EngineApi, runSeeds } from "./scheduler.js"

/** Ids and instants differ when independent names are reconciled in another order. */
const ordinal = new Set(["requestId", "id", "termId", "at", "adoptedSeq", "seq", "attempt"])
const normal = (value: unknown): string =>
  JSON.stringify(value, (key, v) =>
    typeof v === "bigint" ? `${v}n` : ordinal.has(key) ? (v === undefined ? "none" : "some") : v)

const commandsKey = (commands: ReadonlyArray<Engine.Command>) => commands.map(normal).sort()

const stateKey = (s: Engine.State) =>
  normal({
    session: { ...s.session, leaseView: undefined, released: Array.from(s.session.released).sort() },
    elections: Array.from(s.elections.values()).sort((a, b) => a.handle - b.handle),
    tokens: Array.from(s.tokens).sort(),
    idleNames: Array.from(s.idleNames.keys()).sort(),
    timers: Array.from(s.timers.keys()).sort(),
    groups: Array.from(s.groups.values()),
    closing: s.closing,
    closed: s.closed
  })

describe("renewal reconciliation", () => {
  it("of the unsettled names only does what reconciling every name does", () => {
    let compared = 0
    const differential: EngineApi = {
      initial: Engine.initial,
      step: (state, event, now) => {
        const result = Engine.step(state, event, now)
        const view = state.session.leaseView
        if (
          event._tag !== "Reply" || event.request._tag !== "KeepAlive" || event.response._tag !== "Live" ||
          event.response.version === undefined || view === undefined || event.requestId !== state.session.renewing ||
          (event.response.leases === undefined && event.request.known !== view.version)
        ) return result
        const leases = event.response.leases ?? view.leases
        const full = Engine.step(
          { ...state, session: { ...state.session, leaseView: undefined } },
          { ...event, response: { ...event.response, leases } },
          now
        )
        compared++
        expect(commandsKey(result[1])).toEqual(commandsKey(full[1]))
        expect(stateKey(result[0])).toEqual(stateKey(full[0]))
        return result
      }
    }
    const r = runSeeds(differential, 1, 300)
    expect(r.seeds).toBe(300)
    expect(compared).toBeGreaterThan(1_000)
  }, 600_000)
})

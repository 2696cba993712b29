/**
 * The short chaos run of `npm test`, one file per backend (test/chaos/<backend>.test.ts) so vitest can
 * run them side by side; the long one is `npm run chaos` (test/chaos/run.ts). Three processes of
 * test/chaos/leader.ts writing through the fenced helpers, one fault, one round. Bounds from the
 * lease arithmetic (harness.ts `boundOf`: leaseDuration + renewInterval + 1 s slack after the heal).
 * Checks: no overlapping terms' work, no stale fenced write accepted, tokens rising with the terms, a
 * leader writing again within the bound.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Backend, type Fault, run, table } from "./harness.js"

export const shortRun = (backend: Backend, faults: ReadonlyArray<Fault>, lockKeep?: string) =>
  describe(`chaos, short run on ${backend}${lockKeep === undefined ? "" : `, locks with keep ${lockKeep}`}`, () => {
    it(faults.join(", "), async () => {
      const rows = await run(backend, faults.map((fault) => ({ fault, rounds: 1 })), undefined, { lockKeep })
      console.log(table(rows))
      expect(rows).toHaveLength(faults.length)
      for (const row of rows) {
        expect({ fault: row.fault, overlaps: row.overlaps, stale: row.staleAccepted, regressions: row.tokenRegressions, late: row.late })
          .toEqual({ fault: row.fault, overlaps: 0, stale: 0, regressions: 0, late: 0 })
      }
    }, 90_000)
  })

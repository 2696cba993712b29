/**
 * The deterministic simulation (SPEC section 11): many clients on the pure engine and a model backend,
 * under a seeded scheduler injecting faults (see `scheduler.ts`), checked after every step
 * (`checker.ts`).
 *
 * - default: seeds 1..10000 (in chunks, so progress and timing show per chunk);
 * - `SIM_SEEDS=N`: seeds 1..N (`SIM_FIRST=F` starts at F);
 * - `SIM_SEED=S`: replays seed S alone and prints its full trace on failure (`SIM_TRACE=1`: always);
 * - `SIM_ENGINE=/path/to/Engine.ts`: runs against another engine module (used by `mutate.ts`).
 */
import { describe, expect, it } from "vitest"
import { loadEngine, runSeed, runSeeds } from "./scheduler.js"

const engine = await loadEngine()

const single = process.env["SIM_SEED"]
const first = Number(process.env["SIM_FIRST"] ?? 1)
const total = Number(process.env["SIM_SEEDS"] ?? 10_000)
const chunk = 1_000
/**
 * Seeds run between two turns of the event loop. The seeds are synchronous: a worker that never
 * reaches the loop's poll phase for a minute does not read vitest's replies, and vitest then fails
 * the run with "Timeout calling onTaskUpdate" though every test passed.
 */
const slice = 50
const breathe = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("simulation", () => {
  if (single !== undefined) {
    it(`replays seed ${single}`, () => {
      const r = runSeed(engine, Number(single), { fullTrace: true })
      console.log(`simulation: seed ${single} passed: ${r.events} events, ${r.steps} engine steps, ${r.terms} terms`)
      if (process.env["SIM_TRACE"] !== undefined) console.log(r.trace)
    }, 600_000)
    return
  }
  const totals = { seeds: 0, events: 0, steps: 0, terms: 0, millis: 0, worst: 0 }
  const stats = new Map<string, number>()
  for (let from = first; from < first + total; from += chunk) {
    const count = Math.min(chunk, first + total - from)
    it(`seeds ${from}..${from + count - 1}`, async () => {
      let ran = 0
      for (let at = from; at < from + count; at += slice) {
        const r = runSeeds(engine, at, Math.min(slice, from + count - at))
        ran += r.seeds
        totals.seeds += r.seeds
        totals.events += r.events
        totals.steps += r.steps
        totals.terms += r.terms
        totals.millis += r.millis
        totals.worst = Math.max(totals.worst, r.worstGapRatio)
        for (const [k, v] of r.stats) stats.set(k, (stats.get(k) ?? 0) + v)
        await breathe()
      }
      expect(ran).toBe(count)
    }, 600_000)
  }
  it("reports what it explored", () => {
    console.log(
      `simulation: ${totals.seeds} seeds, ${totals.events} scheduler events, ${totals.steps} engine steps, ${totals.terms} terms in ${
        (totals.millis / 1000).toFixed(1)
      } s; longest quiet-phase leadership gap ${(totals.worst * 100).toFixed(0)}% of its bound\n  ${
        Array.from(stats).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${v}`).join(", ")
      }`
    )
    expect(totals.seeds).toBe(total)
  })
})

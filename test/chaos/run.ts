/**
 * The long chaos run: `npm run chaos` (or `node --import tsx test/chaos/run.ts [backend...] [--rounds N]
 * [--faults "FLUSHALL;lease hash deleted"] [--keep 200ms]`). Every fault each backend can take (or those
 * listed), N rounds each (default 3), then one table per backend. `--keep`: the processes take a lock
 * with that `keep` again and again instead of leading an election (lock caching under the faults).
 * Exits 1 when any row shows an overlap, a stale write accepted, a token regression or a late leader.
 */
import { type Backend, faultsOf, run, table } from "./harness.js"

const args = process.argv.slice(2)
const roundsAt = args.indexOf("--rounds")
const rounds = roundsAt === -1 ? 3 : Number(args[roundsAt + 1])
const faultsAt = args.indexOf("--faults")
const only = faultsAt === -1 ? undefined : new Set(args[faultsAt + 1]!.split(";").map((f) => f.trim()))
const keepAt = args.indexOf("--keep")
const lockKeep = keepAt === -1 ? undefined : args[keepAt + 1]
const values = new Set([roundsAt, faultsAt, keepAt].filter((at) => at !== -1).map((at) => at + 1))
const chosen = args.filter((a, i) => !a.startsWith("--") && !values.has(i)) as Array<Backend>
const backends: ReadonlyArray<Backend> = chosen.length > 0 ? chosen : ["redis", "cluster", "pg", "mysql", "zookeeper"]

let failed = false
for (const backend of backends) {
  const started = performance.now()
  const rows = await run(backend, faultsOf(backend).filter((fault) => only === undefined || only.has(fault)).map((fault) => ({ fault, rounds })), (t) => console.error(t), { lockKeep })
  console.log(`\n### ${backend} (${((performance.now() - started) / 1000).toFixed(0)} s)\n\n${table(rows)}`)
  if (rows.some((r) => r.overlaps > 0 || r.staleAccepted > 0 || r.tokenRegressions > 0 || r.late > 0 ||
      (r.notes.includes("refused to start") && !r.notes.startsWith("3/3")))) failed = true
}
process.exit(failed ? 1 : 0)

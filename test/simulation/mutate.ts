/**
 * Mutation check for the simulation: does a deliberately broken engine rule get caught?
 *
 *   npx tsx test/simulation/mutate.ts                       # every mutation, up to 10000 seeds each
 *   npx tsx test/simulation/mutate.ts --seeds 2000 no-drift-in-deadline
 *   npx tsx test/simulation/mutate.ts --properties           # also: caught without the rule checks?
 *   npx tsx test/simulation/mutate.ts --keep skip-taken-over  # also leaves the mutant for vitest:
 *   SIM_ENGINE=<printed path> npx vitest run test/simulation
 *
 * `--properties` repeats each hunt with only the properties checked (overlap, token order, pairing,
 * delivery, resurrection, liveness), not the engine rules R1-R4, to show which mutations the
 * headline properties catch on their own.
 *
 * Each mutation copies the engine (`src/Engine.ts` and its modules `src/engine/*.ts`) to a temporary
 * folder with one rule broken by string replacement (each edit's text must occur exactly once across
 * the engine's files, so a mutation never silently becomes a no-op), points the copy's other imports
 * back at `src/`, and runs seeds 1, 2, ... against it until the first violation. The sources are
 * never modified.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { SimulationFailure } from "./checker.js"
import { type EngineApi, runSeed } from "./scheduler.js"

interface Mutation {
  readonly name: string
  readonly description: string
  readonly edits: ReadonlyArray<readonly [from: string, to: string]>
}

/** Runs the deadline check of a step after the event instead of before it, for some replies. */
const deadlineCheckAfter = (request: string) =>
  [
    "  checkDeadline(s)\n  handle(s, event)\n",
    `  if (!(event._tag === "Reply" && event.request._tag === "${request}")) checkDeadline(s)\n  handle(s, event)\n  checkDeadline(s)\n`
  ] as const

export const mutations: ReadonlyArray<Mutation> = [
  {
    name: "adopt-after-deadline",
    description: "a grant that arrives after the session's local deadline is adopted (rule 1)",
    edits: [
      deadlineCheckAfter("Acquire"),
      [
        "const current = request.sessionId === s.session.id && sessionUsable(s)",
        "const current = request.sessionId === s.session.id && s.session.id !== undefined"
      ]
    ]
  },
  {
    name: "cached-lease-outlives-session",
    description: "a lease cached by a session that ended is used by the next session (lock caching)",
    edits: [
      ["  for (const name of Array.from(s.cached.keys())) dropCached(s, name)\n", ""],
      ["cached.sessionSeq === s.session.seq && s.closing === undefined", "s.closing === undefined"]
    ]
  },
  {
    name: "block-token-reused",
    description: "the next term of a cached lease gets the token of the last one, not the next of the block",
    edits: [["    next: term.token + 1n,", "    next: term.token,"]]
  },
  {
    name: "skip-taken-over",
    description: "a renewal reply that no longer lists a term's lease does not revoke it (rule 3)",
    edits: [['if (held.get(e.name) !== term.leaseToken) loseTerm(s, edit(s, e), "TAKEN_OVER")', "void held"]]
  },
  {
    name: "release-before-revoke",
    description: "stop/stepDown releases the lease at once and revokes the term only when the handover ends (rule 2)",
    edits: [
      [
        "      revoke(s, e, reason)\n      if (handsOver(s, e)) {",
        '      if (e.term !== undefined) call(s, { _tag: "Release", sessionId: e.term.sessionId, name: e.name, token: e.term.leaseToken })\n      if (handsOver(s, e)) {'
      ],
      [
        "      releaseLease(s, e, releaseCompletion)\n      return after === \"stop\" ? remove(s, e) : enterCooldown(s, e)",
        "      revoke(s, e, reason)\n      releaseLease(s, e, releaseCompletion)\n      return after === \"stop\" ? remove(s, e) : enterCooldown(s, e)"
      ],
      [
        "  disarm(s, handoverKey(e.handle))\n  releaseLease(s, e)",
        '  disarm(s, handoverKey(e.handle))\n  revoke(s, e, "STOPPED")\n  releaseLease(s, e)'
      ]
    ]
  },
  {
    name: "skip-abandoned-release",
    description: "a grant answering an abandoned attempt is not given back (rule 1)",
    edits: [["if (!ours) giveBack(s, request.sessionId, request.name, token)", "void ours"]]
  },
  {
    name: "no-drift-in-deadline",
    description: "the local deadline ignores drift: sentAt + remaining - margin (section 2)",
    edits: [[
      "const deadline = Session.localDeadline(s.timing, sentAt, remaining)",
      "const deadline = sentAt + remaining - s.timing.margin"
    ]]
  },
  // The two engine bugs the simulation found, re-introduced (see engine-regressions.test.ts).
  {
    name: "regress-unrecorded-release",
    description: "bug 1 (fixed): a lease released as unclaimed is not recorded, so a retried acquire racing the release adopts it",
    edits: [[
      "  giveBack(s, sessionId, name, token)\n}",
      "  call(s, { _tag: \"Release\", sessionId, name, token })\n}"
    ]]
  },
  {
    name: "regress-release-current-term",
    description: "bug 2 (fixed): a late grant to an abandoned attempt releases the lease the current term holds",
    edits: [[
      "if (!ours) giveBack(s, request.sessionId, request.name, token)",
      "void ours\n      giveBack(s, request.sessionId, request.name, token)"
    ]]
  },
  // The FIFO hand-off's pushed grants (and leases a renewal lists): adopted only above every token seen.
  {
    name: "trust-unasked-lease",
    description: "a lease nobody asked for (pushed grant, renewal listing) is adopted whatever its token",
    edits: [[
      "if (usable && candidate.seenToken !== undefined && token > candidate.seenToken) return adopt",
      "if (usable) return adopt"
    ], [
      // A candidate that has seen no token asks first: adopt at once instead.
      "if (usable && candidate.seenToken === undefined && candidate.attempt === undefined) return tryAcquire(s, candidate)\n",
      ""
    ], [
      // Rule 7's memory refuses the same tokens: break both copies of the rule.
      "aboveReleased(s, name, token) && aboveSeen(s, name, token) &&",
      "aboveReleased(s, name, token) &&"
    ]]
  },
  {
    name: "forget-given-back",
    description: "a token the client gave back is not remembered (by the elections of the name, nor by rule 7's memory)",
    edits: [["  for (const e of electionsNamed(s, name)) see(s, e, token)\n", ""], ["  observe(s, name, token, sessionId)\n", ""]]
  },
  {
    name: "revive-on-late-keepalive",
    description: "a renewal reply handled after the deadline passed extends it instead of ending the session (rule 4)",
    edits: [deadlineCheckAfter("KeepAlive")]
  }
]

const here = path.dirname(fileURLToPath(import.meta.url))
const src = path.resolve(here, "../../src")

/** The engine's files, relative to `src/`: the entry and its modules. */
const engineFiles = (): ReadonlyArray<string> => [
  "Engine.ts",
  ...fs.readdirSync(path.join(src, "engine")).filter((f) => f.endsWith(".ts")).sort().map((f) => `engine/${f}`)
]

/** Points a copied engine file's imports of the rest of `src/` back at `src/` (its own modules stay copies). */
const pointImportsAtSrc = (file: string, text: string): string => {
  const inEngine = file.startsWith("engine/")
  const outside = inEngine ? /from "\.\.\/([A-Za-z]+)\.js"/g : /from "\.\/([A-Za-z]+)\.js"/g
  return text.replace(outside, (_, module: string) => `from ${JSON.stringify(path.join(src, `${module}.ts`))}`)
}

/** Writes the mutant next to nothing in the repository; returns the path of its `Engine.ts`. */
export const writeMutant = (mutation: Mutation, dir: string): string => {
  const texts = new Map(engineFiles().map((file) => [file, fs.readFileSync(path.join(src, file), "utf8")]))
  for (const [from, to] of mutation.edits) {
    const hits = Array.from(texts).flatMap(([file, text]) => {
      const at = text.indexOf(from)
      return at < 0 ? [] : text.indexOf(from, at + 1) >= 0 ? [file, file] : [file]
    })
    if (hits.length !== 1) {
      throw new Error(`mutation ${mutation.name}: expected exactly one occurrence in the engine's files of:\n${from}`)
    }
    const file = hits[0]!
    const text = texts.get(file)!
    const at = text.indexOf(from)
    texts.set(file, text.slice(0, at) + to + text.slice(at + from.length))
  }
  const root = path.join(dir, mutation.name)
  fs.mkdirSync(path.join(root, "engine"), { recursive: true })
  // The copies import packages (effect) too: resolve them from the repository's node_modules.
  const modules = path.join(dir, "node_modules")
  if (!fs.existsSync(modules)) fs.symlinkSync(path.resolve(src, "../node_modules"), modules, "dir")
  for (const [file, text] of texts) {
    const banner = `// MUTANT (${mutation.name}): ${mutation.description}\n`
    fs.writeFileSync(path.join(root, file), banner + pointImportsAtSrc(file, text))
  }
  return path.join(root, "Engine.ts")
}

interface Outcome {
  readonly name: string
  readonly caught: boolean
  readonly seeds: number
  readonly millis: number
  readonly violation: string | undefined
}

const hunt = async (mutation: Mutation, file: string, maxSeeds: number, rules: boolean): Promise<Outcome> => {
  const engine = await import(pathToFileURL(file).href) as EngineApi
  const started = performance.now()
  for (let seed = 1; seed <= maxSeeds; seed++) {
    try {
      runSeed(engine, seed, { rules })
    } catch (error) {
      const failure = error as SimulationFailure
      return {
        name: mutation.name,
        caught: true,
        seeds: seed,
        millis: performance.now() - started,
        violation: failure.violation ?? String(error)
      }
    }
  }
  return { name: mutation.name, caught: false, seeds: maxSeeds, millis: performance.now() - started, violation: undefined }
}

const main = async () => {
  const args = process.argv.slice(2)
  let maxSeeds = 10_000
  let keep = false
  let propertiesToo = false
  const names: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--seeds") maxSeeds = Number(args[++i])
    else if (args[i] === "--keep") keep = true
    else if (args[i] === "--properties") propertiesToo = true
    else names.push(args[i]!)
  }
  const chosen = names.length === 0 ? mutations : names.map((n) => {
    const m = mutations.find((x) => x.name === n)
    if (m === undefined) throw new Error(`unknown mutation ${n}; known: ${mutations.map((x) => x.name).join(", ")}`)
    return m
  })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "simba-mutants-"))
  const outcomes: Array<Outcome> = []
  for (const mutation of chosen) {
    const file = writeMutant(mutation, dir)
    const outcome = await hunt(mutation, file, maxSeeds, true)
    outcomes.push(outcome)
    const report = (o: Outcome) =>
      o.caught
        ? `at seed ${o.seeds} (${o.seeds} seeds, ${(o.millis / 1000).toFixed(2)} s)\n           ${o.violation?.split("\n")[0]}`
        : `survived ${o.seeds} seeds (${(o.millis / 1000).toFixed(1)} s)`
    console.log(`${outcome.caught ? "CAUGHT" : "MISSED"}   ${mutation.name} (${mutation.description})`)
    console.log(`  all checks:      ${report(outcome)}`)
    if (propertiesToo) console.log(`  properties only: ${report(await hunt(mutation, file, maxSeeds, false))}`)
    if (keep) console.log(`         mutant kept: SIM_ENGINE=${file} npx vitest run test/simulation`)
  }
  if (!keep) fs.rmSync(dir, { recursive: true, force: true })
  const missed = outcomes.filter((o) => !o.caught)
  console.log(`${outcomes.length - missed.length}/${outcomes.length} mutations caught`)
  if (missed.length > 0) process.exitCode = 1
}

await main()

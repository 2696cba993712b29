/**
 * Every ```ts snippet of README.md and of each docs/*.md runs as printed. The snippets are written to
 * a temporary folder inside the repository (so `simba` and node_modules resolve as they do for the
 * examples), type-checked together by one `tsc` run, then run one by one as child processes; how each
 * is checked is chosen by the marker above it (see ./snippets.ts). Failures name the Markdown file and
 * the line of the snippet's fence. Snippets on a real backend run on the servers `npm test` starts,
 * under key/table prefixes of their own where they read the environment.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { simbaPaths } from "../../vitest.config.js"
import { extractSnippets, runNode, type Snippet } from "./snippets.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
/** README.md, then every docs/*.md in name order. */
const markdownFiles = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).sort().map((name) => `docs/${name}`)
]
const snippetsByFile = new Map(
  markdownFiles.map((file) => [file, extractSnippets(readFileSync(join(root, file), "utf8"), file)] as const)
)
const snippets = [...snippetsByFile.values()].flat()
// Outside `include` of tsconfig.json and vitest.config.ts, so a folder left by a killed run is inert.
const dir = join(root, `.readme-snippets-${process.pid}`)

const fileOf = (snippet: Snippet, index: number) =>
  join(
    dir,
    `snippet-${String(index).padStart(2, "0")}-${snippet.file.replace(/\.md$/, "").replace(/[^A-Za-z0-9]+/g, "-")}-line-${snippet.line}${
      snippet.mode._tag === "vitest" ? ".test" : ""
    }.ts`
  )
const where = (snippet: Snippet) => `${snippet.file}:${snippet.line}`

/** `simba` and its subpaths, as the repository's tsconfig maps them to the sources. */
const entryPoints: Record<string, string> = Object.fromEntries(
  Object.entries(simbaPaths).map(([name, [path = ""]]) => [name, path.replace(/^\.\//, "")])
)

// Backends' own names, so the snippets never touch another test's leases.
const env = {
  SIMBA_REDIS_KEY_PREFIX: "readme-snippets",
  SIMBA_PG_TABLE_PREFIX: "readme_snippets_",
  SIMBA_MYSQL_TABLE_PREFIX: "readme_snippets_",
  SIMBA_ZK_ROOT: "/readme-snippets",
  // The PostgreSQL snippet runs on the default URL, which names no user: the driver takes PGUSER,
  // else USER, which a CI shell may not set. The server's superuser, as the SQL tests use.
  PGUSER: "postgres",
  TSX_TSCONFIG_PATH: join(dir, "tsconfig.json")
}

/** tsc's diagnostics, with each snippet file named by its Markdown file and line. */
let typeErrors = ""

beforeAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  snippets.forEach((snippet, index) => {
    // a snippet without import/export would be a script sharing one global scope with the others
    const isModule = /^\s*(import|export)\s/m.test(snippet.code)
    writeFileSync(fileOf(snippet, index), isModule ? snippet.code : `${snippet.code}export {}\n`)
  })
  const paths = Object.fromEntries(Object.entries(entryPoints).map(([name, path]) => [name, [join(root, path)]]))
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      extends: "../tsconfig.json",
      compilerOptions: { paths },
      include: snippets.flatMap((snippet, index) => snippet.mode._tag === "fragment" ? [] : [fileOf(snippet, index)])
    })
  )
  const alias = Object.entries(entryPoints).map(([name, path]) => ({
    find: new RegExp(`^${name.replace(/\//g, "\\/")}$`),
    replacement: join(root, path)
  }))
  writeFileSync(
    join(dir, "vitest.config.mjs"),
    `export default { resolve: { alias: ${
      JSON.stringify(alias.map((a) => ({ find: a.find.source, replacement: a.replacement })))
    }.map((a) => ({ ...a, find: new RegExp(a.find) })) }, test: { include: ["*.test.ts"], testTimeout: 20000 } }\n`
  )
  const tsc = await runNode([join(root, "node_modules/typescript/bin/tsc"), "-p", join(dir, "tsconfig.json")], {
    cwd: root,
    millis: 240_000
  })
  expect(tsc.code, `tsc did not finish: ${tsc.stderr}`).not.toBeUndefined()
  typeErrors = snippets.reduce(
    (text, snippet, index) =>
      text.replaceAll(
        `${fileOf(snippet, index).slice(root.length)}(`,
        `${where(snippet)} snippet, (snippet line,col) `
      ),
    tsc.stdout
  )
}, 300_000)

afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Vitest's own variables would make the nested vitest think it is a worker of this run. */
const childEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("VITEST") && key !== "NODE_ENV"))

describe("README.md and docs/*.md snippets", () => {
  it("has snippets, each marked with a known mode", () => {
    const readme = snippetsByFile.get("README.md")!
    expect(readme.length).toBeGreaterThan(3)
    // the first snippet is the one a newcomer copies: it must run, not be exempt
    expect(readme[0]!.mode._tag).toBe("run")
    expect(markdownFiles.length).toBeGreaterThan(1)
  })

  it("type-check (one tsc run over all of them)", () => {
    expect(typeErrors).toBe("")
  })

  snippets.forEach((snippet, index) => {
    const mode = snippet.mode
    const title = `${where(snippet)}: ${mode._tag}${"reason" in mode ? ` (${mode.reason})` : ""}${
      mode._tag === "run" && mode.prints !== undefined ? ` (prints ${mode.prints})` : ""
    }`
    if (mode._tag === "fragment" || mode._tag === "typecheckOnly") {
      it(title, () => {
        expect(mode.reason.length).toBeGreaterThan(0)
      })
      return
    }
    it.concurrent(title, async () => {
      const file = fileOf(snippet, index)
      if (mode._tag === "vitest") {
        const result = await runNode(
          [join(root, "node_modules/vitest/vitest.mjs"), "run", "--root", dir, "--config", join(dir, "vitest.config.mjs"), file.slice(dir.length + 1)],
          { cwd: dir, env: { ...childEnv(), ...env }, millis: 90_000 }
        )
        expect(result.code, `${where(snippet)}\n${result.stdout}\n${result.stderr}`).toBe(0)
        expect(result.stdout.replace(/\u001b\[[0-9;]*m/g, "")).toMatch(/Tests\s+\d+ passed/)
        return
      }
      // generous: a Redis snippet on a new key prefix waits one lock-delay (15 s) before its first lock
      const millis = mode._tag === "runFor" ? mode.millis : 90_000
      const result = await runNode(["--import", "tsx", file], { cwd: root, env: { ...childEnv(), ...env }, millis })
      const output = `${where(snippet)}: exit ${String(result.code)} ${String(result.signal)}\n${result.stdout}\n${result.stderr}`
      if (mode._tag === "runFor") {
        // still running at the deadline (or ended cleanly before it), and nothing went wrong meanwhile
        expect([undefined, 0], output).toContain(result.code)
        expect(result.stderr, output).toBe("")
        expect(result.stdout, output).not.toMatch(/level=(ERROR|FATAL)/)
      } else {
        expect(result.code, output).toBe(0)
        if (mode.prints !== undefined) expect(result.stdout, output).toContain(mode.prints)
      }
    }, 120_000)
  })
})

/**
 * Extracting the ```ts snippets of a Markdown file, and running TypeScript files as child processes
 * (`node --import tsx file.ts` in their own process group, killed as a group when they overrun).
 *
 * A snippet is checked according to the HTML comment on the line just above its fence:
 *   (none)                                type-checked, then run; it must exit 0 by itself
 *   <!-- snippet: prints: <text> -->      the same, and its stdout must contain <text>
 *   <!-- snippet: run-for: 2s -->         type-checked, then run; it must still be running after 2 s
 *                                         with nothing on stderr (leader work that never ends), then killed
 *   <!-- snippet: vitest -->              type-checked, then run as a vitest file; its tests must pass
 *   <!-- snippet: typecheck-only (why) --> type-checked only (it needs something the test cannot give)
 *   <!-- snippet: fragment (why) -->      not checked (an outline with `...`, not a program)
 */
import { spawn } from "node:child_process"

export type SnippetMode =
  | { readonly _tag: "run"; readonly prints?: string | undefined }
  | { readonly _tag: "runFor"; readonly millis: number }
  | { readonly _tag: "vitest" }
  | { readonly _tag: "typecheckOnly"; readonly reason: string }
  | { readonly _tag: "fragment"; readonly reason: string }

export interface Snippet {
  /** The Markdown file, as named in failures (`README.md`, `docs/redis.md`). */
  readonly file: string
  /** 1-based line of the opening fence in the Markdown file. */
  readonly line: number
  readonly code: string
  readonly mode: SnippetMode
}

const fence = /^(\s*)```(ts|typescript)\s*$/
const anyFence = /^\s*```/
const marker = /^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$/

const parseMode = (text: string, file: string, line: number): SnippetMode => {
  const prints = /^prints:\s*(.+)$/.exec(text)
  if (prints !== null) return { _tag: "run", prints: prints[1]! }
  const runFor = /^run-for:\s*(\d+(?:\.\d+)?)\s*(ms|s)$/.exec(text)
  if (runFor !== null) {
    const value = Number(runFor[1])
    return { _tag: "runFor", millis: runFor[2] === "s" ? value * 1000 : value }
  }
  if (text === "vitest") return { _tag: "vitest" }
  const reasoned = /^(typecheck-only|fragment)\s*\((.+)\)$/.exec(text)
  if (reasoned !== null) {
    return reasoned[1] === "fragment"
      ? { _tag: "fragment", reason: reasoned[2]! }
      : { _tag: "typecheckOnly", reason: reasoned[2]! }
  }
  throw new Error(
    `${file}:${line}: unknown snippet marker "${text}" (prints: <text>, run-for: <n>s, vitest, typecheck-only (reason), fragment (reason))`
  )
}

/** Every ```ts / ```typescript block of `file`, with its indentation (list items) removed. */
export const extractSnippets = (markdown: string, file = "README.md"): ReadonlyArray<Snippet> => {
  const lines = markdown.split("\n")
  const snippets: Array<Snippet> = []
  for (let i = 0; i < lines.length; i++) {
    const open = fence.exec(lines[i]!)
    if (open === null) {
      // skip over other fenced blocks whole, so a ```ts shown inside them is not taken
      if (anyFence.test(lines[i]!)) {
        const end = lines.findIndex((l, j) => j > i && anyFence.test(l))
        if (end > i) i = end
      }
      continue
    }
    const indent = open[1]!.length
    let end = i + 1
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++
    if (end === lines.length) throw new Error(`${file}:${i + 1}: unclosed code fence`)
    const code = lines.slice(i + 1, end).map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length))).join("\n")
    let above = i - 1
    while (above >= 0 && lines[above]!.trim() === "") above--
    const mark = above >= 0 ? marker.exec(lines[above]!) : null
    snippets.push({
      file,
      line: i + 1,
      code: `${code}\n`,
      mode: mark === null ? { _tag: "run" } : parseMode(mark[1]!, file, above + 1)
    })
    i = end
  }
  return snippets
}

export interface RunResult {
  /** The exit code, or `undefined` if the process was still running at the deadline and was killed. */
  readonly code: number | null | undefined
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs `node ...args` detached (its own process group). After `millis` a process still running gets
 * SIGTERM on its group, and SIGKILL 2 s later if it is still there; the result then has `code: undefined`.
 */
export const runNode = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly millis: number }
): Promise<RunResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    let timedOut = false
    const signalGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal)
      } catch {
        // the group is already gone: nothing to signal
      }
    }
    let killer: NodeJS.Timeout | undefined
    const timer = setTimeout(() => {
      timedOut = true
      signalGroup("SIGTERM")
      killer = setTimeout(() => signalGroup("SIGKILL"), 2_000)
    }, options.millis)
    child.on("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      if (killer !== undefined) clearTimeout(killer)
      // whatever the child left behind in its group goes with it
      signalGroup("SIGKILL")
      resolve({ code: timedOut ? undefined : code, signal, stdout, stderr })
    })
  })

/**
 * Child processes for the multi-process and chaos tests, in one place: each child runs in its own
 * process group (`detached`), so a signal reaches the child and everything it started, and nothing
 * else on this shared machine. Only the pids started here are ever signalled.
 *
 * - `spawnScript` runs `node --import tsx <script>` (the library from source) and collects its stdout
 *   lines with the time they arrived; a line that is a JSON object is also parsed.
 * - `spawnCommand` runs any other program (a `java`, a `redis-server`) detached, output ignored.
 * - `signal` sends a signal to a child's group; `stopAll` resumes and kills every group still alive
 *   (call it in `afterAll`/`finally`).
 * - `waitFor` polls a predicate with a bounded timeout and prints the recent lines when it runs out.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"

/** The repository root: scripts are given relative to it. */
export const root = fileURLToPath(new URL("../..", import.meta.url))

/** Milliseconds on CLOCK_MONOTONIC, which every process of this machine shares (Linux). */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6

export interface Line {
  /** When the parent read it (`performance.now()`). */
  readonly at: number
  /** The same moment on the shared monotonic clock (`monotonicMs`). */
  readonly mono: number
  readonly pid: number
  readonly text: string
  /** `text` split on spaces (the older `WORD token pid` protocol). */
  readonly words: ReadonlyArray<string>
  /** `text` parsed, when it is a JSON object. */
  readonly json: Record<string, unknown> | undefined
}

const parseJson = (text: string): Record<string, unknown> | undefined => {
  if (!text.startsWith("{")) return undefined
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const isAlive = (child: ChildProcess) => child.exitCode === null && child.signalCode === null

/** Sends `sig` to the child's process group; a group already gone is not an error. */
export const signalGroup = (child: ChildProcess, sig: NodeJS.Signals): void => {
  if (child.pid === undefined || !isAlive(child)) return
  try {
    process.kill(-child.pid, sig)
  } catch {
    // the group is already gone
  }
}

/** Resolves when the child has exited (at once if it already has). */
export const exited = (child: ChildProcess): Promise<void> =>
  isAlive(child) ? new Promise((resolve) => child.once("exit", () => resolve())) : Promise.resolve()

export interface ScriptOptions {
  readonly env?: Record<string, string>
  readonly args?: ReadonlyArray<string>
  /**
   * Where the child's stderr goes (default: this process's). `collect`: to this process's stderr too,
   * and kept (`stderrOf`), for a test that must tell how a child died.
   */
  readonly stderr?: "inherit" | "ignore" | "collect"
}

export interface Processes {
  /** Every stdout line of every script child, in arrival order. */
  readonly lines: Array<Line>
  readonly children: Array<ChildProcess>
  readonly spawnScript: (script: string, options?: ScriptOptions) => ChildProcess
  readonly spawnCommand: (command: string, args: ReadonlyArray<string>, cwd?: string) => ChildProcess
  readonly signal: (child: ChildProcess | number, sig: NodeJS.Signals) => void
  readonly byPid: (pid: number) => ChildProcess
  /** What a child started with `stderr: "collect"` wrote to stderr so far. */
  readonly stderrOf: (pid: number) => string
  readonly alive: () => ReadonlyArray<ChildProcess>
  readonly waitFor: (what: string, predicate: () => boolean, timeoutMs: number) => Promise<void>
  /** SIGCONT then SIGKILL to every group still alive; resolves when they have exited. */
  readonly stopAll: () => Promise<void>
}

export const processes = (): Processes => {
  const lines: Array<Line> = []
  const children: Array<ChildProcess> = []
  const stderrs = new Map<number, string>()
  const byPid = (pid: number) => {
    const child = children.find((c) => c.pid === pid)
    if (child === undefined) throw new Error(`no child with pid ${pid}`)
    return child
  }

  const spawnScript = (script: string, options: ScriptOptions = {}) => {
    const child = spawn(
      process.execPath,
      ["--conditions=simba-source", "--import", "tsx", script, ...(options.args ?? [])],
      {
        cwd: root,
        detached: true,
        env: { ...process.env, ...options.env },
        stdio: ["ignore", "pipe", options.stderr === "collect" ? "pipe" : options.stderr ?? "inherit"]
      }
    )
    if (options.stderr === "collect") {
      stderrs.set(child.pid!, "")
      child.stderr!.on("data", (chunk: Buffer) => {
        process.stderr.write(chunk)
        stderrs.set(child.pid!, stderrs.get(child.pid!)! + chunk.toString())
      })
    }
    let buffer = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      buffer += chunk.toString()
      let newline = buffer.indexOf("\n")
      while (newline >= 0) {
        const text = buffer.slice(0, newline).trim()
        buffer = buffer.slice(newline + 1)
        if (text.length > 0) {
          lines.push({
            at: performance.now(),
            mono: monotonicMs(),
            pid: child.pid!,
            text,
            words: text.split(" "),
            json: parseJson(text)
          })
        }
        newline = buffer.indexOf("\n")
      }
    })
    children.push(child)
    return child
  }

  const spawnCommand = (command: string, args: ReadonlyArray<string>, cwd?: string) => {
    const child = spawn(command, args, { cwd, detached: true, stdio: "ignore" })
    children.push(child)
    return child
  }

  const waitFor = async (what: string, predicate: () => boolean, timeoutMs: number) => {
    const until = performance.now() + timeoutMs
    while (!predicate()) {
      if (performance.now() > until) {
        const recent = lines.slice(-30).map((l) => `${Math.round(l.at)} ${l.pid} ${l.text}`)
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last lines:\n${recent.join("\n")}`)
      }
      await sleep(5)
    }
  }

  const stopAll = async () => {
    const running = children.filter(isAlive)
    for (const child of running) {
      signalGroup(child, "SIGCONT")
      signalGroup(child, "SIGKILL")
    }
    await Promise.all(running.map(exited))
  }

  return {
    lines,
    children,
    spawnScript,
    spawnCommand,
    signal: (child, sig) => signalGroup(typeof child === "number" ? byPid(child) : child, sig),
    byPid,
    stderrOf: (pid) => stderrs.get(pid) ?? "",
    alive: () => children.filter(isAlive),
    waitFor,
    stopAll
  }
}

/**
 * A TCP port on 127.0.0.1 that nothing listens on right now, below the kernel's ephemeral range
 * (32768-60999 here): a port the kernel picked would be free only until some test's outgoing
 * connection took it as its local port, before the server meant for it could bind it.
 */
export const freePort = async (): Promise<number> => {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer()
      server.once("error", () => resolve(false))
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
    })
    if (free) return port
  }
}

/** Polls `attempt` every 50 ms until it resolves, for at most `timeoutMs`; then rejects with its last error. */
export const retryUntil = async <A>(what: string, attempt: () => Promise<A>, timeoutMs: number): Promise<A> => {
  const until = performance.now() + timeoutMs
  for (;;) {
    try {
      return await attempt()
    } catch (error) {
      if (performance.now() > until) throw new Error(`${what}: not ready within ${timeoutMs} ms (${String(error)})`)
      await sleep(50)
    }
  }
}

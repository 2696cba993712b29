/**
 * A private `redis-server` process on a port of its own, for tests that kill, pause, restart, wipe or
 * reconfigure a server (never the shared 6379 or the cluster). It runs detached in its own process
 * group, in a temporary directory (where it keeps its AOF/RDB when persistence is asked for); `stop`
 * kills it by pid and removes the directory.
 */
import { type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Redis } from "ioredis"
import { exited, freePort, processes, retryUntil, signalGroup } from "./processes.js"

export interface PrivateRedis {
  readonly port: number
  readonly dir: string
  /** The running process (undefined while stopped). */
  readonly current: () => ChildProcess | undefined
  /** Starts it again on the same port and directory; `args` replace the extra arguments when given. */
  readonly start: (args?: ReadonlyArray<string>) => Promise<void>
  /** SIGKILL to its group; resolves once it has exited. */
  readonly kill: () => Promise<void>
  readonly signal: (sig: NodeJS.Signals) => void
  /** Kills it and removes its directory. */
  readonly stop: () => Promise<void>
}

/** Answers PING within 10 s, or rejects. */
export const awaitPing = (port: number, password?: string): Promise<void> =>
  retryUntil(`redis-server on ${port}`, async () => {
    const probe = new Redis(port, "127.0.0.1", {
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
      ...(password === undefined ? {} : { password })
    })
    probe.on("error", () => {})
    try {
      await probe.connect()
      await probe.ping()
    } finally {
      probe.disconnect()
    }
  }, 10_000)

/** Starts a private server (no persistence unless `args` ask for it) and waits until it answers. */
export const startPrivateRedis = async (initialArgs: ReadonlyArray<string> = []): Promise<PrivateRedis> => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), "simba-redis-"))
  const group = processes()
  let args = initialArgs
  let child: ChildProcess | undefined
  const passwordOf = () => {
    const i = args.indexOf("--requirepass")
    return i === -1 ? undefined : args[i + 1]
  }
  const start = async (next?: ReadonlyArray<string>) => {
    if (next !== undefined) args = next
    child = group.spawnCommand(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", ...args],
      dir
    )
    await awaitPing(port, passwordOf())
  }
  const kill = async () => {
    const running = child
    child = undefined
    if (running === undefined) return
    signalGroup(running, "SIGCONT")
    signalGroup(running, "SIGKILL")
    await exited(running)
  }
  await start()
  return {
    port,
    dir,
    current: () => child,
    start,
    kill,
    signal: (sig) => {
      if (child !== undefined) signalGroup(child, sig)
    },
    stop: async () => {
      await kill()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

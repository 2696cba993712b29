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

/**
 * Resolves once every server of `ports` sees the cluster's state ok and all `ports.length` nodes
 * connected (after a start, or after one of them restarted); rejects after 20 s.
 */
export const awaitClusterReady = (ports: ReadonlyArray<number>): Promise<void> =>
  retryUntil("private cluster ready", async () => {
    for (const port of ports) {
      const admin = new Redis(port, "127.0.0.1", { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 })
      admin.on("error", () => {})
      try {
        await admin.connect()
        const info = String(await admin.call("CLUSTER", "INFO"))
        const nodes = String(await admin.call("CLUSTER", "NODES")).trim().split("\n")
        if (!info.includes("cluster_state:ok") || nodes.length !== ports.length || !nodes.every((l) => l.includes("connected"))) {
          throw new Error(`node ${port} not ready`)
        }
      } finally {
        admin.disconnect()
      }
    }
  }, 20_000)

/**
 * A private Redis Cluster of `size` masters (no replicas), the 16384 slots split evenly, for tests
 * that pause, restart, reconfigure or cut the connections of a cluster (never done on the shared
 * 7000-7002). Each server's cluster bus listens on a free port of its own (`--cluster-port`) and keeps
 * its `nodes.conf` in its directory, so a server restarted (even without persistence) comes back as
 * the same node serving the same slots, with no keys.
 */
export const startPrivateCluster = async (size: number): Promise<ReadonlyArray<PrivateRedis>> => {
  const servers: Array<PrivateRedis> = []
  const busPorts: Array<number> = []
  const admins: Array<Redis> = []
  try {
    for (let i = 0; i < size; i++) {
      busPorts.push(await freePort())
      servers.push(await startPrivateRedis([
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        String(busPorts[i])
      ]))
      admins.push(new Redis(servers[i]!.port, "127.0.0.1"))
    }
    const perNode = Math.ceil(16384 / size)
    await Promise.all(admins.map((admin, i) =>
      admin.call("CLUSTER", "ADDSLOTSRANGE", String(i * perNode), String(Math.min(16383, (i + 1) * perNode - 1)))
    ))
    for (let i = 1; i < size; i++) await admins[0]!.call("CLUSTER", "MEET", "127.0.0.1", String(servers[i]!.port), String(busPorts[i]))
    await awaitClusterReady(servers.map((server) => server.port))
    return servers
  } catch (error) {
    await Promise.all(servers.map((server) => server.stop()))
    throw error
  } finally {
    for (const admin of admins) admin.disconnect()
  }
}

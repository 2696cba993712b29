/**
 * Shared helpers of the benchmark: wall-clock timing, statistics, Redis connections, the two ways
 * commands are counted, and key cleanup.
 *
 * Counting commands, two ways:
 * - **server side** (`serverCommands`): `INFO stats` `total_commands_processed` read on a dedicated
 *   monitor connection. Redis counts every command it executes, *including the commands a Lua script
 *   runs* (`redis.call`): an `EVALSHA` whose script makes 4 calls counts 5. Each `INFO` counts itself
 *   once, so a delta between two readings includes exactly one `INFO`, which is subtracted. The count
 *   is server-wide: any other client of the same Redis (another test run) inflates it, so the bench
 *   samples that background rate before and after the run and reports it.
 * - **client side** (`roundTrips`): every command an ioredis connection of this process sends, counted
 *   by wrapping `Redis.prototype.sendCommand`, per connection name. This is the number of round trips
 *   (top-level commands, a script counts once), exact, and blind to other clients of the server.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import { performance } from "node:perf_hooks"
import type { SimbaClient } from "../src/Simba.js"

export const redisUrl = process.env["BENCH_REDIS_URL"] ?? "redis://127.0.0.1:6379"

/**
 * Warm-up runs before each timed series, the peers' and Simba's alike, on every backend: enough for V8 to have
 * optimized the code on the path (Simba's is larger than a peer's and settles later: at 1,000 its CPU
 * per pair still carried the optimizing compiler's threads, ~1.5-2x its steady figure). A service
 * taking locks all day runs warm; the figures are of that state.
 */
export const WARMUP = 4000

/** Milliseconds on a monotonic wall clock (the bench only; `src/` never reads a wall clock). */
export const now = (): number => performance.now()

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * How long a hand-over sample waits before the release (10–40 ms), in every backend's bench and its
 * floor alike: a process and a server that idled wake slower than in a tight loop, so a hand-over and
 * the floor it is compared with must idle the same. Random, so that it never locks in phase with a
 * peer's polling.
 */
export const waitBeforeRelease = (): number => 10 + Math.random() * 30

/** Waits until `now() >= at` (setTimeout granularity: up to ~1 ms late). */
export const sleepUntil = (at: number): Promise<void> => sleep(Math.max(0, at - now()))

/**
 * Runs the bench file `file` with `args` in a Node process of its own, with this process's flags (a
 * fresh heap, nothing compiled by earlier sections), and parses the last line it prints as JSON.
 */
export const inOwnProcess = <A>(file: string, args: ReadonlyArray<string>): Promise<A> =>
  new Promise((resolve, reject) => {
    execFile(process.execPath, [...process.execArgv, file, ...args], (error, stdout) => {
      if (error !== null) return reject(error)
      const lines = stdout.trim().split("\n")
      resolve(JSON.parse(lines[lines.length - 1]!) as A)
    })
  })

// -------------------------------------------------------------------------------------------------
// Statistics
// -------------------------------------------------------------------------------------------------

/** Nearest-rank percentile (`p` in [0, 100]) of unsorted samples. */
export const percentile = (samples: ReadonlyArray<number>, p: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1]!
}

export const median = (samples: ReadonlyArray<number>): number => percentile(samples, 50)

/** Jain's fairness index: (Σx)² / (n·Σx²); 1 when all equal, 1/n when one takes everything. */
export const jain = (counts: ReadonlyArray<number>): number => {
  const sum = counts.reduce((a, b) => a + b, 0)
  const squares = counts.reduce((a, b) => a + b * b, 0)
  return squares === 0 ? Number.NaN : (sum * sum) / (counts.length * squares)
}

export const randomHex = (bytes: number): string => randomBytes(bytes).toString("hex")

// -------------------------------------------------------------------------------------------------
// Client-side command counting (round trips)
// -------------------------------------------------------------------------------------------------

const counts = new Map<string, number>()
/** Scripts (EVALSHA / EVAL / FCALL) sent by any connection of this process. */
let scriptsSent = 0
/** Commands whose first key names a Simba session (open / keepAlive / close): session upkeep. */
const sessionCounts = new Map<string, number>()

interface CommandLike {
  readonly name: string
  readonly args: ReadonlyArray<unknown>
}

let installed = false

/** The commands that run a script: by SHA, by its text, or as a function of a library (Simba's default). */
const scriptCommands = ["evalsha", "eval", "fcall"] as const
const isScriptCommand = (name: string): boolean => (scriptCommands as ReadonlyArray<string>).includes(name)

/** Wraps `Redis.prototype.sendCommand` once, counting commands per connection name. */
export const installRoundTripCounter = (): void => {
  if (installed) return
  installed = true
  const proto = Redis.prototype as unknown as {
    sendCommand: (this: Redis, command: CommandLike, stream?: unknown) => unknown
  }
  const original = proto.sendCommand
  proto.sendCommand = function(command, stream) {
    const name = this.options.connectionName ?? ""
    counts.set(name, (counts.get(name) ?? 0) + 1)
    const script = isScriptCommand(command.name)
    if (script) scriptsSent++
    // EVALSHA / EVAL / FCALL args: [sha | script text | function name, numkeys, key1, ...]
    if (script && String(command.args[2] ?? "").includes(":session:{")) {
      sessionCounts.set(name, (sessionCounts.get(name) ?? 0) + 1)
    }
    return original.call(this, command, stream)
  }
}

export interface RoundTrips {
  /** Every command sent by the connections whose name starts with the prefix. */
  readonly total: number
  /** Of which Simba session upkeep (openSession / keepAlive / closeSession scripts). */
  readonly session: number
}

/** Round trips so far of the connections whose name starts with `prefix`. */
export const roundTrips = (prefix: string): RoundTrips => {
  let total = 0
  let session = 0
  for (const [name, n] of counts) if (name.startsWith(prefix)) total += n
  for (const [name, n] of sessionCounts) if (name.startsWith(prefix)) session += n
  return { total, session }
}

export const roundTripsSince = (prefix: string, before: RoundTrips): RoundTrips => {
  const after = roundTrips(prefix)
  return { total: after.total - before.total, session: after.session - before.session }
}

// -------------------------------------------------------------------------------------------------
// Redis connections and server-side counting
// -------------------------------------------------------------------------------------------------

/** A plain ioredis connection named `name` (peers keep ioredis's defaults otherwise). */
export const newRedis = async (name: string): Promise<Redis> => {
  const redis = new Redis(redisUrl, { connectionName: name, lazyConnect: true })
  redis.on("error", () => {}) // reported through the failing command instead
  await redis.connect()
  return redis
}

export const quit = async (redis: Redis): Promise<void> => {
  try {
    await redis.quit()
  } catch {
    redis.disconnect()
  }
}

/** `total_commands_processed` of the server (this `INFO` itself included). */
export const serverCommands = async (monitor: Redis): Promise<number> => (await serverStats(monitor)).total

export interface ServerStats {
  /** `total_commands_processed` (this `INFO` included). */
  readonly total: number
  /** `EVALSHA` + `EVAL` + `FCALL` calls: only clients run them (a script cannot), so they count top-level scripts. */
  readonly scripts: number
  /** Scripts this process had sent when the reading was taken. */
  readonly ourScripts: number
  /**
   * The server's µs spent in `command` so far (`INFO commandstats`, lower-case name). A script's
   * (`evalsha`, `eval`, `fcall`) include the commands it runs, which are also counted under their own names.
   */
  readonly micros: (command: string) => number
}

/**
 * One `INFO stats commandstats`. Comparing the server's script calls with the scripts this process
 * sent tells whether other clients ran scripts meanwhile (they would inflate the server counts).
 */
export const serverStats = async (monitor: Redis): Promise<ServerStats> => {
  const ourScripts = scriptsSent
  const info = String(await monitor.call("INFO", "stats", "commandstats"))
  const total = /total_commands_processed:(\d+)/.exec(info)
  if (total === null) throw new Error("INFO stats has no total_commands_processed")
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
  const micros = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=\\d+,usec=(\\d+)`).exec(info)?.[1] ?? 0)
  return { total: Number(total[1]), scripts: scriptCommands.reduce((sum, command) => sum + calls(command), 0), ourScripts, micros }
}

/**
 * The server's µs between two readings in a lock's top-level commands: its scripts (`EVALSHA`, `FCALL`,
 * `EVAL`, each with the commands it runs) and the plain commands it sends itself (`plain`, e.g.
 * redis-semaphore's `SET NX`), which must be commands its scripts never run. Other clients' commands
 * are counted too: measure in a window nobody else uses (see `foreignScripts`).
 */
export const serverMicros = (before: ServerStats, after: ServerStats, plain: ReadonlyArray<string> = []): number =>
  [...scriptCommands, ...plain].reduce((sum, command) => sum + after.micros(command) - before.micros(command), 0)

/**
 * Scripts other clients ran between two readings: the server's script calls minus ours (a few of
 * ours may be in flight at a reading, hence a tolerance of 1% + 5).
 */
export const foreignScripts = (before: ServerStats, after: ServerStats): number => {
  const server = after.scripts - before.scripts
  const ours = after.ourScripts - before.ourScripts
  const foreign = server - ours
  return foreign > 5 + 0.01 * ours ? foreign : 0
}

/**
 * Commands the server executed between two readings, minus the one `INFO` of the second reading
 * (the first `INFO` was counted before its own reading: consecutive readings differ by 1).
 */
export const serverDelta = (before: number, after: number): number => after - before - 1

/** Deletes every key starting with one of `prefixes` (SCAN + UNLINK); returns how many. */
export const deleteKeys = async (redis: Redis, prefixes: ReadonlyArray<string>): Promise<number> => {
  let deleted = 0
  for (const prefix of prefixes) {
    let cursor = "0"
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000)
      cursor = next
      if (keys.length > 0) deleted += await redis.unlink(...keys)
    } while (cursor !== "0")
  }
  return deleted
}

// -------------------------------------------------------------------------------------------------
// A Simba client holding many leases
// -------------------------------------------------------------------------------------------------

/** `client` takes `count` locks named `<prefix>-<i>` and holds them until the scope closes. */
export const holdLocks = (
  client: SimbaClient,
  prefix: string,
  count: number,
  concurrency: number | "unbounded"
): Effect.Effect<void, unknown, Scope.Scope> =>
  Effect.forEach(Array.from({ length: count }, (_, i) => `${prefix}-${i}`), (name) => client.lock(name), {
    concurrency,
    discard: true
  })

/** How many of `client`'s elections lead now (a held lock counts as one). */
export const leadersOf = (client: SimbaClient): Effect.Effect<number> =>
  Effect.map(client.snapshot, (s) => s.elections.filter((e) => e.status === "LEADER").length)

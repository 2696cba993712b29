/**
 * What an idle client pays for the locks of others: a Simba client on the bench's key prefix, in a
 * process of its own, holding nothing and waiting for nothing (another replica of the same service),
 * while the bench process takes `LOCKS` locks on fresh names. Its process CPU over that window, per
 * lock, beside its CPU over an idle window as long (its renewals and timers: the floor).
 *
 * Before a lease's channel was subscribed only while a session waits for the lease, every client
 * listened to every lease channel by pattern, and each release woke every other client of the prefix.
 *
 * The child (`bystander <prefix>`) prints `ready`, then answers each `start` / `stop` line on stdin
 * with the CPU time (ms, user + system) between them, and exits on `exit`.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { LeaseBackend } from "../../src/LeaseBackend.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import * as Simba from "../../src/Simba.js"
import { redisUrl, sleep } from "../util.js"

const thisFile = fileURLToPath(import.meta.url)
const LOCKS = 2000

export interface BystanderResult {
  /** The bystander's process CPU per lock another process took, µs. */
  readonly cpuPerLock: number
  /** Its CPU over an idle window as long, per lock of the busy window, µs. */
  readonly idlePerLock: number
  readonly locks: number
}

/** A Simba client on `prefix` (as the bench's `simbaClient`), in `scope`. */
const client = (prefix: string, connectionName: string, scope: Scope.Scope) =>
  Effect.runPromise(Scope.extend(
    Effect.flatMap(
      RedisBackend.make({ url: redisUrl, keyPrefix: `${prefix}:simba`, lockDelay: 0, connectionName }),
      (backend) => Simba.make({ leaseDuration: "3 seconds" }).pipe(Effect.provideService(LeaseBackend, backend))
    ),
    scope
  ))

/** Runs the bystander in a process of its own while this process takes `LOCKS` locks. */
export const bystanderSimba = async (prefix: string): Promise<BystanderResult> => {
  const child = spawn(process.execPath, [...process.execArgv, thisFile, "bystander", prefix], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  // The child's logs share its stdout: skip to the next line that is an answer.
  const next = async (isAnswer: (line: string) => boolean) => {
    for (;;) {
      const line = await lines.next()
      if (line.done === true) throw new Error("bystander: exited early")
      if (isAnswer(line.value)) return line.value
    }
  }
  const isNumber = (line: string) => /^[0-9.]+$/.test(line)
  const window = async (during: () => Promise<void>) => {
    child.stdin.write("start\n")
    await sleep(50) // the child has read it
    await during()
    child.stdin.write("stop\n")
    return Number(await next(isNumber))
  }
  const scope = Effect.runSync(Scope.make())
  try {
    await next((line) => line === "ready")
    const simba = await client(prefix, `${prefix}-bystander-driver`, scope)
    await Effect.runPromise(Effect.forEach(Array.from({ length: 200 }, (_, i) => `warm-${i}`), (name) => simba.withLock(name, Effect.void)))
    let busyMs = 0
    const busyCpu = await window(async () => {
      const t0 = performance.now()
      await Effect.runPromise(Effect.forEach(Array.from({ length: LOCKS }, (_, i) => `b-${i}`), (name) => simba.withLock(name, Effect.void)))
      busyMs = performance.now() - t0
    })
    const idleCpu = await window(() => sleep(busyMs))
    return { cpuPerLock: (busyCpu * 1000) / LOCKS, idlePerLock: (idleCpu * 1000) / LOCKS, locks: LOCKS }
  } finally {
    child.stdin.write("exit\n")
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

if (process.argv[1] === thisFile && process.argv[2] === "bystander") {
  const prefix = process.argv[3]!
  const scope = Effect.runSync(Scope.make())
  await client(prefix, `${prefix}-bystander`, scope)
  let before = process.cpuUsage()
  console.log("ready")
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === "start") before = process.cpuUsage()
    else if (line === "stop") {
      const used = process.cpuUsage(before)
      console.log(String((used.user + used.system) / 1000))
    } else if (line === "exit") break
  }
  await Effect.runPromise(Scope.close(scope, Exit.void))
  process.exit(0)
}

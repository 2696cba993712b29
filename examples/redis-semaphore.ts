/**
 * A semaphore on Redis limiting concurrent jobs across processes: at most 2 exports run at once,
 * whichever of the 3 worker processes runs them.
 *
 *   npx tsx examples/redis-semaphore.ts
 *
 * The program starts 3 workers (this file with `--worker`, each its own process and Simba client).
 * Each runs 4 jobs, each job holding 1 of the 2 permits of "nightly-export" while it runs. Around its
 * job a worker counts the jobs running in a Redis counter and records the highest count it saw, so the
 * parent can check that the limit held across processes. Waiting workers are served in arrival order,
 * and are told when a permit frees (no polling).
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Effect, Redacted } from "effect"
import { Redis } from "ioredis"
import { Simba } from "simba"
import { RedisBackend } from "simba/redis"

const url = Redacted.make(process.env.SIMBA_REDIS_URL ?? "redis://127.0.0.1:6379")
const run = process.env.SIMBA_EXAMPLE_RUN ?? `${process.pid}`
const running = `simba-example:exports:${run}:running`
const most = `simba-example:exports:${run}:most`

// Counts a job in, and records the highest count (one script: atomic on the server).
const enter = `
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n`

const worker = (id: string) =>
  Effect.gen(function*() {
    const redis = yield* Effect.acquireRelease(
      Effect.sync(() => new Redis(Redacted.value(url))),
      (client) => Effect.promise(() => client.quit())
    )
    for (let job = 1; job <= 4; job++) {
      yield* Simba.withPermits("nightly-export", 1, (term) =>
        Effect.gen(function*() {
          const now = yield* Effect.tryPromise(() => redis.eval(enter, 2, running, most))
          console.log(`worker ${id}: job ${job} starts (token ${term.token}, ${String(now)} running)`)
          yield* Effect.sleep("100 millis")
          yield* Effect.tryPromise(() => redis.decr(running))
        }), { limit: 2 })
    }
  }).pipe(
    Effect.scoped,
    Effect.provide(Simba.layer({ leaseDuration: "5 seconds" })),
    Effect.provide(RedisBackend.layer({ url }))
  )

/** Runs this file as a worker process; resolves with its exit code. */
const startWorker = (id: number) =>
  new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--worker", String(id)], {
      env: { ...process.env, SIMBA_EXAMPLE_RUN: run },
      stdio: ["ignore", "inherit", "inherit"]
    })
    child.on("exit", (code) => resolve(code ?? 1))
  })

const parent = Effect.gen(function*() {
  const codes = yield* Effect.promise(() => Promise.all([1, 2, 3].map(startWorker)))
  const redis = new Redis(Redacted.value(url))
  const highest = Number(yield* Effect.promise(() => redis.get(most)))
  yield* Effect.promise(() => redis.del(running, most))
  yield* Effect.promise(() => redis.quit())
  console.log(`workers exited ${codes.join(", ")}; at most ${highest} jobs ran at once (limit 2)`)
  return codes.every((code) => code === 0) && highest === 2
})

const worked = process.argv[2] === "--worker"
  ? Effect.as(worker(process.argv[3] ?? "?"), true)
  : parent

Effect.runPromise(worked).then((ok) => process.exit(ok ? 0 : 1), (error) => {
  console.error(error)
  process.exit(1)
})

/**
 * A read-write lock on Redis around a cache refresh: readers never see a refresh half done.
 *
 *   npx tsx examples/redis-rw-cache.ts
 *
 * The cache is two Redis keys written one after the other (a version and the rates of that version),
 * as a real refresh writes several things. Four readers read both under the read lock of "rates"
 * (any number of them together); a refresher rewrites both under the write lock (alone; it is
 * `withLock`). A reader that saw one key of a refresh and the other key of another would report a
 * torn read. Readers arriving while the refresher waits queue behind it, so refreshes are not starved.
 * Each reader and the refresher is its own client (its own session), as separate processes would be.
 */
import { Effect, Redacted } from "effect"
import { Redis } from "ioredis"
import { Simba } from "simba"
import { RedisBackend } from "simba/redis"

const url = Redacted.make(process.env.SIMBA_REDIS_URL ?? "redis://127.0.0.1:6379")
const version = `simba-example:rates:${process.pid}:version`
const rates = `simba-example:rates:${process.pid}:rates`

const withClient = <A, E>(use: (simba: Simba.SimbaClient, redis: Redis) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const simba = yield* Simba.make({ leaseDuration: "5 seconds" })
    const redis = yield* Effect.acquireRelease(
      Effect.sync(() => new Redis(Redacted.value(url))),
      (client) => Effect.promise(() => client.quit())
    )
    return yield* use(simba, redis)
  }).pipe(Effect.scoped, Effect.provide(RedisBackend.layer({ url })))

const refresher = withClient((simba, redis) =>
  Effect.forEach([1, 2, 3, 4, 5], (n) =>
    simba.withWriteLock("rates", (term) =>
      Effect.gen(function*() {
        yield* Effect.tryPromise(() => redis.set(version, n))
        // A refresh takes a while between its writes: a reader must never see this moment.
        yield* Effect.sleep("30 millis")
        yield* Effect.tryPromise(() => redis.set(rates, `rates of version ${n}`))
        console.log(`refreshed to version ${n} (token ${term.token})`)
      })).pipe(Effect.zipRight(Effect.sleep("40 millis"))), { discard: true }))

const reader = (id: number) =>
  withClient((simba, redis) =>
    Effect.gen(function*() {
      let reads = 0
      let torn = 0
      for (let i = 0; i < 15; i++) {
        yield* simba.withReadLock("rates", Effect.gen(function*() {
          const [v, r] = yield* Effect.tryPromise(() => Promise.all([redis.get(version), redis.get(rates)]))
          reads++
          if (v !== null && r !== `rates of version ${v}`) torn++
        }))
        yield* Effect.sleep("10 millis")
      }
      console.log(`reader ${id}: ${reads} reads, ${torn} torn`)
      return torn
    }))

const program = Effect.gen(function*() {
  const redis = new Redis(Redacted.value(url))
  yield* Effect.promise(() => redis.mset(version, 0, rates, "rates of version 0"))
  const [torn] = yield* Effect.all([
    Effect.map(Effect.all([reader(1), reader(2), reader(3), reader(4)], { concurrency: "unbounded" }), (t) => t.reduce((a, b) => a + b, 0)),
    refresher
  ], { concurrency: "unbounded" })
  yield* Effect.promise(() => redis.del(version, rates))
  yield* Effect.promise(() => redis.quit())
  console.log(`torn reads: ${torn} (expected 0)`)
  return torn === 0
})

Effect.runPromise(program).then((ok) => process.exit(ok ? 0 : 1), (error) => {
  console.error(error)
  process.exit(1)
})

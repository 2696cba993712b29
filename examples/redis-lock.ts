/**
 * A fenced lock on Redis: several workers increment one counter in a store that refuses stale tokens.
 *
 *   npx tsx examples/redis-lock.ts
 *
 * Each `withLock` body gets the term; its token rises with every acquisition, across every client of
 * this Redis. The store below (a Lua script) accepts a write only with a token at least as high as the
 * highest it has seen, so even a worker that was paused past its lease cannot overwrite newer data.
 * The body also checks `term.ensureValid()` before writing, which fails fast after such a pause.
 */
import { Effect, Redacted } from "effect"
import { Redis } from "ioredis"
import { Simba } from "simba"
import { RedisBackend } from "simba/redis"

const fencedIncrement = `
local top = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < top then return -1 end
redis.call('HSET', KEYS[1], 'token', ARGV[1])
return redis.call('HINCRBY', KEYS[1], 'value', 1)`

const url = Redacted.make(process.env.SIMBA_REDIS_URL ?? "redis://127.0.0.1:6379")
const store = `simba-example:counter:${process.pid}`

const worker = (id: number) =>
  Effect.gen(function*() {
    // Each worker is its own client (its own session), as separate processes would be.
    const simba = yield* Simba.make({ leaseDuration: "5 seconds" })
    const redis = yield* Effect.acquireRelease(
      Effect.sync(() => new Redis(Redacted.value(url))),
      (client) => Effect.promise(() => client.quit())
    )
    for (let i = 0; i < 5; i++) {
      yield* simba.withLock("example-counter", (term) =>
        Effect.gen(function*() {
          yield* term.ensureValid("100 millis")
          const value = yield* Effect.tryPromise(() => redis.eval(fencedIncrement, 1, store, term.token.toString()))
          console.log(`worker ${id}: token ${term.token} -> counter ${value}`)
        }))
    }
  }).pipe(Effect.scoped, Effect.provide(RedisBackend.layer({ url })))

const program = Effect.gen(function*() {
  yield* Effect.all([worker(1), worker(2), worker(3)], { concurrency: "unbounded" })
  const redis = new Redis(Redacted.value(url))
  const final = yield* Effect.promise(() => redis.hget(store, "value"))
  yield* Effect.promise(() => redis.del(store))
  yield* Effect.promise(() => redis.quit())
  console.log(`final counter: ${final} (expected 15)`)
})

Effect.runPromise(program).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})

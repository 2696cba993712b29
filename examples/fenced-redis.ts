/**
 * A fenced Redis write: a lock holder that stalled past its lease wakes up and writes with the term it
 * still holds; the script on Redis refuses it, because a newer term has written that key since.
 *
 *   npx tsx examples/fenced-redis.ts          (Redis on 127.0.0.1:6379, or SIMBA_REDIS_URL)
 *
 * `FencedRedis.set(redis, key, term, value)` is one Lua script: it stores the value and the token
 * together, only when the token is not below the one stored beside the value. The locks come from
 * the same Redis (`RedisBackend`), so tokens rise across every process that uses it.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { Redis } from "ioredis"
import { Simba } from "simba"
import { RedisBackend } from "simba/redis"
// In your app: import * as FencedRedis from "simba/fencing/redis"
import * as FencedRedis from "../src/fencing/FencedRedis.js"

const url = Redacted.make(process.env.SIMBA_REDIS_URL ?? "redis://127.0.0.1:6379")
const key = `simba-example:fenced:${process.pid}`

const program = Effect.gen(function*() {
  const simba = yield* Simba.make({ leaseDuration: "5 seconds" })
  const redis = yield* Effect.acquireRelease(
    Effect.sync(() => new Redis(Redacted.value(url))),
    (client) => Effect.promise(() => client.del(key).then(() => client.quit()))
  )

  // Worker A takes the lock and writes, then stalls holding on to its term.
  const termA = yield* simba.withLock("example-fenced-redis", (term) =>
    Effect.as(FencedRedis.set(redis, key, term, "written by a"), term))
  console.log(`A wrote with token ${termA.token}, then stalled`)

  // Meanwhile B holds the lock: a new term, a higher token.
  yield* simba.withLock("example-fenced-redis", (term) =>
    Effect.zipRight(
      FencedRedis.set(redis, key, term, "written by b"),
      Effect.sync(() => console.log(`B wrote with token ${term.token}`))
    ))

  // A wakes up and writes with the term it still has.
  const late = yield* Effect.either(FencedRedis.set(redis, key, termA, "written by a, late"))
  if (Either.isLeft(late) && late.left._tag === "FencedWriteRejectedError") {
    console.log(`A's late write was refused: ${late.left.message}`)
  } else {
    console.log("A's late write was NOT refused: this should never happen")
  }
  const stored = yield* FencedRedis.get(redis, key)
  console.log(Option.match(stored, {
    onNone: () => "nothing stored",
    onSome: ({ token, value }) => `stored: "${value}" with token ${token}`
  }))
})

program.pipe(Effect.scoped, Effect.provide(RedisBackend.layer({ url })), Effect.runPromise).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)

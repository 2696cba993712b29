// The fencing entry points load in a project without any driver: the core and the HTTP helpers need
// only effect and @effect/platform, the Redis helper only ioredis's types (the app passes its client).
// A stale token is refused by the in-memory fence store.
import { Effect, Either } from "effect"
import * as Fencing from "simba/fencing"
import * as FencedHttp from "simba/fencing/http"
import * as FencedRedis from "simba/fencing/redis"

const program = Effect.gen(function* () {
  const store = yield* Fencing.memoryStore
  yield* store.fenced("ledger", 7n, Effect.void)
  const stale = yield* Effect.either(store.fenced("ledger", 6n, Effect.void))
  const header = yield* FencedHttp.headerValue("ledger", 7n)
  return {
    refused: Either.isLeft(stale) ? stale.left._tag : "accepted",
    header,
    redisScript: typeof FencedRedis.setScript
  }
})

console.log(JSON.stringify(await Effect.runPromise(program)))

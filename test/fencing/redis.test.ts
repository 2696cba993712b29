/**
 * `simba/fencing/redis` on the real servers: the single node on 127.0.0.1:6379 and the 3-master
 * cluster on 127.0.0.1:7000-7002 (both started by `scripts/services.sh`). Keys are unique per test
 * and deleted after it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import type * as Scope from "effect/Scope"
import { Cluster, Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import * as FencedRedis from "../../src/fencing/FencedRedis.js"
import { FencedStoreError, FencedWriteRejectedError, InvalidFenceError } from "../../src/fencing/Fencing.js"

const unique = (prefix: string) => `simba-test:fenced:${prefix}:${randomBytes(6).toString("hex")}`

const connect = (make: () => FencedRedis.RedisClient): Effect.Effect<FencedRedis.RedisClient, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.sync(make), (client) => Effect.promise(() => client.quit()))

const single = connect(() => new Redis({ host: "127.0.0.1", port: 6379, lazyConnect: false }))
const cluster = connect(() => new Cluster([7000, 7001, 7002].map((port) => ({ host: "127.0.0.1", port }))))

/** A fresh key, deleted when the test's scope closes. */
const freshKey = (redis: FencedRedis.RedisClient, prefix: string) =>
  Effect.acquireRelease(Effect.succeed(unique(prefix)), (key) => Effect.promise(() => redis.del(key)))

const rejection = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.flip(effect).pipe(Effect.map((error) => {
    expect(error).toBeInstanceOf(FencedWriteRejectedError)
    return error as FencedWriteRejectedError
  }))

const redisCases = (name: string, client: Effect.Effect<FencedRedis.RedisClient, never, Scope.Scope>) =>
  describe(`FencedRedis on ${name}`, () => {
    it.live("a paused writer's late write is refused after a newer token wrote", () =>
      Effect.gen(function*() {
        const redis = yield* client
        const key = yield* freshKey(redis, "orders")
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.none())
        yield* FencedRedis.set(redis, key, 41n, "former")
        // the former holder pauses; its successor writes with the next term's token
        yield* FencedRedis.set(redis, key, { token: 42n }, "successor")
        // the former holder wakes up and writes with the token it still has
        const error = yield* rejection(FencedRedis.set(redis, key, 41n, "stale"))
        expect({ resource: error.resource, token: error.token, highest: error.highest })
          .toEqual({ resource: key, token: 41n, highest: 42n })
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.some({ value: "successor", token: 42n }))
      }).pipe(Effect.scoped))

    it.live("the same term may write twice (equal token), and a higher one after it", () =>
      Effect.gen(function*() {
        const redis = yield* client
        const key = yield* freshKey(redis, "orders")
        yield* FencedRedis.set(redis, key, 7n, "first")
        yield* FencedRedis.set(redis, key, 7n, "second")
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.some({ value: "second", token: 7n }))
        yield* FencedRedis.set(redis, key, 8n, "third")
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.some({ value: "third", token: 8n }))
      }).pipe(Effect.scoped))

    it.live("tokens compare exactly: by length first, and beyond 2^53 where Lua numbers would round", () =>
      Effect.gen(function*() {
        const redis = yield* client
        const key = yield* freshKey(redis, "big")
        yield* FencedRedis.set(redis, key, 10n, "ten")
        yield* rejection(FencedRedis.set(redis, key, 9n, "nine"))
        const big = 2n ** 53n + 1n // as a double, equal to 2^53
        yield* FencedRedis.set(redis, key, big, "big")
        const error = yield* rejection(FencedRedis.set(redis, key, 2n ** 53n, "rounded"))
        expect(error.highest).toBe(big)
        yield* FencedRedis.set(redis, key, 2n ** 63n - 1n, "largest")
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.some({ value: "largest", token: 2n ** 63n - 1n }))
      }).pipe(Effect.scoped))

    it.live("many concurrent writers on separate connections: the highest token wins, every refusal saw a higher one", () =>
      Effect.gen(function*() {
        const redis = yield* client
        const key = yield* freshKey(redis, "race")
        const writers = yield* Effect.all(Arr.replicate(client, 4))
        const tokens = Arr.fromIterable(yield* Random.shuffle(Arr.range(1, 32).map((n) => BigInt(n))))
        const outcomes = yield* Effect.all(
          tokens.map((token, i) => Effect.either(FencedRedis.set(writers[i % writers.length]!, key, token, `v${token}`))),
          { concurrency: "unbounded" }
        )
        const refused = outcomes.flatMap((o) => (o._tag === "Left" ? [o.left] : []))
        for (const error of refused) {
          expect(error).toBeInstanceOf(FencedWriteRejectedError)
          if (error instanceof FencedWriteRejectedError) expect(error.highest).toBeGreaterThan(error.token)
        }
        expect(refused.length).toBeLessThan(32)
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.some({ value: "v32", token: 32n }))
      }).pipe(Effect.scoped))

    it.live("bad input never reaches Redis; a key of another type is a FencedStoreError", () =>
      Effect.gen(function*() {
        const redis = yield* client
        const key = yield* freshKey(redis, "input")
        for (const token of [0n, -5n, 2n ** 63n]) {
          expect(yield* Effect.flip(FencedRedis.set(redis, key, token, "x"))).toBeInstanceOf(InvalidFenceError)
        }
        expect(yield* Effect.flip(FencedRedis.set(redis, "", 1n, "x"))).toBeInstanceOf(InvalidFenceError)
        expect(yield* FencedRedis.get(redis, key)).toEqual(Option.none())
        yield* Effect.promise(() => redis.set(key, "plain string"))
        const wrongType = yield* Effect.flip(FencedRedis.set(redis, key, 1n, "x"))
        expect(wrongType).toBeInstanceOf(FencedStoreError)
        expect(String((wrongType as FencedStoreError).cause)).toContain("WRONGTYPE")
      }).pipe(Effect.scoped))
  })

describe("simba/fencing/redis", () => {
  redisCases("a single node", single)
  redisCases("Redis Cluster", cluster)
})

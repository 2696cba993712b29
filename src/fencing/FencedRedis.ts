/**
 * Fenced Redis writes (`simba/fencing/redis`), with an ioredis client you pass in (`Redis` or
 * `Cluster`; this module only imports its types, so it loads no driver of its own).
 *
 * A fenced key is a hash `{ value, token }`. `set` runs one Lua script that compares the caller's
 * token with the stored one and stores the value and the token together, only when the token is not
 * below the stored one; otherwise it fails with `FencedWriteRejectedError` and nothing changes. Being
 * one script, the check and the write are atomic: of two racing writers, the lower token never lands
 * after the higher one. Tokens are compared as decimal strings, so they are exact at any size (Lua
 * numbers are doubles). The script touches one key, so it runs unchanged on Redis Cluster.
 *
 * ```ts
 * import * as FencedRedis from "simba/fencing/redis"
 *
 * yield* Simba.withLock("orders", (term) => FencedRedis.set(redis, "orders:42:status", term, "charged"))
 * const current = yield* FencedRedis.get(redis, "orders:42:status")   // Option<{ value, token }>
 * ```
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Cluster, Redis } from "ioredis"
import { createHash } from "node:crypto"
import { type Fence, FencedStoreError, FencedWriteRejectedError, InvalidFenceError, validate } from "./Fencing.js"

export { type Fence, FencedStoreError, FencedWriteRejectedError, InvalidFenceError } from "./Fencing.js"

/** The client the helpers call: an ioredis `Redis` or `Cluster`. */
export type RedisClient = Redis | Cluster

/** A fenced key's content: the last accepted value and the token it was written with. */
export interface FencedValue {
  readonly value: string
  readonly token: bigint
}

/**
 * KEYS[1] the fenced hash; ARGV[1] the token (decimal, no leading zeros); ARGV[2] the value.
 * Answers `{1, token}` when stored, `{0, stored}` when refused.
 */
export const setScript = `
local function below(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local stored = redis.call('HGET', KEYS[1], 'token')
if stored and below(ARGV[1], stored) then return {0, stored} end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'token', ARGV[1])
return {1, ARGV[1]}
`

const setScriptSha = createHash("sha1").update(setScript).digest("hex")

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

/** Redis keys are binary-safe: any non-empty key up to 1,024 characters is accepted. */
const keyRules = { maxLength: 1024 } as const

/** `EVALSHA`, then `EVAL` (which caches it) when the server does not know the script yet. */
const runSet = (redis: RedisClient, key: string, token: string, value: string): Promise<unknown> =>
  redis.evalsha(setScriptSha, 1, key, token, value).catch((error: unknown) =>
    isNoScript(error) ? redis.eval(setScript, 1, key, token, value) : Promise.reject(error)
  )

const SetReply = Schema.Tuple(Schema.Literal(0, 1), Schema.BigInt)

/**
 * Stores `value` under `key` with the fence's token, if the token is not below the one stored there
 * (equal passes: one term may write many times). Fails with `FencedWriteRejectedError { resource: key,
 * token, highest }` when refused, `FencedStoreError` when Redis fails (the write may then have applied
 * or not, as with any Redis call that loses its reply).
 */
export const set = (
  redis: RedisClient,
  key: string,
  fence: Fence,
  value: string
): Effect.Effect<void, FencedWriteRejectedError | InvalidFenceError | FencedStoreError> =>
  Effect.gen(function*() {
    const token = yield* validate(key, fence, keyRules)
    const raw = yield* Effect.tryPromise({
      try: () => runSet(redis, key, token.toString(), value),
      catch: (cause) => new FencedStoreError({ resource: key, operation: "set", cause })
    })
    const [applied, highest] = yield* Schema.decodeUnknown(SetReply)(raw).pipe(
      Effect.mapError((cause) => new FencedStoreError({ resource: key, operation: "set", cause }))
    )
    if (applied === 0) {
      return yield* new FencedWriteRejectedError({ resource: key, token, highest })
    }
  }).pipe(Effect.withSpan("FencedRedis.set", { attributes: { key } }))

const GetReply = Schema.Tuple(Schema.NullOr(Schema.String), Schema.NullOr(Schema.BigInt))

/** The value and token stored under `key` by `set`, if any. */
export const get = (
  redis: RedisClient,
  key: string
): Effect.Effect<Option.Option<FencedValue>, FencedStoreError> =>
  Effect.gen(function*() {
    const raw = yield* Effect.tryPromise({
      try: () => redis.hmget(key, "value", "token"),
      catch: (cause) => new FencedStoreError({ resource: key, operation: "get", cause })
    })
    const [value, token] = yield* Schema.decodeUnknown(GetReply)(raw).pipe(
      Effect.mapError((cause) => new FencedStoreError({ resource: key, operation: "get", cause }))
    )
    if (value === null && token === null) return Option.none()
    if (value === null || token === null) {
      return yield* new FencedStoreError({
        resource: key,
        operation: "get",
        cause: "the key holds a value without a token (or a token without a value): not written by FencedRedis.set"
      })
    }
    return Option.some({ value, token })
  }).pipe(Effect.withSpan("FencedRedis.get", { attributes: { key } }))

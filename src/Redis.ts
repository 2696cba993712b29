/**
 * `simba/redis`: the Redis backend (single node or Cluster, through ioredis) and `Simba` on it.
 * ioredis is an optional peer, loaded only when a layer of this module is built.
 */
import * as Layer from "effect/Layer"
import * as RedisBackend from "./layers/redis/RedisBackend.js"
import * as Simba from "./Simba.js"

export * as RedisBackend from "./layers/redis/RedisBackend.js"

/**
 * `Simba` on Redis: `SIMBA_REDIS_URL` (default `redis://127.0.0.1:6379`), `SIMBA_REDIS_CLUSTER`
 * (`host:port,...` for a Redis Cluster), `SIMBA_REDIS_KEY_PREFIX`, `SIMBA_REDIS_LOCK_DELAY`,
 * `SIMBA_REDIS_ALLOW_EVICTION_POLICY`, `SIMBA_REDIS_FUNCTIONS`, plus the `SIMBA_*` timing settings.
 */
export const SimbaRedisLive = Simba.layerConfig.pipe(Layer.provide(RedisBackend.layerConfig(RedisBackend.config)))

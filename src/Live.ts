/**
 * Ready-made layers providing `Simba`, each configured from the environment: the timing from
 * `SIMBA_*` and the backend's own settings. `Effect.provide(SimbaRedisLive)` is all a user writes.
 */
import * as Layer from "effect/Layer"
import * as MemoryBackend from "./layers/Memory.js"
import * as RedisBackend from "./layers/Redis.js"
import * as Simba from "./Simba.js"

/** `Simba` on a fresh in-process backend: the embedded default for demos and single-process tests. */
export const SimbaMemoryLive = Simba.layerConfig.pipe(Layer.provide(MemoryBackend.layer()))

/**
 * `Simba` on Redis: `SIMBA_REDIS_URL` (default `redis://127.0.0.1:6379`), `SIMBA_REDIS_CLUSTER`
 * (`host:port,...` for a Redis Cluster), `SIMBA_REDIS_KEY_PREFIX`, plus the `SIMBA_*` timing settings.
 */
export const SimbaRedisLive = Simba.layerConfig.pipe(Layer.provide(RedisBackend.layerConfig(RedisBackend.config)))

/**
 * Ready-made layers providing `Simba`, each configured from the environment: the timing from
 * `SIMBA_*` and the backend's own settings. `Effect.provide(SimbaMemoryLive)` is all a user writes.
 * Each backend's live layer sits beside the backend (`SimbaRedisLive` in `layers/redis/`).
 */
import * as Layer from "effect/Layer"
import * as MemoryBackend from "./layers/Memory.js"
import * as Simba from "./Simba.js"

/** `Simba` on a fresh in-process backend: the embedded default for demos and single-process tests. */
export const SimbaMemoryLive = Simba.layerConfig.pipe(Layer.provide(MemoryBackend.layer()))

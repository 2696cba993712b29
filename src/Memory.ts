/**
 * `simba/memory`: the in-process backend and `Simba` on it. It needs no driver, so the root `simba`
 * exports the same two names; this subpath exists so every backend is imported the same way.
 */
import * as Layer from "effect/Layer"
import * as MemoryBackend from "./layers/Memory.js"
import * as Simba from "./Simba.js"

export * as MemoryBackend from "./layers/Memory.js"

/** `Simba` on a fresh in-process backend: the embedded default for demos and single-process tests. */
export const SimbaMemoryLive = Simba.layerConfig.pipe(Layer.provide(MemoryBackend.layer()))

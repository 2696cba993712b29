// Diagnostic (not part of `npm run bench`): how many Effect runtime operations one uncontended
// `withLock` costs, on the memory backend (no I/O: the count is exact and the same on every run).
// Each operation is a step of Effect's run loop (an allocation and a call through the tracer); on
// Redis the same path runs after every socket wake-up, so the count is the client's CPU per lock in
// the one unit that does not drift with the machine's speed.
//
//   npm run build && node bench/floors/runtime-ops.mjs
//
// It counts by wrapping the run loop's op handlers on Effect's `FiberRuntime` prototype (an internal
// module, reached by its file path): a count for this Effect version, not an API.
import * as Effect from "effect/Effect"
import { FiberRuntime } from "../../node_modules/effect/dist/esm/internal/fiberRuntime.js"
import { LeaseBackend } from "../../dist/LeaseBackend.js"
import * as Memory from "../../dist/layers/Memory.js"
import * as Simba from "../../dist/Simba.js"

const opCodes = [
  "Tag", "Sync", "Success", "Failure", "WithRuntime", "UpdateRuntimeFlags", "OnSuccess", "OnFailure",
  "OnSuccessAndFailure", "Async", "Yield", "While", "Iterator", "Commit"
]
let counting = false
let ops = 0
const fibers = new Set()
for (const op of opCodes) {
  const handle = FiberRuntime.prototype[op]
  FiberRuntime.prototype[op] = function(instruction) {
    if (counting) {
      ops++
      fibers.add(this)
    }
    return handle.call(this, instruction)
  }
}

const N = 2000
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const backend = yield* Memory.make()
  const simba = yield* Simba.make({ leaseDuration: "3 seconds", logLevel: "None" }).pipe(
    Effect.provideService(LeaseBackend, backend)
  )
  const names = (label) => Array.from({ length: N }, (_, i) => `${label}-${i}`)
  const run = (label) => Effect.forEach(names(label), (name) => simba.withLock(name, Effect.void), { discard: true })
  yield* run("warm-up")
  counting = true
  yield* run("counted")
  counting = false
  // The counting loop's own fiber is one of them; `forEach` costs it ~2 operations per lock.
  console.log(
    `runtime operations per withLock (memory backend, ${N} fresh names): ${(ops / N).toFixed(1)}; ` +
      `fibers that ran per withLock: ${((fibers.size - 1) / N).toFixed(2)}`
  )
})))

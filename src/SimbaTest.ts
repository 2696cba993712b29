/**
 * `SimbaTest`: the fault-injection kit for testing your own leader-only code, with `TestClock`, the
 * in-memory backend and no servers.
 *
 * - A **network** is one shared store (a fresh in-memory backend, or any `LeaseBackendService`).
 * - `makeClient(net, config)` builds a Simba client whose backend calls go through its own faulty
 *   link, and returns the client with its `faults` remote control: `pause`/`resume`, `slow`, `fail`,
 *   `drop`, `partition`/`heal`, `expireSession`, `notify`. Faults affect that client only; `calls`
 *   lists every backend call it made.
 * - `FencedStore` is a reference storage service that accepts a write only with a fencing token at
 *   least as high as the highest it has seen, and remembers every accepted and rejected write.
 * - `recorder` records who led what, when (per client, from terms; a semaphore's or read lock's holds
 *   with what they hold), and `checkNoOverlap` checks that
 *   no two terms of a name overlapped in time and that tokens rose.
 * - `advance` moves `TestClock` forward in steps, so every client's chain of timers and backend calls
 *   runs at the right virtual instant and has finished when it returns.
 *
 * A leader paused past its lease, and the fence that stops it:
 *
 * ```ts
 * import { Effect, Fiber } from "effect"
 * import { SimbaTest } from "simba/test"
 *
 * it.scoped("a stalled leader cannot write", () =>           // it.scoped provides TestClock
 *   Effect.gen(function*() {
 *     const net = yield* SimbaTest.network
 *     const [a, b] = yield* SimbaTest.makeClients(net, 2, { leaseDuration: "3 seconds" })
 *     const store = yield* SimbaTest.FencedStore.make<string>()
 *
 *     const termA = yield* a.client.lock("orders")            // a holds the lock
 *     yield* a.faults.pause()                                 // a stalls: its renewals never arrive
 *     const bWrites = yield* Effect.fork(b.client.withLock("orders", (term) => store.write(term, "b")))
 *     yield* SimbaTest.advance("5 seconds")                   // a's lease runs out, b takes over
 *     expect(yield* Fiber.join(bWrites)).toBe(true)
 *     expect(yield* termA.isValid).toBe(false)                // a knows without any I/O
 *     expect(yield* store.write(termA, "a, late")).toBe(false) // and the fence refuses it anyway
 *   }))
 * ```
 *
 * Your own leader-only code, checked for overlap across clients and faults:
 *
 * ```ts
 * const recorder = yield* SimbaTest.recorder
 * const clients = yield* SimbaTest.makeClients(net, 3, config)
 * for (const [i, c] of clients.entries()) {
 *   yield* Effect.forkScoped(c.client.runWhileLeader("billing", recorder.track(`client-${i}`, billingLoop)))
 * }
 * yield* SimbaTest.advance("10 seconds")
 * yield* clients[0].faults.partition                          // cut the leader off ...
 * yield* SimbaTest.advance("10 seconds")
 * yield* recorder.assertNoOverlap                             // ... never two leaders at once
 * ```
 *
 * All delays use Effect's `Clock`, so `TestClock` drives them. With the live clock the kit works the
 * same in real time (`advance` excepted: it moves `TestClock`), over any backend, a real server
 * included (`networkOver(backend)`, `faulty(backend)`).
 */
export { advance } from "./testkit/advance.js"
export { type Fence, FencedStore, type FencedWrite, StaleTokenError } from "./testkit/fencedStore.js"
export {
  type CallRecord,
  type FaultOptions,
  type Faults,
  faulty,
  type FaultyBackend,
  makeClient,
  makeClients,
  type Network,
  network,
  networkFromContext,
  networkOver,
  networkWith,
  type Operation,
  type SlowOptions,
  type TestClient
} from "./testkit/network.js"
export {
  checkNoOverlap,
  formatViolation,
  type LeaderInterval,
  type LeaderRecorder,
  LeadershipViolation,
  recorder,
  type SharedHold,
  Violation
} from "./testkit/recorder.js"

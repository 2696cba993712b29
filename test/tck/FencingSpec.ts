/**
 * TCK: fencing (SPEC section 11). Tokens strictly increase across terms and clients, a stale release
 * is a no-op, and a fenced resource that remembers the largest token it saw rejects a former holder.
 *
 * This file holds the backend-level part; the client-level cases (terms, `withLock`, a paused leader
 * against `SimbaTest.FencedStore`) are `clientFencing` in `ClientCases.ts`, registered here as `client`.
 */
import { describe, expect } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import type { LeaseBackend } from "../../src/LeaseBackend.js"
import {
  acquireGranted,
  backend,
  expectHeldBy,
  heldLeases,
  open,
  type Tck,
  type TckOptions,
  uniqueName
} from "./TckHarness.js"
import { clientFencing } from "./ClientCases.js"
import * as TckHarness from "./TckHarness.js"

export type { TckOptions as FencingSpecOptions } from "./TckHarness.js"

/** Registers the fencing suites for the backend built by `layer`. */
export const FencingSpec = (
  name: string,
  layer: Layer.Layer<LeaseBackend, unknown>,
  options: TckOptions
): void => {
  const tck = TckHarness.make(layer, options)
  describe(`FencingSpec(${name})`, () => {
    describe("backend", () => backendFencing(tck))
    describe("client", () => clientFencing(tck))
  })
}

/**
 * A resource guarded by fencing tokens, as a storage service would keep it: it remembers the largest
 * token it has accepted and rejects a write carrying a smaller one.
 */
export interface FencedResource<A> {
  /** Writes `value` if `token` is at least the largest token seen; answers whether it was accepted. */
  readonly write: (token: bigint, value: A) => Effect.Effect<boolean>
  readonly read: Effect.Effect<A>
}

export const makeFencedResource = <A>(initial: A): Effect.Effect<FencedResource<A>> =>
  Effect.map(Ref.make({ highest: 0n, value: initial }), (ref) => ({
    write: (token, value) =>
      Ref.modify(ref, (state) =>
        token >= state.highest ? [true, { highest: token, value }] : [false, state]),
    read: Effect.map(Ref.get(ref), (state) => state.value)
  }))

export const backendFencing = (tck: Tck): void => {
  tck.test(
    "tokens strictly increase across acquisitions by different sessions and by one session after release",
    Effect.gen(function*() {
      const b = yield* backend
      const lease = yield* uniqueName("lease")
      const a = yield* open(tck)
      const c = yield* open(tck)
      const t1 = yield* acquireGranted(a, lease)
      yield* b.release(a, lease, t1)
      const t2 = yield* acquireGranted(a, lease)
      yield* b.release(a, lease, t2)
      const t3 = yield* acquireGranted(c, lease)
      yield* b.closeSession(c)
      const t4 = yield* acquireGranted(a, lease)
      yield* b.closeSession(a)
      const d = yield* open(tck)
      const t5 = yield* acquireGranted(d, lease)
      expect(t1).toBeGreaterThan(0n)
      expect(t2).toBeGreaterThan(t1)
      expect(t3).toBeGreaterThan(t2)
      expect(t4).toBeGreaterThan(t3)
      expect(t5).toBeGreaterThan(t4)
    })
  )

  tck.test("tokens keep increasing across a takeover after expiry", Effect.gen(function*() {
    const lease = yield* uniqueName("lease")
    const a = yield* open(tck)
    const t1 = yield* acquireGranted(a, lease)
    yield* tck.sleep(tck.silence)
    const c = yield* open(tck)
    const t2 = yield* acquireGranted(c, lease)
    expect(t2).toBeGreaterThan(t1)
  }))

  tck.test("a late release of an old token cannot free a newer holder", Effect.gen(function*() {
    const b = yield* backend
    const lease = yield* uniqueName("lease")
    const a = yield* open(tck)
    const c = yield* open(tck)
    const observer = yield* open(tck)
    // Another session holds the newer term.
    const t1 = yield* acquireGranted(a, lease)
    yield* b.release(a, lease, t1)
    const t2 = yield* acquireGranted(c, lease)
    yield* b.release(a, lease, t1)
    expect(expectHeldBy(yield* b.acquire(observer, lease)).token ?? t2).toBe(t2)
    expect(yield* heldLeases(tck, c)).toEqual([{ name: lease, token: t2 }])
    // The same session holds the newer term. The observer leaves first: a backend with a FIFO
    // hand-off queued it when it was refused, and would reserve the freed lease for it.
    yield* b.closeSession(observer)
    yield* b.release(c, lease, t2)
    const t3 = yield* acquireGranted(a, lease)
    yield* b.release(c, lease, t2)
    yield* b.release(a, lease, t1)
    expect(t3).toBeGreaterThan(t2)
    expect(yield* heldLeases(tck, a)).toEqual([{ name: lease, token: t3 }])
    const observer2 = yield* open(tck)
    expect(expectHeldBy(yield* b.acquire(observer2, lease)).token ?? t3).toBe(t3)
  }))

  tck.test("a fenced resource rejects the stale token of a former holder", Effect.gen(function*() {
    const lease = yield* uniqueName("lease")
    const resource = yield* makeFencedResource("initial")
    const former = yield* open(tck)
    const t1 = yield* acquireGranted(former, lease)
    expect(yield* resource.write(t1, "former")).toBe(true)
    // The former holder pauses past its session's ttl; a successor takes over.
    yield* tck.sleep(tck.silence)
    const successor = yield* open(tck)
    const t2 = yield* acquireGranted(successor, lease)
    expect(yield* resource.write(t2, "successor")).toBe(true)
    // The former holder wakes up and writes with the token it still has.
    expect(yield* resource.write(t1, "stale")).toBe(false)
    expect(yield* resource.read).toBe("successor")
  }))
}

/**
 * TCK: the `LeaseBackend` SPI contract (SPEC sections 7 and 11), run on every backend.
 *
 * `LeaseBackendSpec(name, layer, options)` registers the suites with vitest; every test gets a fresh
 * backend from `layer` and uses unique lease and group names, so it also passes against a server with
 * data left by earlier runs. Each `describe` block is a function of the harness, so more can be added.
 * The `client` block (`clientCases` in `ClientCases.ts`) runs Simba clients on the backend: start,
 * restart, guard, multi-contend, leader-only schedule, order of events, with `options.client` timing.
 */
import { describe, expect } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { HeldLease, Hint, LeaseBackend } from "../../src/LeaseBackend.js"
import {
  acquireGranted,
  backend,
  expectAbout,
  expectGranted,
  expectHeldBy,
  expectLive,
  heldLeases,
  listed,
  keepAliveDuring,
  open,
  renew,
  type Tck,
  type TckOptions,
  uniqueName,
  uniqueNames,
  unknownSessionId,
  watchHints
} from "./TckHarness.js"
import { clientCases } from "./ClientCases.js"
import { holdCases } from "./HoldCases.js"
import { multiLockCases } from "./MultiLockCases.js"
import * as TckHarness from "./TckHarness.js"

export type { TckOptions as LeaseBackendSpecOptions } from "./TckHarness.js"

/** Registers the SPI contract suites for the backend built by `layer`. */
export const LeaseBackendSpec = (
  name: string,
  layer: Layer.Layer<LeaseBackend, unknown>,
  options: TckOptions
): void => {
  const tck = TckHarness.make(layer, options)
  describe(`LeaseBackendSpec(${name})`, () => {
    describe("sessions", () => sessions(tck))
    describe("leases", () => leases(tck))
    describe("tokens", () => tokens(tck))
    describe("renewals", () => renewals(tck))
    describe("groups", () => groups(tck))
    if (tck.hints) describe("hints", () => hints(tck))
    describe("inspect", () => inspection(tck))
    describe("client", () => clientCases(tck))
    describe("multi-name locks", () => multiLockCases(tck))
    describe("semaphores and read-write locks", () => holdCases(tck))
  })
}

const hex32 = /^[0-9a-f]{32}$/

export const sessions = (tck: Tck): void => {
  tck.test("openSession, keepAlive and closeSession", Effect.gen(function*() {
    const b = yield* backend
    const opened = yield* b.openSession(tck.ttl)
    expect(opened.sessionId.length).toBeGreaterThan(0)
    expectAbout(tck, opened.remaining, tck.granted)
    const live = yield* renew(tck, opened.sessionId)
    expectAbout(tck, live.remaining, tck.granted)
    expect(live.leases).toEqual([])
    expect(live.groups).toEqual([])
    yield* b.closeSession(opened.sessionId)
    expect((yield* b.keepAlive(opened.sessionId, tck.ttl))._tag).toBe("Expired")
    expect((yield* b.acquire(opened.sessionId, yield* uniqueName("after-close")))._tag).toBe("Expired")
    // Closing again, or closing a session that never existed, is a no-op.
    yield* b.closeSession(opened.sessionId)
    yield* b.closeSession(yield* unknownSessionId)
  }))

  tck.test("keepAlive of an unknown session answers Expired", Effect.gen(function*() {
    const b = yield* backend
    const unknown = yield* unknownSessionId
    expect((yield* b.keepAlive(unknown, tck.ttl))._tag).toBe("Expired")
    expect((yield* b.acquire(unknown, yield* uniqueName("lease")))._tag).toBe("Expired")
  }))

  tck.test("a session expires after ttl of silence", Effect.gen(function*() {
    const b = yield* backend
    const sessionId = yield* open(tck)
    yield* tck.sleep(tck.silence)
    expect((yield* b.keepAlive(sessionId, tck.ttl))._tag).toBe("Expired")
  }))

  tck.test("an expired session is never revived", Effect.gen(function*() {
    const b = yield* backend
    const [lease, group] = yield* uniqueNames("lease", "group")
    const sessionId = yield* open(tck)
    const token = yield* acquireGranted(sessionId, lease)
    yield* tck.sleep(tck.silence)
    expect((yield* b.keepAlive(sessionId, tck.ttl))._tag).toBe("Expired")
    expect((yield* b.acquire(sessionId, lease))._tag).toBe("Expired")
    expect(yield* b.join(sessionId, group)).toBe("Expired")
    yield* b.release(sessionId, lease, token)
    expect((yield* b.keepAlive(sessionId, tck.ttl))._tag).toBe("Expired")
    expect(yield* b.members(group)).not.toContain(sessionId)
    yield* b.closeSession(sessionId)
    expect((yield* b.keepAlive(sessionId, tck.ttl))._tag).toBe("Expired")
  }))

  tck.test("session ids never repeat", Effect.gen(function*() {
    const b = yield* backend
    const first = yield* Effect.all(Array.from({ length: 25 }, () => open(tck)), { concurrency: 10 })
    yield* Effect.forEach(first, (sessionId) => b.closeSession(sessionId), { discard: true })
    const second = yield* Effect.all(Array.from({ length: 25 }, () => open(tck)), { concurrency: 10 })
    const all = [...first, ...second]
    expect(new Set(all).size).toBe(50)
    if (tck.randomSessionIds) for (const sessionId of all) expect(sessionId).toMatch(hex32)
    yield* Effect.forEach(second, (sessionId) => b.closeSession(sessionId), { discard: true })
  }))

  tck.test("renewal restarts the ttl and never shortens the session", Effect.gen(function*() {
    const sessionId = yield* open(tck)
    const half = Duration.unsafeDivide(Duration.min(tck.ttl, tck.granted), 2)
    yield* tck.sleep(half)
    // Renewed half-way: the session has the full ttl again, not what was left of the first one.
    expectAbout(tck, (yield* renew(tck, sessionId)).remaining, tck.granted)
    yield* tck.sleep(Duration.times(half, 1.5))
    // 1.25 ttl after opening, 0.75 ttl after the renewal: still alive.
    expectAbout(tck, (yield* renew(tck, sessionId)).remaining, tck.granted)
    yield* (yield* backend).closeSession(sessionId)
  }))

  if (tck.virtualTime) {
    tck.test("a session lives exactly ttl after its last renewal (backend clock)", Effect.gen(function*() {
      const b = yield* backend
      const lease = yield* uniqueName("lease")
      const holder = yield* open(tck)
      const other = yield* open(tck)
      yield* acquireGranted(holder, lease)
      yield* tck.sleep(Duration.subtract(tck.granted, Duration.millis(1)))
      yield* renew(tck, other)
      const held = expectHeldBy(yield* b.acquire(other, lease))
      if (held.remaining !== undefined) expect(Duration.toMillis(held.remaining)).toBe(1)
      yield* tck.sleep(Duration.millis(1))
      yield* acquireGranted(other, lease)
      expect((yield* b.keepAlive(holder, tck.ttl))._tag).toBe("Expired")
    }))
  }
}

export const leases = (tck: Tck): void => {
  tck.test("acquire on a free name grants a token > 0", Effect.gen(function*() {
    const lease = yield* uniqueName("lease")
    const sessionId = yield* open(tck)
    const token = yield* acquireGranted(sessionId, lease)
    expect(token).toBeGreaterThan(0n)
    expect(yield* heldLeases(tck, sessionId)).toEqual([{ name: lease, token }])
  }))

  tck.test("acquire on a held name answers HeldBy", Effect.gen(function*() {
    const b = yield* backend
    const lease = yield* uniqueName("lease")
    const holder = yield* open(tck)
    const other = yield* open(tck)
    const token = yield* acquireGranted(holder, lease)
    const held = expectHeldBy(yield* b.acquire(other, lease))
    if (held.token !== undefined) expect(held.token).toBe(token)
    if (held.remaining !== undefined) {
      expect(Duration.toMillis(held.remaining)).toBeGreaterThan(0)
      expect(Duration.toMillis(held.remaining)).toBeLessThanOrEqual(
        Duration.toMillis(tck.granted) + Duration.toMillis(tck.tolerance)
      )
    }
    expect(yield* heldLeases(tck, holder)).toEqual([{ name: lease, token }])
    expect(yield* heldLeases(tck, other)).toEqual([])
  }))

  tck.test("acquire by the holder again is idempotent: same token", Effect.gen(function*() {
    const lease = yield* uniqueName("lease")
    const sessionId = yield* open(tck)
    const token = yield* acquireGranted(sessionId, lease)
    expect(yield* acquireGranted(sessionId, lease)).toBe(token)
    expect(yield* heldLeases(tck, sessionId)).toEqual([{ name: lease, token }])
  }))

  tck.test("reserve: a grant's block lies above every earlier token and below every later one; the lease goes by the block's last", Effect.gen(function*() {
    const b = yield* backend
    const lease = yield* uniqueName("block")
    const holder = yield* open(tck)
    const other = yield* open(tck)
    const before = yield* acquireGranted(holder, lease)
    yield* b.release(holder, lease, before)
    const reply = yield* b.acquire(holder, lease, 16)
    const token = expectGranted(reply)
    // A store may grant a smaller block (one: it keeps none), never a larger one.
    const reserved = reply._tag === "Granted" ? reply.reserved ?? 1 : 1
    expect(reserved).toBeGreaterThanOrEqual(1)
    expect(reserved).toBeLessThanOrEqual(16)
    expect(token - BigInt(reserved) + 1n).toBeGreaterThan(before)
    expect(yield* heldLeases(tck, holder)).toEqual([{ name: lease, token }])
    // The holder asking again gets its lease's token and no new block.
    const again = yield* b.acquire(holder, lease, 16)
    expect(again._tag === "Granted" && again.token).toBe(token)
    expect(again._tag === "Granted" ? again.reserved ?? 1 : 0).toBe(1)
    yield* b.release(holder, lease, token)
    expect(yield* heldLeases(tck, holder)).toEqual([])
    expect(yield* acquireGranted(other, lease)).toBeGreaterThan(token)
    // A block out of range is refused before the store.
    for (const bad of [0, 1.5, 100_000]) {
      expect((yield* Effect.flip(b.acquire(holder, lease, bad)))._tag).toBe("BackendError")
    }
  }))

  tck.test("release with a stale token or by another session is a no-op", Effect.gen(function*() {
    const b = yield* backend
    const [lease, never] = yield* uniqueNames("lease", "never-held")
    const holder = yield* open(tck)
    const other = yield* open(tck)
    const token = yield* acquireGranted(holder, lease)
    yield* b.release(other, lease, token)
    yield* b.release(holder, lease, token - 1n)
    yield* b.release(holder, lease, token + 1n)
    yield* b.release(holder, never, token)
    expect(yield* heldLeases(tck, holder)).toEqual([{ name: lease, token }])
    expectHeldBy(yield* b.acquire(other, lease))
    // The right session with the right token does release it.
    yield* b.release(holder, lease, token)
    expect(yield* heldLeases(tck, holder)).toEqual([])
    expect(yield* acquireGranted(other, lease)).toBeGreaterThan(token)
  }))

  tck.test("withdraw: a session that stopped waiting is not handed the lease; a no-op otherwise", Effect.gen(function*() {
    const b = yield* backend
    const [lease, never] = yield* uniqueNames("lease", "never-waited")
    const holder = yield* open(tck)
    const quitter = yield* open(tck)
    const token = yield* acquireGranted(holder, lease)
    expectHeldBy(yield* b.acquire(quitter, lease))
    yield* b.withdraw(quitter, lease)
    yield* b.release(holder, lease, token)
    // Had the quitter stayed queued, a backend with a waiter queue would hand it (or reserve for it) the lease.
    expect(yield* heldLeases(tck, quitter)).toEqual([])
    const next = yield* open(tck)
    const granted = yield* acquireGranted(next, lease)
    // Withdrawing never releases: the holder keeps its lease. Unknown sessions and names: no-ops.
    yield* b.withdraw(next, lease)
    yield* b.withdraw(quitter, never)
    yield* b.withdraw(yield* unknownSessionId, lease)
    expect(yield* heldLeases(tck, next)).toEqual([{ name: lease, token: granted }])
  }))

  tck.test("takeover after the holder's session expired, with a larger token", Effect.gen(function*() {
    const b = yield* backend
    const lease = yield* uniqueName("lease")
    const holder = yield* open(tck)
    const token = yield* acquireGranted(holder, lease)
    yield* tck.sleep(tck.silence)
    const successor = yield* open(tck)
    const next = yield* acquireGranted(successor, lease)
    expect(next).toBeGreaterThan(token)
    expect((yield* b.keepAlive(holder, tck.ttl))._tag).toBe("Expired")
    // The old holder's late release cannot free the successor's lease.
    yield* b.release(holder, lease, token)
    expect(yield* heldLeases(tck, successor)).toEqual([{ name: lease, token: next }])
  }))

  tck.test("keepAlive lists exactly the leases the session holds", Effect.gen(function*() {
    const b = yield* backend
    const [n1, n2, n3, n4] = yield* uniqueNames("n1", "n2", "n3", "n4")
    const a = yield* open(tck)
    const other = yield* open(tck)
    const t1 = yield* acquireGranted(a, n1)
    const t2 = yield* acquireGranted(a, n2)
    const t3 = yield* acquireGranted(a, n3)
    const t4 = yield* acquireGranted(other, n4)
    expect(yield* heldLeases(tck, a)).toEqual([{ name: n1, token: t1 }, { name: n2, token: t2 }, {
      name: n3,
      token: t3
    }])
    yield* b.release(a, n2, t2)
    const t2b = yield* acquireGranted(other, n2)
    expectHeldBy(yield* b.acquire(a, n4))
    expect(yield* heldLeases(tck, a)).toEqual([{ name: n1, token: t1 }, { name: n3, token: t3 }])
    expect(yield* heldLeases(tck, other)).toEqual([{ name: n2, token: t2b }, { name: n4, token: t4 }])
  }))

  tck.test("closing a session frees all its leases and leaves all its groups", Effect.gen(function*() {
    const b = yield* backend
    const [n1, n2, g1, g2] = yield* uniqueNames("n1", "n2", "g1", "g2")
    const closing = yield* open(tck)
    const other = yield* open(tck)
    const t1 = yield* acquireGranted(closing, n1)
    const t2 = yield* acquireGranted(closing, n2)
    expect(yield* b.join(closing, g1)).toBe("Joined")
    expect(yield* b.join(closing, g2)).toBe("Joined")
    expect(yield* b.join(other, g1)).toBe("Joined")
    yield* b.closeSession(closing)
    expect(yield* acquireGranted(other, n1)).toBeGreaterThan(t1)
    expect(yield* acquireGranted(other, n2)).toBeGreaterThan(t2)
    expect(yield* b.members(g1)).toEqual([other])
    expect(yield* b.members(g2)).toEqual([])
    const live = yield* renew(tck, other)
    expect(live.groups.map((view) => ({ group: view.group, members: [...view.members] }))).toEqual([
      { group: g1, members: [other] }
    ])
  }))
}

export const tokens = (tck: Tck): void => {
  tck.test("tokens strictly increase across release/re-acquire and across sessions", Effect.gen(function*() {
    const b = yield* backend
    const lease = yield* uniqueName("lease")
    const a = yield* open(tck)
    const c = yield* open(tck)
    const seen: Array<bigint> = []
    for (let round = 0; round < 3; round++) {
      for (const sessionId of [a, a, c]) {
        const token = yield* acquireGranted(sessionId, lease)
        seen.push(token)
        yield* b.release(sessionId, lease, token)
      }
    }
    yield* b.closeSession(a)
    const d = yield* open(tck)
    seen.push(yield* acquireGranted(d, lease))
    yield* b.closeSession(d)
    seen.push(yield* acquireGranted(c, lease))
    expect(seen.length).toBe(11)
    for (let i = 1; i < seen.length; i++) expect(seen[i]!).toBeGreaterThan(seen[i - 1]!)
  }))

  tck.test("concurrent acquires of one free name grant it exactly once", Effect.gen(function*() {
    const lease = yield* uniqueName("lease")
    const b = yield* backend
    const contenders = yield* Effect.all(Array.from({ length: 8 }, () => open(tck)), { concurrency: 8 })
    const replies = yield* Effect.forEach(contenders, (sessionId) => b.acquire(sessionId, lease), {
      concurrency: "unbounded"
    })
    const granted = replies.flatMap((reply, i) => reply._tag === "Granted" ? [{ i, token: reply.token }] : [])
    expect(granted.length).toBe(1)
    expect(replies.filter((reply) => reply._tag === "HeldBy").length).toBe(7)
    const winner = granted[0]!
    expect(yield* heldLeases(tck, contenders[winner.i]!)).toEqual([{ name: lease, token: winner.token }])
  }))
}

export const groups = (tck: Tck): void => {
  tck.test("join, leave and members", Effect.gen(function*() {
    const b = yield* backend
    const [group, empty] = yield* uniqueNames("group", "empty")
    const a = yield* open(tck)
    const c = yield* open(tck)
    expect(yield* b.members(empty)).toEqual([])
    expect(yield* b.join(a, group)).toBe("Joined")
    expect(yield* b.join(c, group)).toBe("Joined")
    expect(yield* b.join(a, group)).toBe("Joined")
    expect([...(yield* b.members(group))].sort()).toEqual([a, c].sort())
    const live = yield* renew(tck, a)
    expect(live.groups.map((view) => ({ group: view.group, members: [...view.members].sort() }))).toEqual([
      { group, members: [a, c].sort() }
    ])
    yield* b.leave(c, group)
    yield* b.leave(c, group)
    yield* b.leave(c, empty)
    expect(yield* b.members(group)).toEqual([a])
    expect((yield* renew(tck, a)).groups.map((view) => [...view.members])).toEqual([[a]])
    expect((yield* renew(tck, c)).groups).toEqual([])
  }))

  tck.test("groups list live members only and drop expired ones", Effect.gen(function*() {
    const b = yield* backend
    const group = yield* uniqueName("group")
    const staying = yield* open(tck)
    const silent = yield* open(tck)
    expect(yield* b.join(staying, group)).toBe("Joined")
    expect(yield* b.join(silent, group)).toBe("Joined")
    expect([...(yield* b.members(group))].sort()).toEqual([staying, silent].sort())
    yield* keepAliveDuring(tck, tck.silence, [staying])
    expect(yield* b.members(group)).toEqual([staying])
    const live = expectLive(yield* b.keepAlive(staying, tck.ttl))
    expect(live.groups.map((view) => ({ group: view.group, members: [...view.members] }))).toEqual([
      { group, members: [staying] }
    ])
    expect(yield* b.join(silent, group)).toBe("Expired")
    expect(yield* b.members(group)).toEqual([staying])
  }))
}

/**
 * Versioned renewals (SPEC section 7): a renewal that names the version of the last list the client
 * read gets no list back while the session's set is unchanged, and a full list after any change (an
 * acquire, a release, a hand-off grant), also when the client never read the reply that carried the
 * change. On a backend that lists every time, every list must be complete.
 */
export const renewals = (tck: Tck): void => {
  /** Renews naming `known`; returns the version and the leases as the client then knows them. */
  const renewKnowing = (sessionId: string, known: string | undefined, before: ReadonlyArray<HeldLease>) =>
    Effect.gen(function*() {
      const b = yield* backend
      const live = expectLive(yield* b.keepAlive(sessionId, tck.ttl, known))
      if (!tck.versionedRenewals) expect(live.leases).toBeDefined()
      if (live.leases === undefined) expect(live.version).toBe(known)
      return { version: live.version, leases: live.leases, known: live.leases ?? before }
    })
  const sorted = (leases: ReadonlyArray<HeldLease>) => [...leases].sort((x, y) => x.name.localeCompare(y.name))

  tck.test("an unchanged set is not listed again", Effect.gen(function*() {
    const [n1, n2, n3] = yield* uniqueNames("n1", "n2", "n3")
    const a = yield* open(tck)
    const held = [
      { name: n1, token: yield* acquireGranted(a, n1) },
      { name: n2, token: yield* acquireGranted(a, n2) },
      { name: n3, token: yield* acquireGranted(a, n3) }
    ]
    const first = listed(yield* renew(tck, a))
    expect(sorted(first)).toEqual(held)
    const { version } = yield* renewKnowing(a, undefined, [])
    for (let i = 0; i < 3; i++) {
      const again = yield* renewKnowing(a, version, first)
      if (tck.versionedRenewals) {
        expect(again.leases).toBeUndefined()
        expect(again.version).toBe(version)
      }
      expect(sorted(again.known)).toEqual(held)
    }
  }))

  tck.test("an acquire, a release and a re-acquire each change the set", Effect.gen(function*() {
    const b = yield* backend
    const [n1, n2] = yield* uniqueNames("n1", "n2")
    const a = yield* open(tck)
    const t1 = yield* acquireGranted(a, n1)
    const v1 = yield* renewKnowing(a, undefined, [])
    const t2 = yield* acquireGranted(a, n2)
    const v2 = yield* renewKnowing(a, v1.version, v1.known)
    expect(v2.leases).toBeDefined()
    expect(v2.version).not.toBe(v1.version)
    expect(sorted(v2.known)).toEqual([{ name: n1, token: t1 }, { name: n2, token: t2 }])
    yield* b.release(a, n1, t1)
    const v3 = yield* renewKnowing(a, v2.version, v2.known)
    expect(v3.leases).toEqual([{ name: n2, token: t2 }])
    // The same names as before, with a new token: a change too.
    const t1b = yield* acquireGranted(a, n1)
    expect(t1b).toBeGreaterThan(t1)
    const v4 = yield* renewKnowing(a, v3.version, v3.known)
    expect(sorted(v4.leases ?? [])).toEqual([{ name: n1, token: t1b }, { name: n2, token: t2 }])
  }))

  tck.test("a refused acquire does not change the set", Effect.gen(function*() {
    const name = yield* uniqueName("held")
    const holder = yield* open(tck)
    const a = yield* open(tck)
    yield* acquireGranted(holder, name)
    const v1 = yield* renewKnowing(a, undefined, [])
    expectHeldBy(yield* (yield* backend).acquire(a, name))
    const v2 = yield* renewKnowing(a, v1.version, v1.known)
    expect(v2.known).toEqual([])
    if (tck.versionedRenewals) expect(v2.leases).toBeUndefined()
  }))

  tck.test("a change whose reply was lost is listed again", Effect.gen(function*() {
    const [n1, n2] = yield* uniqueNames("n1", "n2")
    const a = yield* open(tck)
    const t1 = yield* acquireGranted(a, n1)
    const v1 = yield* renewKnowing(a, undefined, [])
    const t2 = yield* acquireGranted(a, n2)
    // This reply is lost: the client still knows only v1.
    const lost = yield* renewKnowing(a, v1.version, v1.known)
    expect(lost.leases).toBeDefined()
    const again = yield* renewKnowing(a, v1.version, v1.known)
    expect(sorted(again.leases ?? [])).toEqual([{ name: n1, token: t1 }, { name: n2, token: t2 }])
    expect(again.version).toBe(lost.version)
    // A version the backend never gave is answered with the list.
    const unknown = yield* renewKnowing(a, "not-a-version", [])
    expect(sorted(unknown.leases ?? [])).toEqual([{ name: n1, token: t1 }, { name: n2, token: t2 }])
  }))

  if (tck.handOffGrants) {
    tck.test("a hand-off grant changes the waiter's set", Effect.gen(function*() {
      const b = yield* backend
      const name = yield* uniqueName("handed")
      const holder = yield* open(tck)
      const waiter = yield* open(tck)
      const token = yield* acquireGranted(holder, name)
      expectHeldBy(yield* b.acquire(waiter, name))
      const v1 = yield* renewKnowing(waiter, undefined, [])
      expect(v1.known).toEqual([])
      yield* b.release(holder, name, token)
      const v2 = yield* renewKnowing(waiter, v1.version, v1.known)
      expect(v2.version).not.toBe(v1.version)
      expect(v2.leases?.map((lease) => lease.name)).toEqual([name])
      expect(v2.leases![0]!.token).toBeGreaterThan(token)
    }))
  }
}

export const hints = (tck: Tck): void => {
  tck.test("a waiting session hears the release and the close of the holder (Released, or a hand-off's Granted)", Effect.gen(function*() {
    const b = yield* backend
    const [released, closed] = yield* uniqueNames("released", "closed")
    const watch = yield* watchHints(tck)
    const holder = yield* open(tck)
    const waiter = yield* open(tck)
    const token = yield* acquireGranted(holder, released)
    const beforeRelease = yield* TckHarness.waitForLease(tck, watch, waiter, released)
    yield* b.release(holder, released, token)
    yield* watch.await(TckHarness.freedOf(released), beforeRelease + 1)
    yield* acquireGranted(holder, closed)
    const beforeClose = yield* TckHarness.waitForLease(tck, watch, waiter, closed)
    yield* b.closeSession(holder)
    yield* watch.await(TckHarness.freedOf(closed), beforeClose + 1)
    yield* b.closeSession(waiter)
  }))

  tck.test("GroupChanged arrives on join, leave and close", Effect.gen(function*() {
    const b = yield* backend
    const group = yield* uniqueName("group")
    const watch = yield* watchHints(tck)
    const changed = (hint: Hint) =>
      hint._tag === "GroupChanged" && hint.group === group
    const sessionId = yield* open(tck)
    expect(yield* b.join(sessionId, group)).toBe("Joined")
    yield* watch.await(changed, 1)
    yield* b.leave(sessionId, group)
    yield* watch.await(changed, 2)
    expect(yield* b.join(sessionId, group)).toBe("Joined")
    yield* watch.await(changed, 3)
    yield* b.closeSession(sessionId)
    yield* watch.await(changed, 4)
    expect(yield* b.members(group)).toEqual([])
  }))
}

export const inspection = (tck: Tck): void => {
  tck.test("inspect lists sessions, holders with their tokens, waiters and groups, and changes nothing", Effect.gen(function*() {
    const b = yield* backend
    const inspect = b.inspect
    if (inspect === undefined) return expect.fail(`the ${b.backend} backend offers no inspect`)
    const [name, group] = yield* uniqueNames("inspect", "inspect-group")
    const holder = yield* open(tck)
    const waiter = yield* open(tck)
    const token = yield* acquireGranted(holder, name)
    expectHeldBy(yield* b.acquire(waiter, name))
    expect(yield* b.join(holder, group)).toBe("Joined")
    expect(yield* b.join(waiter, group)).toBe("Joined")

    const seen = yield* inspect
    const sessions = seen.sessions.filter((s) => s.sessionId === holder || s.sessionId === waiter)
    expect(sessions.map((s) => s.sessionId).sort()).toEqual([holder, waiter].sort())
    for (const session of sessions) {
      if (session.remaining !== undefined) {
        expect(Duration.toMillis(session.remaining)).toBeGreaterThan(0)
        expect(Duration.toMillis(session.remaining)).toBeLessThanOrEqual(Duration.toMillis(tck.ttl) + Duration.toMillis(tck.tolerance))
      }
    }
    const lease = seen.leases.find((l) => l.name === name)
    expect(lease).toMatchObject({ name, holder, token })
    // A store with a queue lists the refused session as waiting; none lists the holder.
    if (tck.handOffGrants) expect(lease?.waiters).toEqual([waiter])
    else expect(lease?.waiters.every((w) => w === waiter)).toBe(true)
    expect(seen.groups.find((g) => g.group === group)?.members).toEqual([holder, waiter].sort())
    // Sorted, as `make` promises.
    expect(seen.leases.map((l) => l.name)).toEqual(seen.leases.map((l) => l.name).sort())

    // A read: the holder still holds, with the same token, and the waiter is still refused.
    expect(yield* heldLeases(tck, holder)).toEqual([{ name, token }])

    yield* b.withdraw(waiter, name)
    yield* b.release(holder, name, token)
    yield* b.closeSession(waiter)
    const after = yield* inspect
    expect(after.sessions.some((s) => s.sessionId === waiter)).toBe(false)
    // A free name is either gone (ZooKeeper deletes the node) or listed free with its last token.
    const freed = after.leases.find((l) => l.name === name)
    if (freed !== undefined) expect(freed).toMatchObject({ name, holder: undefined, token, waiters: [] })
    expect(after.groups.find((g) => g.group === group)?.members).toEqual([holder])
    yield* b.closeSession(holder)
  }))
}

/**
 * Holds (semaphore permits, read holds) on the 3-master Redis Cluster (and one node with
 * `routeBySlot`, which runs the same per-slot scripts) at the SPI level, beside the
 * TCK's hold cases: where a hold's keys live (its pool's slot), the server-side hand-off to a waiter
 * (a `Granted` hint on the channel named like the hold's one-node key, and its shadow in the pool's
 * slot listing the hold, even after renewals while it waited), a dead waiter skipped, `withdraw`
 * leaving the pool's queue, and a closing session ending its holds and serving a waiting writer. Real time, unique names.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Hint, LeaseBackendService } from "../../src/LeaseBackend.js"
import * as LeaseName from "../../src/LeaseName.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { waitHintOf } from "../tck/TckHarness.js"
import { type HintWatch, modes, type RawClient, rawClient, uniqueName, watchHints } from "./RedisServers.js"
import { granted, heldBy } from "../support/replies.js"

const ttl = Duration.millis(3000)
const k = RedisBackend.keys()

const grantedTo = (name: string, to: string) => (hint: Hint): hint is Extract<Hint, { _tag: "Granted" }> =>
  hint._tag === "Granted" && hint.name === name && hint.to === to
const permit = (pool: string, id: string, limit = 1) => LeaseName.holdName({ pool, mode: "permits", weight: 1, limit, id })

/** The leases a renewal of `sessionId` lists (asked with no known version: the whole set). */
const listed = (b: LeaseBackendService, sessionId: string) =>
  Effect.map(b.keepAlive(sessionId, ttl, undefined), (reply) => {
    if (reply._tag !== "Live") expect.fail(`expected Live, got ${reply._tag}`)
    return [...(reply.leases ?? [])].sort((x, y) => x.name.localeCompare(y.name))
  })

/** A renewal of `sessionId` knowing the version `known`. */
const renewed = (b: LeaseBackendService, sessionId: string, known: string | undefined) =>
  Effect.map(b.keepAlive(sessionId, ttl, known), (reply) => {
    if (reply._tag !== "Live") expect.fail(`expected Live, got ${reply._tag}`)
    return reply
  })

/** The shadow of `sessionId` in the slot of the pool `pool` (where its holds and waits are kept). */
const shadowOf = (pool: string, sessionId: string) => k.shadow(RedisBackend.slotTag(RedisBackend.keySlot(k.lease(pool))), sessionId)

/** `sessionId` asks for `name` and is refused; returns once the backend hears the channel its hand-off comes on. */
const waitFor = (b: LeaseBackendService, watch: HintWatch, sessionId: string, name: string) =>
  Effect.gen(function*() {
    heldBy(yield* b.acquire(sessionId, name))
    yield* watch.await(waitHintOf(name))
  })

const queueOf = (raw: RawClient, pool: string) => Effect.promise(() => raw.zrange(`${k.lease(pool)}:pq`, 0, -1))

// The cluster, and one node with `routeBySlot` (the same per-slot scripts on one server).
for (const mode of modes.filter((m) => m.routeBySlot)) describe(`Redis holds by slot, ${mode.label}`, () => {
  it.scopedLive("a hold's hash lies in its pool's slot; one node keeps its own key layout", () =>
    Effect.gen(function*() {
      const b = yield* RedisBackend.make(mode.options)
      const raw = yield* rawClient(mode.cluster)
      const pool = uniqueName("slot")
      const name = permit(pool, "a", 2)
      const { sessionId } = yield* b.openSession(ttl)
      const token = granted(yield* b.acquire(sessionId, name))
      const key = k.holdInCluster(pool, name)
      expect(key).toBe(`${k.lease(pool)}${name.slice(pool.length)}`)
      expect(RedisBackend.keySlot(key)).toBe(RedisBackend.keySlot(k.lease(pool)))
      expect(yield* Effect.promise(() => raw.hget(key, "session"))).toBe(sessionId)
      expect(yield* Effect.promise(() => raw.hget(`${k.lease(pool)}:holds`, name))).toBe(`${sessionId}|1`)
      expect(yield* Effect.promise(() => raw.sismember(`${shadowOf(pool, sessionId)}:leases`, name))).toBe(1)
      expect(yield* listed(b, sessionId)).toEqual([{ name, token }])
      yield* b.release(sessionId, name, token)
      expect(yield* Effect.promise(() => raw.exists(key, `${k.lease(pool)}:pool`, `${k.lease(pool)}:holds`))).toBe(0)
      expect(yield* listed(b, sessionId)).toEqual([])
      yield* b.closeSession(sessionId)
    }))

  it.scopedLive("a freed permit is granted server-side to the queue's head, pushed as Granted, listed by its renewal even after renewals while it waited", () =>
    Effect.gen(function*() {
      const b = yield* RedisBackend.make(mode.options)
      const raw = yield* rawClient(mode.cluster)
      const watch = yield* watchHints(b, raw)
      const pool = uniqueName("handoff")
      const [holder, first, second] = yield* Effect.forEach([1, 2, 3], () => Effect.map(b.openSession(ttl), (s) => s.sessionId))
      const held = permit(pool, "held")
      const token = granted(yield* b.acquire(holder!, held))
      const firstName = permit(pool, "first")
      const secondName = permit(pool, "second")
      yield* waitFor(b, watch, first!, firstName)
      yield* waitFor(b, watch, second!, secondName)
      expect(yield* queueOf(raw, pool)).toEqual([firstName, secondName])
      // Renewals while waiting hold nothing in the pool's slot, yet keep the shadow open (it waits):
      // the steady state (a known version) lists nothing until the hand-off changes the set.
      expect(yield* listed(b, first!)).toEqual([])
      let version = (yield* renewed(b, first!, undefined)).version
      for (let i = 0; i < 3; i++) {
        const again = yield* renewed(b, first!, version)
        expect(again.leases === undefined || again.leases.length === 0).toBe(true)
        version = again.version
      }
      expect(yield* Effect.promise(() => raw.hget(shadowOf(pool, first!), "waits"))).toBe("1")
      yield* b.release(holder!, held, token)
      yield* watch.await(grantedTo(firstName, first!))
      const pushed = (yield* watch.seen).find(grantedTo(firstName, first!))!
      expect(pushed.token).toBeGreaterThan(token)
      const after = yield* renewed(b, first!, version)
      expect(after.version).not.toBe(version)
      expect(after.leases).toEqual([{ name: firstName, token: pushed.token }])
      expect(yield* Effect.promise(() => raw.hget(shadowOf(pool, first!), "waits"))).toBe("0")
      // The next acquire of the granted session answers the same grant; the second still waits.
      expect(granted(yield* b.acquire(first!, firstName))).toBe(pushed.token)
      expect(yield* queueOf(raw, pool)).toEqual([secondName])
      yield* b.release(first!, firstName, pushed.token)
      yield* watch.await(grantedTo(secondName, second!))
      const next = (yield* watch.seen).find(grantedTo(secondName, second!))!
      expect(next.token).toBeGreaterThan(pushed.token)
      expect(yield* listed(b, second!)).toEqual([{ name: secondName, token: next.token }])
      for (const s of [holder!, first!, second!]) yield* b.closeSession(s)
      expect(yield* Effect.promise(() => raw.exists(`${k.lease(pool)}:pool`))).toBe(0)
    }))

  it.scopedLive("a waiter whose session expired is skipped: the permit goes to the next live one", () =>
    Effect.gen(function*() {
      const b = yield* RedisBackend.make(mode.options)
      const raw = yield* rawClient(mode.cluster)
      const watch = yield* watchHints(b, raw)
      const pool = uniqueName("dead")
      const [holder, live] = yield* Effect.forEach([1, 2], () => Effect.map(b.openSession(ttl), (s) => s.sessionId))
      const dead = (yield* b.openSession(Duration.millis(300))).sessionId
      const held = permit(pool, "held")
      const token = granted(yield* b.acquire(holder!, held))
      heldBy(yield* b.acquire(dead, permit(pool, "dead")))
      yield* waitFor(b, watch, live!, permit(pool, "live"))
      // Never renewed: the dead session's pulse runs out.
      yield* Effect.sleep(Duration.millis(600))
      yield* b.release(holder!, held, token)
      yield* watch.await(grantedTo(permit(pool, "live"), live!))
      expect((yield* watch.seen).some((hint) => hint._tag === "Granted" && hint.to === dead)).toBe(false)
      expect(yield* queueOf(raw, pool)).toEqual([])
      for (const s of [holder!, live!]) yield* b.closeSession(s)
      expect(yield* Effect.promise(() => raw.exists(`${k.lease(pool)}:pool`, `${k.lease(pool)}:pw`))).toBe(0)
    }))

  it.scopedLive("withdraw takes a waiter out of the pool's queue: the next one is served", () =>
    Effect.gen(function*() {
      const b = yield* RedisBackend.make(mode.options)
      const raw = yield* rawClient(mode.cluster)
      const watch = yield* watchHints(b, raw)
      const pool = uniqueName("withdraw")
      const [holder, quitter, stayer] = yield* Effect.forEach([1, 2, 3], () => Effect.map(b.openSession(ttl), (s) => s.sessionId))
      const held = permit(pool, "held")
      const token = granted(yield* b.acquire(holder!, held))
      const quitName = permit(pool, "quit")
      const stayName = permit(pool, "stay")
      yield* waitFor(b, watch, quitter!, quitName)
      yield* waitFor(b, watch, stayer!, stayName)
      yield* b.withdraw(quitter!, quitName)
      expect(yield* queueOf(raw, pool)).toEqual([stayName])
      expect(yield* Effect.promise(() => raw.hexists(`${k.lease(pool)}:pw`, quitName))).toBe(0)
      expect(yield* Effect.promise(() => raw.hget(shadowOf(pool, quitter!), "waits"))).toBe("0")
      yield* b.release(holder!, held, token)
      yield* watch.await(grantedTo(stayName, stayer!))
      expect((yield* watch.seen).some(grantedTo(quitName, quitter!))).toBe(false)
      expect(yield* listed(b, quitter!)).toEqual([])
      expect((yield* listed(b, stayer!)).map((lease) => lease.name)).toEqual([stayName])
      for (const s of [holder!, quitter!, stayer!]) yield* b.closeSession(s)
    }))

  it.scopedLive("a closing session ends its read holds; the waiting writer is granted the plain lease, readers behind it wait", () =>
    Effect.gen(function*() {
      const b = yield* RedisBackend.make(mode.options)
      const raw = yield* rawClient(mode.cluster)
      const watch = yield* watchHints(b, raw)
      const pool = uniqueName("rw")
      const read = (id: string) => LeaseName.holdName({ pool, mode: "read", weight: 1, limit: 0, id })
      const [reader, writer, late] = yield* Effect.forEach([1, 2, 3], () => Effect.map(b.openSession(ttl), (s) => s.sessionId))
      const readToken = granted(yield* b.acquire(reader!, read("r1")))
      yield* waitFor(b, watch, writer!, pool)
      // A reader arriving after a waiting writer waits behind it.
      yield* waitFor(b, watch, late!, read("r2"))
      expect(yield* queueOf(raw, pool)).toEqual([`~w~${writer}`, read("r2")])
      yield* b.closeSession(reader!)
      yield* watch.await(grantedTo(pool, writer!))
      const writeToken = (yield* watch.seen).find(grantedTo(pool, writer!))!.token
      expect(writeToken).toBeGreaterThan(readToken)
      expect(yield* listed(b, writer!)).toEqual([{ name: pool, token: writeToken }])
      expect(yield* Effect.promise(() => raw.exists(k.holdInCluster(pool, read("r1"))))).toBe(0)
      expect(yield* queueOf(raw, pool)).toEqual([read("r2")])
      // The writer's release serves the reader.
      yield* b.release(writer!, pool, writeToken)
      yield* watch.await(grantedTo(read("r2"), late!))
      expect((yield* watch.seen).find(grantedTo(read("r2"), late!))!.token).toBeGreaterThan(writeToken)
      for (const s of [writer!, late!]) yield* b.closeSession(s)
    }))
})

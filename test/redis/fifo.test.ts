/**
 * The FIFO hand-off of the Redis backend, at the SPI level, on the real servers in every mode: a
 * refused acquire queues the session; a released lease goes to the first live waiter: without
 * `routeBySlot` it is granted to it at once (`Granted` hint with the token), with it (cluster) it is
 * reserved for it (for `reservationMillis`) and the `released` hint names it; dead waiters are skipped; a reservation not
 * taken in time passes to the next waiter; a takeover reserves in every mode. Real time, short ttl,
 * unique names per test.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Redis } from "ioredis"
import type { Hint } from "../../src/LeaseBackend.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { awaitFreed, awaitWaiting, modes, rawClient, uniqueName, watchHints } from "./RedisServers.js"
import { granted, heldBy } from "../support/replies.js"

const ttl = Duration.millis(3000)
const k = RedisBackend.keys()
const R = RedisBackend.reservationMillis

const releasedOf = (name: string) => (hint: Hint): hint is Extract<Hint, { _tag: "Released" }> =>
  hint._tag === "Released" && hint.name === name
const grantedOf = (name: string) => (hint: Hint): hint is Extract<Hint, { _tag: "Granted" }> =>
  hint._tag === "Granted" && hint.name === name
/**
 * The hand-off hints of `name`: a grant (one node) or a targeted release (cluster). Not a plain
 * `released`: the backend emits one when it starts hearing the channel of a lease a session waits for.
 */
const handOffOf = (name: string) => (hint: Hint): boolean =>
  grantedOf(name)(hint) || (releasedOf(name)(hint) && hint.to !== undefined)
const handedTo = (hint: Hint): string | undefined =>
  hint._tag === "Granted" || hint._tag === "Released" ? hint.to : undefined

for (const mode of modes) {
  describe(`Redis FIFO hand-off, ${mode.label}`, () => {
    const make = () => RedisBackend.make(mode.options)

    /** Opens `n` sessions and queues them, in order, behind `holder` on `name` (distinct arrival ms). */
    const queue = (b: Effect.Effect.Success<ReturnType<typeof make>>, name: string, n: number) =>
      Effect.forEach(Array.from({ length: n }), () =>
        Effect.gen(function*() {
          const { sessionId } = yield* b.openSession(ttl)
          heldBy(yield* b.acquire(sessionId, name))
          yield* Effect.sleep(Duration.millis(3))
          return sessionId
        }))

    it.scopedLive("an uncontended acquire grants at once and leaves no queue or reservation behind", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const name = uniqueName("solo")
        const { sessionId } = yield* b.openSession(ttl)
        const token = granted(yield* b.acquire(sessionId, name))
        expect(Object.keys(yield* Effect.promise(() => raw.hgetall(k.lease(name)))).sort()).toEqual([
          "expires",
          "session",
          "token"
        ])
        yield* b.release(sessionId, name, token)
        expect(yield* Effect.promise(() => raw.exists(k.leaseQueue(name)))).toBe(0)
        expect(yield* Effect.promise(() => raw.hget(k.lease(name), "reserved"))).toBeNull()
        granted(yield* b.acquire(sessionId, name))
        yield* b.closeSession(sessionId)
      }))

    it.scopedLive("waiters are granted in arrival order; the released hint names the head only", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("fifo")
        const holder = (yield* b.openSession(ttl)).sessionId
        let token = granted(yield* b.acquire(holder, name))
        const waiters = yield* queue(b, name, 4)
        expect(yield* Effect.promise(() => raw.zrange(k.leaseQueue(name), 0, -1))).toEqual(waiters)
        let owner = holder
        const order: Array<string> = []
        for (let i = 0; i < waiters.length; i++) {
          const before = (yield* watch.seen).length
          yield* b.release(owner, name, token)
          // The hint names the head, and only it: granted to it (one node) or reserved for it (cluster).
          yield* watch.awaitSeen((hints) => hints.slice(before).some(handOffOf(name)))
          const hints = (yield* watch.seen).slice(before).filter(handOffOf(name))
          expect(hints.map(handedTo)).toEqual([waiters[i]])
          const hint = hints[0]!
          expect(hint._tag).toBe(mode.routeBySlot ? "Released" : "Granted")
          // Everyone else is refused (and keeps its place); with a reservation for at most its time.
          // With a reservation, one other waiter checks it, then the head takes it at once: the
          // reservation lasts R ms, and under load a longer walk could outlast it (it would pass on).
          const others = waiters.slice(i + 1)
          for (const other of mode.routeBySlot ? others.slice(0, 1) : others) {
            const reply = heldBy(yield* b.acquire(other, name))
            if (mode.routeBySlot) expect(Duration.toMillis(reply.remaining!)).toBeLessThanOrEqual(R)
          }
          // The head holds it: its acquire answers with the token the grant carried (acquire is idempotent).
          const next = granted(yield* b.acquire(waiters[i]!, name))
          if (mode.routeBySlot) for (const other of others.slice(1)) heldBy(yield* b.acquire(other, name))
          heldBy(yield* b.acquire(owner, name)) // the former owner queues behind the rest
          expect(next).toBeGreaterThan(token)
          if (hint._tag === "Granted") expect(hint.token).toBe(next)
          token = next
          order.push(waiters[i]!)
          owner = waiters[i]!
        }
        expect(order).toEqual(waiters)
        // The former holder queued first among the re-askers: it is next.
        yield* b.release(owner, name, token)
        yield* watch.await((h) => handOffOf(name)(h) && handedTo(h) === holder)
        granted(yield* b.acquire(holder, name))
        for (const sid of [holder, ...waiters]) yield* b.closeSession(sid)
      }))

    it.scopedLive("a plain `released` message is a hint without `to`", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("plain")
        // Heard while a session waits for the lease (its channel subscribed).
        const holder = (yield* b.openSession(ttl)).sessionId
        granted(yield* b.acquire(holder, name))
        const { seen } = yield* awaitWaiting(b, watch, name, ttl)
        yield* Effect.promise(() => raw.publish(k.lease(name), "released"))
        yield* awaitFreed(watch, name, seen)
        expect((yield* watch.seen).slice(seen).filter(releasedOf(name)).map(handedTo)).toEqual([undefined])
      }))

    it.scopedLive("a dead head (closed session) is skipped", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("dead-head")
        const holder = (yield* b.openSession(ttl)).sessionId
        const token = granted(yield* b.acquire(holder, name))
        const [first, second, third] = yield* queue(b, name, 3)
        yield* b.closeSession(first!)
        yield* b.release(holder, name, token)
        yield* watch.await((h) => handOffOf(name)(h) && handedTo(h) === second)
        heldBy(yield* b.acquire(third!, name))
        granted(yield* b.acquire(second!, name))
        expect(yield* Effect.promise(() => raw.zrange(k.leaseQueue(name), 0, -1))).toEqual([third])
        for (const sid of [holder, second!, third!]) yield* b.closeSession(sid)
      }))

    it.scopedLive("a lease handed to a waiter that gives it back goes to the next waiter", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("given-back")
        const holder = (yield* b.openSession(ttl)).sessionId
        const token = granted(yield* b.acquire(holder, name))
        const [first, second] = yield* queue(b, name, 2)
        yield* b.release(holder, name, token)
        yield* watch.await((h) => handOffOf(name)(h) && handedTo(h) === first)
        // The first waiter no longer wants it (its client stopped waiting): it takes it, gives it back.
        const handed = granted(yield* b.acquire(first!, name))
        yield* b.release(first!, name, handed)
        yield* watch.await((h) => handOffOf(name)(h) && handedTo(h) === second)
        expect(granted(yield* b.acquire(second!, name))).toBeGreaterThan(handed)
        for (const sid of [holder, first!, second!]) yield* b.closeSession(sid)
      }))

    it.scopedLive("a closing holder hands each of its leases to the first waiter", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("close-hands-off")
        const holder = (yield* b.openSession(ttl)).sessionId
        const token = granted(yield* b.acquire(holder, name))
        const [waiter] = yield* queue(b, name, 1)
        yield* b.closeSession(holder)
        yield* watch.await((h) => handOffOf(name)(h) && handedTo(h) === waiter)
        const next = granted(yield* b.acquire(waiter!, name))
        expect(next).toBeGreaterThan(token)
        if (!mode.routeBySlot) {
          // Granted, not reserved: the waiter holds it already, and its renewal lists it.
          const reply = yield* b.keepAlive(waiter!, ttl)
          expect(reply._tag === "Live" ? reply.leases : []).toEqual([{ name, token: next }])
        }
        yield* b.closeSession(waiter!)
      }))

    it.scopedLive("a reservation not taken within the reservation time passes to the next waiter", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("unused")
        const holder = (yield* b.openSession(ttl)).sessionId
        const token = granted(yield* b.acquire(holder, name))
        const [idle, next, last] = yield* queue(b, name, 3)
        // Without routeBySlot a release grants instead of reserving; a takeover reserves in every mode.
        if (mode.routeBySlot) {
          yield* b.release(holder, name, token)
        } else {
          yield* Effect.promise(() => raw.hdel(k.lease(name), "session", "expires"))
          yield* Effect.promise(() => raw.del(k.session(holder)))
          heldBy(yield* b.acquire(last!, name))
        }
        yield* watch.await((h) => releasedOf(name)(h) && h.to === idle)
        const refused = heldBy(yield* b.acquire(last!, name))
        yield* Effect.sleep(Duration.millis(Duration.toMillis(refused.remaining!) + 30))
        // `idle` never came: the next acquire drops it and reserves the lease for `next`.
        heldBy(yield* b.acquire(last!, name))
        yield* watch.await((h) => releasedOf(name)(h) && h.to === next)
        granted(yield* b.acquire(next!, name))
        // `idle` lost its place: it queues again, behind `last`.
        heldBy(yield* b.acquire(idle!, name))
        expect(yield* Effect.promise(() => raw.zrange(k.leaseQueue(name), 0, -1))).toEqual([last, idle])
        for (const sid of [holder, idle!, next!, last!]) yield* b.closeSession(sid)
      }))

    it.scopedLive("a takeover (holder's session gone) reserves the lease for the head", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("takeover")
        const holder = (yield* b.openSession(Duration.millis(400))).sessionId
        granted(yield* b.acquire(holder, name))
        const [head, tail] = yield* queue(b, name, 2)
        yield* Effect.sleep(Duration.millis(600)) // the holder's session expires (and its shadow)
        heldBy(yield* b.acquire(tail!, name))
        yield* watch.await((h) => releasedOf(name)(h) && h.to === head)
        granted(yield* b.acquire(head!, name))
        for (const sid of [head!, tail!]) yield* b.closeSession(sid)
      }))
  })
}

// Without `routeBySlot` a hand-off grant is told on the waiter's session channel, not the lease's:
// a contended release wakes the one client it is for, not every client waiting for the name.
describe("Redis hand-off message, single node", () => {
  it.scopedLive("the grant goes to the waiter's session channel alone; another client waiting for the name hears nothing", () =>
    Effect.gen(function*() {
      const b = yield* RedisBackend.make(modes[0].options)
      const other = yield* RedisBackend.make(modes[0].options)
      const raw = yield* rawClient(false)
      const watch = yield* watchHints(b, raw)
      const otherWatch = yield* watchHints(other, raw)
      const name = uniqueName("told")
      const holder = (yield* b.openSession(ttl)).sessionId
      const token = granted(yield* b.acquire(holder, name))
      const waiter = (yield* b.openSession(ttl)).sessionId
      heldBy(yield* b.acquire(waiter, name))
      // The other client's session waits behind it: its backend hears the lease's channel.
      const { seen: otherSeen, waiter: otherWaiter } = yield* awaitWaiting(other, otherWatch, name, ttl)
      const listener = yield* rawClient(false)
      const messages: Array<readonly [string, string]> = []
      listener.on("message", (channel: string, message: string) => messages.push([channel, message]))
      yield* Effect.promise(() => (listener as Redis).subscribe(k.lease(name), k.session(waiter)))
      const before = (yield* watch.seen).length
      yield* b.release(holder, name, token)
      yield* watch.awaitSeen((hints) => hints.slice(before).some(grantedOf(name)))
      const hint = (yield* watch.seen).slice(before).find(grantedOf(name))!
      expect(hint.to).toBe(waiter)
      expect(granted(yield* b.acquire(waiter, name))).toBe(hint.token)
      yield* Effect.sleep(Duration.millis(200))
      expect(messages).toEqual([[k.session(waiter), `granted:${hint.token}:${name}`]])
      expect((yield* otherWatch.seen).slice(otherSeen).filter((h) => h._tag !== "GroupChanged" && h.name === name)).toEqual([])
      for (const sid of [holder, waiter]) yield* b.closeSession(sid)
      yield* other.closeSession(otherWaiter)
    }))
})

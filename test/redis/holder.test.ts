/**
 * A lease hash deleted by hand (`DEL simba:lease:{name}`) while its holder still holds the lease: the
 * holder record (`simba:lease:{name}:holder`, `sid:token`, in the lease's slot, written on grant and
 * removed on free) makes the next acquire restore the hash for the holder and answer `HeldBy`, so
 * nobody else is granted the lease while the holder may still believe it holds it. When the holder's
 * session is gone the lease is free, with a token above the recorded one. A semaphore's pool hash
 * deleted by hand is made again with its live holds still counted.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as LeaseName from "../../src/LeaseName.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import { type Mode, modes, rawClient, uniqueName } from "./RedisServers.js"
import { granted } from "../support/replies.js"

const ttl = Duration.seconds(10)
const k = RedisBackend.keys()


/** A backend and a raw client in `mode`, two sessions, and a new lease the first holds. */
const heldByOne = (mode: Mode, label: string) =>
  Effect.gen(function*() {
    const b = yield* RedisBackend.make(mode.options)
    const raw = yield* rawClient(mode.cluster)
    const name = uniqueName(label)
    const holder = (yield* b.openSession(ttl)).sessionId
    const other = (yield* b.openSession(ttl)).sessionId
    const token = granted(yield* b.acquire(holder, name))
    return { b, raw, name, holder, other, token }
  })

for (const mode of modes) {
  describe(`Redis holder record, ${mode.label}`, () => {
    it.scopedLive("a lease hash deleted by hand is restored for its live holder: another session is refused", () =>
      Effect.gen(function*() {
        const { b, raw, name, holder, other, token } = yield* heldByOne(mode, "deleted")
        expect(yield* Effect.promise(() => raw.get(k.leaseHolder(name)))).toBe(`${holder}:${token}`)

        yield* Effect.promise(() => raw.del(k.lease(name)))
        const refused = yield* b.acquire(other, name)
        expect(refused._tag).toBe("HeldBy")
        if (refused._tag === "HeldBy") expect(refused.token).toBe(token)
        expect(yield* Effect.promise(() => raw.hmget(k.lease(name), "session", "token"))).toEqual([holder, token.toString()])
        expect(yield* Effect.promise(() => raw.pttl(k.lease(name)))).toBe(-1)

        // Deleted again: the holder's own acquire gets it back with the same token.
        yield* Effect.promise(() => raw.del(k.lease(name)))
        expect(granted(yield* b.acquire(holder, name))).toBe(token)

        // Deleted again: a renewal that lists the leases restores it too.
        yield* Effect.promise(() => raw.del(k.lease(name)))
        const renewed = yield* b.keepAlive(holder, ttl)
        if (renewed._tag !== "Live") return expect.fail(`expected Live, got ${renewed._tag}`)
        expect(renewed.leases).toContainEqual({ name, token })
        expect(yield* Effect.promise(() => raw.hget(k.lease(name), "session"))).toBe(holder)

        // The holder releases with its token: the record goes, and the other session gets a larger token.
        yield* b.release(holder, name, token)
        expect(yield* Effect.promise(() => raw.exists(k.leaseHolder(name)))).toBe(0)
        expect(granted(yield* b.acquire(other, name))).toBeGreaterThan(token)
        yield* b.closeSession(holder)
        yield* b.closeSession(other)
      }))

    it.scopedLive("a release after the hash was deleted by hand ends the lease: the holder's next acquire is a new grant with a higher token", () =>
      Effect.gen(function*() {
        const { b, raw, name, holder, other, token } = yield* heldByOne(mode, "deleted-released")
        yield* Effect.promise(() => raw.del(k.lease(name)))
        // The release finds no hash, but the record names this session and token: the lease ends.
        yield* b.release(holder, name, token)
        expect(yield* Effect.promise(() => raw.exists(k.leaseHolder(name)))).toBe(0)
        expect(yield* Effect.promise(() => raw.hget(k.lease(name), "token"))).toBe(token.toString())
        const renewed = yield* b.keepAlive(holder, ttl)
        if (renewed._tag !== "Live") return expect.fail(`expected Live, got ${renewed._tag}`)
        expect(renewed.leases ?? []).not.toContainEqual({ name, token })
        // Before, the record restored the ended lease for the same session, with the ended term's token.
        const next = granted(yield* b.acquire(holder, name))
        expect(next).toBeGreaterThan(token)
        // A stale release (wrong token, or another session) of a deleted hash changes nothing.
        yield* Effect.promise(() => raw.del(k.lease(name)))
        yield* b.release(other, name, next)
        yield* b.release(holder, name, token)
        expect(yield* Effect.promise(() => raw.get(k.leaseHolder(name)))).toBe(`${holder}:${next}`)
        yield* b.closeSession(holder)
        yield* b.closeSession(other)
      }))

    it.scopedLive("a lease hash deleted by hand whose holder's session is gone is free, with a larger token", () =>
      Effect.gen(function*() {
        const { b, raw, name, holder, other, token } = yield* heldByOne(mode, "deleted-gone")
        yield* Effect.promise(() => raw.del(k.lease(name)))
        // The holder's session ends without releasing (as if it expired): its close finds no hash naming it.
        yield* b.closeSession(holder)
        const next = granted(yield* b.acquire(other, name))
        expect(next).toBeGreaterThan(token)
        expect(yield* Effect.promise(() => raw.get(k.leaseHolder(name)))).toBe(`${other}:${next}`)
        yield* b.closeSession(other)
      }))

    it.scopedLive("a semaphore's pool hash deleted by hand while its holds live: they still count, a permit beyond the limit waits", () =>
      Effect.gen(function*() {
        const b = yield* RedisBackend.make(mode.options)
        const raw = yield* rawClient(mode.cluster)
        const pool = uniqueName("pool")
        const permit = (id: string) => LeaseName.holdName({ pool, mode: "permits", weight: 1, limit: 2, id })
        const holder = (yield* b.openSession(ttl)).sessionId
        const other = (yield* b.openSession(ttl)).sessionId
        granted(yield* b.acquire(holder, permit("a")))
        granted(yield* b.acquire(holder, permit("b")))
        yield* Effect.promise(() => raw.del(`${k.lease(pool)}:pool`))
        // The pool is made again with the two live holds counted: a third permit of 2 is refused.
        expect((yield* b.acquire(other, permit("c")))._tag).toBe("HeldBy")
        yield* b.closeSession(holder)
        yield* b.closeSession(other)
      }))
  })
}

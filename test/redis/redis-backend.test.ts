/**
 * The Redis backend against the real servers: the SPI called directly, the key layout of SPEC section
 * 8 checked with a plain client, hints and the pub/sub channel, the per-slot Cluster design, and
 * failures (server gone, paused, demoted to a replica, script cache flushed) on private servers.
 * Real time, short ttl, unique names per test.
 */
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { SimbaConfigError } from "../../src/Errors.js"
import {
  type AcquireReply,
  BackendError,
  directOf,
  type Done,
  Hint,
  type KeepAliveReply,
  LeaseBackend
} from "../../src/LeaseBackend.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import * as Scripts from "../../src/layers/redis/scripts.js"
import {
  awaitFreed,
  awaitWaiting,
  clusterNodes,
  freedOf,
  freePort,
  modes,
  privateServer,
  rawClient,
  type RawClient,
  spyScripts,
  serverTime,
  releaseHeard,
  uniqueName,
  watchHints
} from "./RedisServers.js"
import { granted, live } from "../support/replies.js"

const ttl = Duration.millis(1500)
/** Below every token a Redis backend issues: the server's TIME in microseconds has been above it since 2001. */
const aboveTime = 10n ** 15n
/** A store (private server, or a new key prefix) nobody used: no lock-delay needed (see `lockDelay`). */
const fresh = { lockDelay: 0 } as const
const k = RedisBackend.keys()

const sortedLeases = (reply: KeepAliveReply) => {
  const leases = live(reply).leases
  if (leases === undefined) expect.fail("expected the lease list (a renewal without a known version lists it)")
  return [...leases].sort((a, b) => a.name.localeCompare(b.name)).map((l) => [l.name, l.token])
}
/** The error, which must be a `BackendError` (not a `SimbaConfigError`). */
type StartError = BackendError | SimbaConfigError | RedisBackend.EvictionPolicyError
const backendError = (error: StartError): BackendError => {
  if (error._tag !== "BackendError") expect.fail(`expected BackendError, got ${error._tag}: ${error.message}`)
  return error
}
/** The error, which must be a `SimbaConfigError`. */
const configError = (error: StartError): SimbaConfigError => {
  if (error._tag !== "SimbaConfigError") expect.fail(`expected SimbaConfigError, got ${error._tag}: ${error.message}`)
  return error
}

/** Every connection whose `CLIENT SETNAME` contains `name`, on every node of the mode. */
const clientsNamed = (clusterMode: boolean, name: string) =>
  Effect.gen(function*() {
    const ports = clusterMode ? clusterNodes.map((node) => node.port) : [6379]
    const found: Array<{ port: number; id: string; name: string }> = []
    for (const port of ports) {
      const admin = yield* rawClient(false, port)
      const list = String(yield* Effect.promise(() => admin.call("CLIENT", "LIST")))
      for (const line of list.split("\n")) {
        const id = /\bid=(\d+)/.exec(line)?.[1]
        const client = /\bname=(\S*)/.exec(line)?.[1]
        if (id !== undefined && client !== undefined && client.includes(name)) found.push({ port, id, name: client })
      }
    }
    return found
  }).pipe(Effect.scoped)

for (const mode of modes) {
  describe(`Redis backend, ${mode.label}`, () => {
    const make = (extra: RedisBackend.RedisOptions = {}) => RedisBackend.make({ ...mode.options, ...extra })

    it.scopedLive("keys follow SPEC section 8; the lease hash persists while held, expires once free, and keeps its token", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const [name, group] = [uniqueName("lease"), uniqueName("group")]
        const { sessionId, remaining } = yield* b.openSession(ttl)
        expect(sessionId).toMatch(/^[0-9a-f]{32}$/)
        // The server's PTTL right after `SET PX 1500`: a millisecond may already have passed.
        expect(Duration.toMillis(remaining)).toBeGreaterThanOrEqual(1490)
        expect(Duration.toMillis(remaining)).toBeLessThanOrEqual(1500)
        const home = k.session(sessionId)
        expect(home).toBe(`simba:session:{${sessionId}}`)
        const homeTtl = yield* Effect.promise(() => raw.pttl(home))
        expect(homeTtl).toBeGreaterThan(1000)
        expect(homeTtl).toBeLessThanOrEqual(1500)

        const token = granted(yield* b.acquire(sessionId, name))
        expect(token).toBeGreaterThan(aboveTime) // at least the server's TIME in microseconds
        const leaseKey = `simba:lease:{${name}}`
        expect(k.lease(name)).toBe(leaseKey)
        expect(yield* Effect.promise(() => raw.type(leaseKey))).toBe("hash")
        const hash = yield* Effect.promise(() => raw.hgetall(leaseKey))
        expect(hash.session).toBe(sessionId)
        expect(hash.token).toBe(token.toString())
        const now = yield* serverTime(raw)
        // `expires` is the holder's expiry on the server's clock.
        expect(Number(hash.expires)).toBeGreaterThan(now)
        expect(Number(hash.expires)).toBeLessThanOrEqual(now + 1500)
        expect(yield* Effect.promise(() => raw.pttl(leaseKey))).toBe(-1)

        if (mode.routeBySlot) {
          const tag = RedisBackend.slotTag(RedisBackend.keySlot(leaseKey))
          expect(yield* Effect.promise(() => raw.hkeys(k.sessionSlots(sessionId)))).toEqual([tag])
          expect(yield* Effect.promise(() => raw.smembers(k.shadowLeases(tag, sessionId)))).toEqual([name])
          // The shadow lives at least as long as the home key (read first, so it had more time to run down).
          const shadowTtl = yield* Effect.promise(() => raw.pttl(k.shadow(tag, sessionId)))
          expect(shadowTtl).toBeGreaterThanOrEqual((yield* Effect.promise(() => raw.pttl(home))) - 1)
        } else {
          expect(yield* Effect.promise(() => raw.smembers(`simba:session:{${sessionId}}:leases`))).toEqual([name])
        }

        expect(yield* b.join(sessionId, group)).toBe("Joined")
        const groupKey = `simba:group:{${group}}`
        expect(k.group(group)).toBe(groupKey)
        expect(yield* Effect.promise(() => raw.smembers(`simba:session:{${sessionId}}:groups`))).toEqual([group])
        const score = Number(yield* Effect.promise(() => raw.zscore(groupKey, sessionId)))
        expect(score).toBeGreaterThan(now)
        expect(score).toBeLessThanOrEqual((yield* serverTime(raw)) + 1500)

        yield* b.release(sessionId, name, token)
        const released = yield* Effect.promise(() => raw.hgetall(leaseKey))
        expect(released).toEqual({ token: token.toString() })
        // Free: it expires after idleExpiry (1 hour by default) unless granted again.
        const idle = yield* Effect.promise(() => raw.pttl(leaseKey))
        expect(idle).toBeGreaterThan(3_590_000)
        expect(idle).toBeLessThanOrEqual(3_600_000)

        yield* b.closeSession(sessionId)
        expect(yield* Effect.promise(() => raw.exists(home))).toBe(0)
        expect(yield* Effect.promise(() => raw.zscore(groupKey, sessionId))).toBeNull()
        // The next grant of the name issues a larger token, stored in the hash.
        const next = yield* b.openSession(ttl)
        const second = granted(yield* b.acquire(next.sessionId, name))
        expect(second).toBeGreaterThan(token)
        yield* b.closeSession(next.sessionId)
        expect(yield* Effect.promise(() => raw.hget(leaseKey, "token"))).toBe(second.toString())
      }))

    it.scopedLive("acquire: idempotent for the holder, HeldBy with the holder's token and time, takeover after expiry", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const name = uniqueName("lease")
        const holder = (yield* b.openSession(ttl)).sessionId
        const other = (yield* b.openSession(Duration.seconds(10))).sessionId
        const token = granted(yield* b.acquire(holder, name))
        expect(granted(yield* b.acquire(holder, name))).toBe(token)
        const held = yield* b.acquire(other, name)
        if (held._tag !== "HeldBy") return expect.fail(`expected HeldBy, got ${held._tag}`)
        expect(held.token).toBe(token)
        expect(held.remaining).toBeDefined()
        expect(Duration.toMillis(held.remaining!)).toBeGreaterThan(1000)
        expect(Duration.toMillis(held.remaining!)).toBeLessThanOrEqual(1500)
        // The holder goes silent: its session expires on the server, and the lease is taken over.
        yield* Effect.sleep(Duration.millis(1700))
        expect((yield* b.keepAlive(holder, ttl))._tag).toBe("Expired")
        expect((yield* b.acquire(holder, name))._tag).toBe("Expired")
        expect(yield* b.join(holder, uniqueName("group"))).toBe("Expired")
        const next = granted(yield* b.acquire(other, name))
        expect(next).toBeGreaterThan(token)
        // A late release by the expired holder changes nothing.
        yield* b.release(holder, name, token)
        expect(sortedLeases(yield* b.keepAlive(other, Duration.seconds(10)))).toEqual([[name, next]])
        yield* b.closeSession(other)
      }))

    it.scopedLive(
      mode.routeBySlot
        ? "no direct forms: a renewal and an acquire are several calls here, so the client runs them as Effects"
        : "the direct forms (no fiber per call) answer as the Effects do: grant, HeldBy, renewal lists, release",
      () =>
        Effect.gen(function*() {
          const b = yield* make()
          const direct = directOf(b, yield* Effect.tracer)
          if (mode.routeBySlot) return expect(direct).toBeUndefined()
          const { acquire, keepAlive, release } = direct!
          const context = { clock: yield* Effect.clock, metricLabels: [] }
          const call = <A>(start: (done: Done<A>) => void) =>
            Effect.async<A, BackendError>((resume) => start((answer) => resume(answer)))
          const name = uniqueName("direct")
          const holder = (yield* b.openSession(ttl)).sessionId
          const other = (yield* b.openSession(ttl)).sessionId
          const token = granted(yield* call<AcquireReply>((done) => acquire!(context, holder, name, 1, done)))
          const held = yield* call<AcquireReply>((done) => acquire!(context, other, name, 1, done))
          expect(held._tag === "HeldBy" && held.token).toBe(token)
          const renewed = yield* call<KeepAliveReply>((done) => keepAlive!(context, holder, 1500, undefined, done))
          expect(sortedLeases(renewed)).toEqual([[name, token]])
          yield* call<void>((done) => release!(context, holder, name, token, done))
          // The release handed the lease to the queued session, with a higher token.
          const handedOff = sortedLeases(yield* b.keepAlive(other, ttl))
          expect(handedOff.map(([leased]) => leased)).toEqual([name])
          expect(handedOff[0]![1]).toBeGreaterThan(token)
          // A closed session is Expired on the direct path too.
          yield* b.closeSession(holder)
          expect((yield* call<AcquireReply>((done) => acquire!(context, holder, uniqueName("direct"), 1, done)))._tag)
            .toBe("Expired")
          yield* b.closeSession(other)
        })
    )

    it.scopedLive("reserve: a grant reserves the whole block (its token the last); a session queued behind it tells the holder", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const name = uniqueName("block")
        const holder = (yield* b.openSession(ttl)).sessionId
        const other = (yield* b.openSession(ttl)).sessionId
        const first = granted(yield* b.acquire(holder, name))
        yield* b.release(holder, name, first)
        const reply = yield* b.acquire(holder, name, 16)
        expect(reply).toMatchObject({ _tag: "Granted", reserved: 16 })
        const token = granted(reply)
        expect(token - 15n).toBeGreaterThan(first)
        const heard: Array<Hint> = []
        yield* b.hints.pipe(Stream.runForEach((hint) => Effect.sync(() => heard.push(hint))), Effect.forkScoped)
        const wanted = (hint: Hint) => hint._tag === "Wanted" && hint.name === name && hint.holder === holder
        // Mode node: on the holder's own channel. Per-slot mode has none: its cache ends by keep.
        yield* Effect.gen(function*() {
          expect((yield* b.acquire(other, name))._tag).toBe("HeldBy")
          yield* Effect.sleep(Duration.millis(50))
          if (!heard.some(wanted)) return yield* Effect.fail("not heard")
        }).pipe(Effect.retry(Schedule.recurs(mode.routeBySlot ? 0 : 20)), Effect.ignore)
        expect(heard.some(wanted)).toBe(!mode.routeBySlot)
        // A grant without a block is not wanted: its holder does not cache.
        yield* b.release(holder, name, token)
        // Handed to the waiter (mode node), or reserved for it to take (per-slot mode).
        if (mode.routeBySlot) granted(yield* b.acquire(other, name))
        const handed = sortedLeases(yield* b.keepAlive(other, ttl))
        expect(handed.map(([leased]) => leased)).toEqual([name])
        expect(handed[0]![1]).toBeGreaterThan(token)
        heard.length = 0
        expect((yield* b.acquire(holder, name))._tag).toBe("HeldBy")
        yield* Effect.sleep(Duration.millis(200))
        expect(heard.filter((hint) => hint._tag === "Wanted")).toEqual([])
        yield* b.closeSession(holder)
        yield* b.closeSession(other)
      }))

    it.scopedLive("keepAlive renews the session, lists its leases and groups, never shortens and never revives", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const names = Array.from({ length: 12 }, (_, i) => uniqueName(`n${i}`))
        const group = uniqueName("group")
        const { sessionId } = yield* b.openSession(ttl)
        const peer = (yield* b.openSession(ttl)).sessionId
        const tokens = yield* Effect.forEach(names, (name) => Effect.map(b.acquire(sessionId, name), granted))
        expect(yield* b.join(sessionId, group)).toBe("Joined")
        expect(yield* b.join(peer, group)).toBe("Joined")
        // Twice the ttl, renewing every third of it: still alive. The peer renews twice only.
        for (let i = 0; i < 6; i++) {
          yield* Effect.sleep(Duration.millis(500))
          const reply = live(yield* b.keepAlive(sessionId, ttl))
          expect(Duration.toMillis(reply.remaining)).toBeGreaterThanOrEqual(1490)
          expect(Duration.toMillis(reply.remaining)).toBeLessThanOrEqual(1500)
          expect(sortedLeases(reply)).toEqual(
            names.map((name, j) => [name, tokens[j]!] as const).sort((a, c) => a[0].localeCompare(c[0]))
          )
          expect(reply.groups.map((view) => view.group)).toEqual([group])
          if (i < 2) live(yield* b.keepAlive(peer, ttl))
        }
        // The peer stopped renewing at ~1 s, 2 s ago: it has expired and left the group's view.
        const last = live(yield* b.keepAlive(sessionId, ttl))
        expect(last.groups).toEqual([{ group, members: [sessionId] }])
        // A shorter ttl does not shorten the session.
        const shorter = live(yield* b.keepAlive(sessionId, Duration.millis(200)))
        expect(Duration.toMillis(shorter.remaining)).toBeGreaterThan(1000)
        expect(yield* Effect.promise(() => raw.pttl(k.session(sessionId)))).toBeGreaterThan(1000)
        // Released leases leave the list.
        yield* b.release(sessionId, names[0]!, tokens[0]!)
        expect(sortedLeases(yield* b.keepAlive(sessionId, ttl)).map(([name]) => name)).not.toContain(names[0])
        yield* b.closeSession(sessionId)
        expect((yield* b.keepAlive(sessionId, ttl))._tag).toBe("Expired")
        // Never revived: the keys stay gone after the Expired answer.
        expect(yield* Effect.promise(() => raw.exists(k.session(sessionId)))).toBe(0)
      }))

    it.scopedLive("release and closeSession publish `released` on the channel named like the lease key; a backend whose session waits hears it", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const [released, closed, quiet] = [uniqueName("released"), uniqueName("closed"), uniqueName("quiet")]
        // A plain client subscribed to the exact channel names of SPEC section 8 (no pattern).
        const listener = yield* rawClient(mode.cluster)
        const messages: Array<[string, string]> = []
        listener.on("message", (channel: string, message: string) => messages.push([channel, message]))
        const channel = (name: string) => `simba:lease:{${name}}`
        yield* Effect.promise(() => listener.subscribe(channel(released), channel(closed), channel(quiet)))
        const heard = (n: number) =>
          Effect.sleep(Duration.millis(100)).pipe(Effect.repeat({ until: () => messages.length >= n, schedule: Schedule.recurs(50) }))

        const { sessionId } = yield* b.openSession(ttl)
        const token = granted(yield* b.acquire(sessionId, released))
        yield* b.release(sessionId, released, token)
        granted(yield* b.acquire(sessionId, closed))
        yield* b.closeSession(sessionId)
        yield* heard(2)
        // Sorted: on a cluster the two channels' messages come from different nodes over the cluster
        // bus, which keeps the order per publisher only.
        expect([...messages].sort((a, c) => a[0].localeCompare(c[0]))).toEqual(
          [[channel(released), "released"], [channel(closed), "released"]].sort((a, c) => a[0]!.localeCompare(c[0]!))
        )
        // No session of this backend waited for them: its subscriber does not hear those channels.
        expect((yield* watch.seen).some((hint) => freedOf(released)(hint) || freedOf(closed)(hint))).toBe(false)

        // A stale release publishes nothing; the close that frees the lease does.
        const s2 = (yield* b.openSession(ttl)).sessionId
        const t2 = granted(yield* b.acquire(s2, quiet))
        yield* b.release(s2, quiet, t2 + 1n)
        yield* Effect.sleep(Duration.millis(200))
        expect(messages.length).toBe(2)
        yield* b.closeSession(s2)
        yield* heard(3)
        expect(messages[2]).toEqual([channel(quiet), "released"])

        // While a session waits for a lease, what is published on its channel is what the backend hears.
        const external = uniqueName("external")
        const holder = (yield* b.openSession(ttl)).sessionId
        granted(yield* b.acquire(holder, external))
        const { seen, waiter } = yield* awaitWaiting(b, watch, external, ttl)
        yield* Effect.promise(() => raw.publish(channel(external), "released"))
        yield* awaitFreed(watch, external, seen)
        expect((yield* watch.seen).slice(seen).filter(freedOf(external))).toEqual([Hint.Released({ name: external })])
        yield* b.closeSession(holder)
        yield* b.closeSession(waiter)
      }))

    it.scopedLive("GroupChanged hints on join, leave and close; members drops expired sessions", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const group = uniqueName("group")
        const count = (hints: ReadonlyArray<Hint>) =>
          hints.filter((hint) => hint._tag === "GroupChanged" && hint.group === group).length
        // Waits for `n` changes, then checks that no more came.
        const changes = (n: number) =>
          Effect.gen(function*() {
            yield* watch.awaitSeen((hints) => count(hints) >= n)
            yield* Effect.sleep(Duration.millis(100))
            expect(count(yield* watch.seen)).toBe(n)
          })
        const a = (yield* b.openSession(Duration.seconds(10))).sessionId
        // 1.5 s: time enough, on a loaded machine, to join and be listed before it expires.
        const silent = (yield* b.openSession(Duration.millis(1500))).sessionId
        expect(yield* b.join(a, group)).toBe("Joined")
        expect(yield* b.join(silent, group)).toBe("Joined")
        yield* changes(2)
        expect(yield* b.members(group)).toEqual([a, silent].sort())
        yield* Effect.sleep(Duration.millis(1900))
        // `members` drops the expired session, and says so.
        expect(yield* b.members(group)).toEqual([a])
        yield* changes(3)
        yield* b.leave(a, group)
        expect(yield* b.members(group)).toEqual([])
        yield* changes(4)
        // Leaving again changes nothing.
        yield* b.leave(a, group)
        yield* changes(4)
        expect(live(yield* b.keepAlive(a, ttl)).groups).toEqual([])
        expect(yield* b.join(a, group)).toBe("Joined")
        yield* changes(5)
        yield* b.closeSession(a)
        yield* changes(6)
        expect(yield* b.members(group)).toEqual([])
      }))

    it.scopedLive("hints resume after the subscriber connection is killed", () =>
      Effect.gen(function*() {
        const connectionName = `simba-test-${randomBytes(6).toString("hex")}`
        const b = yield* make({ connectionName })
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const before = (yield* clientsNamed(mode.cluster, `${connectionName}:hints`))
          .filter((c) => !mode.cluster || c.name.includes("(subscriber)"))
        expect(before.length).toBe(1)
        const killer = yield* rawClient(false, before[0]!.port)
        yield* Effect.promise(() => killer.call("CLIENT", "KILL", "ID", before[0]!.id))
        // Hints come back once ioredis has reconnected: a waiting session's lease channel is heard.
        yield* Effect.suspend(() => releaseHeard(b, watch, uniqueName("after-kill"), ttl, "250 millis")).pipe(
          Effect.retry(Schedule.recurs(20))
        )
        const after = (yield* clientsNamed(mode.cluster, `${connectionName}:hints`))
          .filter((c) => !mode.cluster || c.name.includes("(subscriber)"))
        expect(after.length).toBe(1)
        // Client ids are per node: in a cluster the new subscriber may sit on another node under the same number.
        const where = (c: { port: number; id: string }) => `${c.port}/${c.id}`
        expect(where(after[0]!)).not.toBe(where(before[0]!))
      }))

    it.scopedLive("a backend hears a lease's channel while one of its sessions waits: one Released when it starts, none for a later waiter", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw)
        const name = uniqueName("watched")
        const channel = `simba:lease:{${name}}`
        // Classic pub/sub subscriptions are per node: count them on every node.
        const subscribers = Effect.forEach(
          mode.cluster ? clusterNodes.map((node) => node.port) : [6379],
          (port) =>
            Effect.flatMap(rawClient(false, port), (node) =>
              Effect.promise(() => node.call("PUBSUB", "NUMSUB", channel) as Promise<[string, number]>))
        ).pipe(Effect.map((replies) => replies.reduce((sum, [, n]) => sum + Number(n), 0)), Effect.scoped)
        const holder = (yield* b.openSession(ttl)).sessionId
        const token = granted(yield* b.acquire(holder, name))
        // Held, nobody waiting: nobody hears its channel (an uncontended release wakes no client).
        expect(yield* subscribers).toBe(0)
        const { seen, waiter } = yield* awaitWaiting(b, watch, name, ttl)
        expect(yield* subscribers).toBe(1)
        // A second session of the same backend waits: the channel was heard before it asked, no hint.
        const second = (yield* b.openSession(ttl)).sessionId
        expect((yield* b.acquire(second, name))._tag).toBe("HeldBy")
        yield* Effect.sleep(Duration.millis(200))
        expect((yield* watch.seen).slice(seen).filter(freedOf(name))).toEqual([])
        yield* b.release(holder, name, token)
        yield* awaitFreed(watch, name, seen)
        // Neither waits any more: the channel stays heard for a while (`lingerMillis`), once.
        for (const sessionId of [holder, waiter, second]) yield* b.closeSession(sessionId)
        expect(yield* subscribers).toBe(1)
      }))

    it.scopedLive("closing the scope closes both connections", () =>
      Effect.gen(function*() {
        const connectionName = `simba-test-${randomBytes(6).toString("hex")}`
        const scope = yield* Scope.make()
        const b = yield* make({ connectionName }).pipe(Scope.extend(scope))
        const { sessionId } = yield* b.openSession(ttl)
        granted(yield* b.acquire(sessionId, uniqueName("lease")))
        expect((yield* clientsNamed(mode.cluster, connectionName)).length).toBeGreaterThanOrEqual(2)
        yield* Scope.close(scope, Exit.void)
        yield* Effect.sleep(Duration.millis(100))
        expect(yield* clientsNamed(mode.cluster, connectionName)).toEqual([])
      }))

    it.scopedLive("a custom keyPrefix names every key and channel", () =>
      Effect.gen(function*() {
        const prefix = `simba-test-${randomBytes(4).toString("hex")}`
        const b = yield* make({ keyPrefix: prefix, ...fresh })
        const raw = yield* rawClient(mode.cluster)
        const watch = yield* watchHints(b, raw, prefix)
        const name = uniqueName("lease")
        const { sessionId } = yield* b.openSession(ttl)
        const token = granted(yield* b.acquire(sessionId, name))
        expect(yield* Effect.promise(() => raw.hget(`${prefix}:lease:{${name}}`, "session"))).toBe(sessionId)
        expect(yield* Effect.promise(() => raw.exists(`${prefix}:session:{${sessionId}}`))).toBe(1)
        expect(yield* Effect.promise(() => raw.exists(`simba:lease:{${name}}`))).toBe(0)
        yield* b.release(sessionId, name, token)
        // The channels are the prefix's: a release is heard there by a backend whose session waits.
        yield* releaseHeard(b, watch, uniqueName("channel"), ttl)
        yield* b.closeSession(sessionId)
      }))

    it.scopedLive("bad input never reaches Redis: invalid names fail, foreign session ids are unknown", () =>
      Effect.gen(function*() {
        const b = yield* make()
        const { sessionId } = yield* b.openSession(ttl)
        for (const name of ["", "a}b", "{x}", "..", "x".repeat(129)]) {
          const error = yield* Effect.flip(b.acquire(sessionId, name))
          expect(error).toBeInstanceOf(BackendError)
          expect(error.operation).toBe("acquire")
        }
        expect((yield* Effect.flip(b.join(sessionId, "a b")))._tag).toBe("BackendError")
        expect((yield* b.acquire("not-a-session", uniqueName("lease")))._tag).toBe("Expired")
        expect((yield* b.keepAlive("NOT-HEX", ttl))._tag).toBe("Expired")
        yield* b.closeSession("}{")
        expect((yield* Effect.flip(b.openSession(Duration.zero))).operation).toBe("openSession")
        yield* b.closeSession(sessionId)
      }))
  })
}

/** How many times the server at `admin` ran `command` (`INFO commandstats`, lower-case name). */
const commandCalls = (admin: RawClient, command: string) =>
  Effect.promise(() => admin.info("commandstats")).pipe(
    Effect.map((info) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? "0"))
  )

/**
 * Counts the script calls a backend sends through `client`, by script; the `refused` ones are
 * answered as Redis 6 answers a script with flags.
 */
const countScriptCalls = (
  client: RawClient,
  refused: ReadonlyArray<{ readonly script: { readonly sha: string } }> = []
) => {
  const refusedShas = new Set(refused.map(({ script }) => script.sha))
  const calls = new Map<string, number>()
  spyScripts(client, ({ script: { sha } }) => {
    calls.set(sha, (calls.get(sha) ?? 0) + 1)
    if (!refusedShas.has(sha)) return undefined
    const error = new Error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'")
    return Promise.reject(Object.assign(error, { name: "ReplyError" }))
  })
  const count = (script: { readonly script: { readonly sha: string } }) => calls.get(script.script.sha) ?? 0
  return { calls, count }
}

describe("Redis Cluster: per-slot design", () => {
  it("keySlot agrees with CLUSTER KEYSLOT and every slot has a tag hashing to it", async () => {
    for (let slot = 0; slot < 16384; slot++) expect(RedisBackend.keySlot(RedisBackend.slotTag(slot))).toBe(slot)
    const raw = new Redis(7000, "127.0.0.1")
    try {
      for (const key of ["foo", "simba:lease:{orders}", "a{}b", "{}", "x{y", "é{ü}", `simba:shadow:{${RedisBackend.slotTag(42)}}:s`]) {
        expect(RedisBackend.keySlot(key)).toBe(Number(await raw.call("CLUSTER", "KEYSLOT", key)))
      }
    } finally {
      raw.disconnect()
    }
  })

  /**
   * On the suite's cluster: a session's shadow in slot 0 at version 4 relying on its pulse there
   * (one lease, `y`, 2 s to live), and a slot of another node.
   */
  const shadowInSlotZero = Effect.gen(function*() {
    const client = yield* rawClient(true)
    if (!("slots" in client)) return yield* Effect.dieMessage("the suite's cluster answered as a single node")
    yield* Effect.promise(() => client.ping())
    const nodeOf = (slot: number) => client.slots[slot]?.[0]
    const here = 0
    const slots = Array.from({ length: 16384 }, (_, slot) => slot)
    const elsewhere = slots.find((slot) => nodeOf(slot) !== nodeOf(here))!
    const sessionId = randomBytes(16).toString("hex")
    const local = k.shadow(RedisBackend.slotTag(here), sessionId)
    const pulse = k.pulse(RedisBackend.slotTag(here), sessionId)
    yield* Effect.promise(() => client.hset(local, "ver", "4", "pulse", pulse))
    yield* Effect.promise(() => client.sadd(`${local}:leases`, "y"))
    yield* Effect.promise(() => client.pexpire(local, 2000))
    yield* Effect.promise(() => client.pexpire(`${local}:leases`, 2000))
    return { client, nodeOf, slots, here, elsewhere, sessionId, local, pulse }
  })

  it.scopedLive("renewSlots leaves a slot its node does not serve (moved by resharding) to renewSlot, untouched", () =>
    Effect.gen(function*() {
      const { client, elsewhere, here, local, pulse, sessionId } = yield* shadowInSlotZero
      const away = k.shadow(RedisBackend.slotTag(elsewhere), sessionId)
      yield* Effect.promise(() => client.hset(away, "ver", "1"))
      yield* Effect.promise(() => client.sadd(`${away}:leases`, "x"))
      yield* Effect.promise(() => client.pexpire(away, 2000))
      const call = Scripts.renewSlots({ pulse }, {
        sessionId,
        remaining: 60_000,
        margin: 0,
        shadowBase: k.shadowBase,
        groupPrefix: k.groupPrefix,
        groupNames: "",
        slotList: [RedisBackend.slotTag(here), "4", RedisBackend.slotTag(elsewhere), "1", RedisBackend.slotTag(here), "3"].join(",")
      })
      const reply = yield* Effect.promise(() => client.eval(call.script.lua, call.keys.length, ...call.keys, ...call.args))
      // The pulse is made (its count starts at the server's TIME in µs); the second slot (another
      // node's) and the third (a version the shadow no longer has) are left.
      expect(reply).toEqual([expect.stringMatching(/^\d{16}:0$/), [2, 3], []])
      expect(yield* Effect.promise(() => client.pttl(local))).toBeGreaterThan(50_000)
      expect(yield* Effect.promise(() => client.pttl(`${local}:leases`))).toBeGreaterThan(50_000)
      expect(yield* Effect.promise(() => client.pttl(away))).toBeLessThanOrEqual(2000)
      yield* Effect.promise(() => client.del(away, `${away}:leases`))
      yield* Effect.promise(() => client.del(local, `${local}:leases`))
    }))

  it.scopedLive("renewShadows renews and lists the slots of its node, answers `moved` for another node's, closes a missing shadow", () =>
    Effect.gen(function*() {
      const { client, elsewhere, here, local, nodeOf, pulse, sessionId, slots } = yield* shadowInSlotZero
      const nearby = slots.find((slot) => slot !== here && nodeOf(slot) === nodeOf(here))!
      const call = Scripts.renewShadows({ pulse }, {
        sessionId,
        remaining: 60_000,
        margin: 0,
        shadowBase: k.shadowBase,
        leasePrefix: k.leasePrefix,
        slotList: [
          [RedisBackend.slotTag(here), "3", "4"],
          [RedisBackend.slotTag(elsewhere), "5", ""],
          [RedisBackend.slotTag(nearby), "9", ""]
        ].flat().join(",")
      })
      const reply = yield* Effect.promise(() => client.eval(call.script.lua, call.keys.length, ...call.keys, ...call.args))
      // The first still at the known version (no lease read), the second on another node (nothing
      // written there), the third missing: closed at the registration the client knows.
      expect(reply).toEqual([[0, "", "4"], "moved", [[], "9", ""]])
      expect(yield* Effect.promise(() => client.pttl(local))).toBeGreaterThan(50_000)
      expect(yield* Effect.promise(() => client.pttl(`${local}:leases`))).toBeGreaterThan(50_000)
      const away = k.shadow(RedisBackend.slotTag(elsewhere), sessionId)
      expect(yield* Effect.promise(() => client.exists(away))).toBe(0)
      const missing = k.shadow(RedisBackend.slotTag(nearby), sessionId)
      expect(yield* Effect.promise(() => client.hget(missing, "closed"))).toBe("9")
      yield* Effect.promise(() => client.del(local, `${local}:leases`, pulse))
      yield* Effect.promise(() => client.del(missing))
    }))

  for (const mode of modes.filter((m) => m.routeBySlot)) {
    it.scopedLive(`${mode.label}: renewal visits each slot of the session once and forgets emptied slots`, () =>
      Effect.gen(function*() {
        const b = yield* RedisBackend.make(mode.options)
        const raw = yield* rawClient(mode.cluster)
        const names = Array.from({ length: 40 }, (_, i) => uniqueName(`n${i}`))
        const slots = new Set(names.map((name) => RedisBackend.keySlot(k.lease(name))))
        const { sessionId } = yield* b.openSession(ttl)
        const tokens = yield* Effect.forEach(names, (name) => Effect.map(b.acquire(sessionId, name), granted), {
          concurrency: 8
        })
        const registered = yield* Effect.promise(() => raw.hkeys(k.sessionSlots(sessionId)))
        expect(new Set(registered)).toEqual(new Set([...slots].map(RedisBackend.slotTag)))
        expect(sortedLeases(yield* b.keepAlive(sessionId, ttl)).length).toBe(40)
        // Every shadow outlives the home key after a renewal (shadow read first, so it had more time to run down).
        for (const tag of registered) {
          const shadowTtl = yield* Effect.promise(() => raw.pttl(k.shadow(tag, sessionId)))
          const homeTtl = yield* Effect.promise(() => raw.pttl(k.session(sessionId)))
          expect(shadowTtl).toBeGreaterThanOrEqual(homeTtl - 1)
        }
        yield* Effect.forEach(names.slice(0, 30), (name, i) => b.release(sessionId, name, tokens[i]!), {
          concurrency: 8
        })
        const reply = yield* b.keepAlive(sessionId, ttl)
        expect(sortedLeases(reply).map(([name]) => name)).toEqual([...names.slice(30)].sort())
        const kept = new Set(names.slice(30).map((name) => RedisBackend.slotTag(RedisBackend.keySlot(k.lease(name)))))
        expect(new Set(yield* Effect.promise(() => raw.hkeys(k.sessionSlots(sessionId))))).toEqual(kept)
        // A forgotten slot is registered again by the next grant in it.
        const again = granted(yield* b.acquire(sessionId, names[0]!))
        expect(again).toBeGreaterThan(tokens[0]!)
        expect(sortedLeases(yield* b.keepAlive(sessionId, ttl)).length).toBe(11)
        yield* b.closeSession(sessionId)
        expect(yield* Effect.promise(() => raw.hget(k.lease(names[35]!), "session"))).toBeNull()
      }))

    it.scopedLive(`${mode.label}: renewals are versioned per slot; a shadow made anew never repeats a version`, () =>
      Effect.gen(function*() {
        const b = yield* RedisBackend.make(mode.options)
        const raw = yield* rawClient(mode.cluster)
        const names = Array.from({ length: 12 }, (_, i) => uniqueName(`v${i}`))
        const { sessionId } = yield* b.openSession(ttl)
        const tokens = yield* Effect.forEach(names, (name) => Effect.map(b.acquire(sessionId, name), granted))
        const first = yield* b.keepAlive(sessionId, ttl)
        expect(sortedLeases(first).length).toBe(12)
        const same = live(yield* b.keepAlive(sessionId, ttl, live(first).version))
        expect(same.leases).toBeUndefined()
        expect(same.version).toBe(live(first).version)
        // A release in one slot: the whole set is listed again (the unchanged slots asked once more).
        yield* b.release(sessionId, names[0]!, tokens[0]!)
        const released = yield* b.keepAlive(sessionId, ttl, same.version)
        expect(sortedLeases(released).map(([name]) => name)).toEqual(names.slice(1).sort())
        expect(live(released).version).not.toBe(same.version)
        // The shadow of a slot lost (deleted by hand) and made again by a grant there: a new version.
        const tag = RedisBackend.slotTag(RedisBackend.keySlot(k.lease(names[1]!)))
        yield* Effect.promise(() => raw.del(k.shadow(tag, sessionId)))
        expect(granted(yield* b.acquire(sessionId, names[1]!))).toBe(tokens[1]!)
        const remade = yield* b.keepAlive(sessionId, ttl, live(released).version)
        expect(sortedLeases(remade).map(([name]) => name)).toEqual(names.slice(1).sort())
        expect(live(remade).version).not.toBe(live(released).version)
        const settled = live(yield* b.keepAlive(sessionId, ttl, live(remade).version))
        expect(settled.leases).toBeUndefined()
        yield* b.closeSession(sessionId)
      }))

    it.scopedLive(`${mode.label}: an unchanged renewal is one call per node, the home's included; a changed one lists by node`, () =>
      Effect.gen(function*() {
        const client = yield* rawClient(mode.cluster)
        const { calls, count } = countScriptCalls(client)
        const b = yield* RedisBackend.makeWithClient(client, { ...fresh, routeBySlot: true })
        const names = Array.from({ length: 40 }, (_, i) => uniqueName(`u${i}`))
        const slots = new Set(names.map((name) => RedisBackend.keySlot(k.lease(name))))
        const nodes = new Set([...slots].map((slot) => "slots" in client ? client.slots[slot]?.[0] : "server"))
        const { sessionId } = yield* b.openSession(ttl)
        const tokens = yield* Effect.forEach(names, (name) => Effect.map(b.acquire(sessionId, name), granted), {
          concurrency: 8
        })
        // Two groups: renewed in their nodes' calls too.
        const groups = [uniqueName("g1"), uniqueName("g2")]
        for (const group of groups) expect(yield* b.join(sessionId, group)).toBe("Joined")
        const first = live(yield* b.keepAlive(sessionId, ttl))
        expect(first.leases?.length).toBe(40)
        expect(first.groups.map((g) => g.group).sort()).toEqual([...groups].sort())
        const same = live(yield* b.keepAlive(sessionId, ttl, first.version))
        expect(same.leases).toBeUndefined()
        expect(same.version).toBe(first.version)
        // The plan of that renewal is kept: the next one sends what it built.
        calls.clear()
        const steady = live(yield* b.keepAlive(sessionId, ttl, same.version))
        expect(steady.leases).toBeUndefined()
        expect(steady.groups).toEqual(expect.arrayContaining(groups.map((group) => ({ group, members: [sessionId] }))))
        expect(steady.groups).toHaveLength(2)
        for (const slot of groups.map((group) => RedisBackend.keySlot(k.group(group)))) {
          nodes.add("slots" in client ? client.slots[slot]?.[0] : "server")
        }
        // One call per node: the home's node renews the home and its slots in one.
        const homeNode = "slots" in client ? client.slots[RedisBackend.keySlot(k.session(sessionId))]?.[0] : "server"
        expect(count(Scripts.renewHomeSlots)).toBe(1)
        expect(count(Scripts.renewHome)).toBe(0)
        expect(count(Scripts.renewSlots)).toBe(new Set([...nodes, homeNode]).size - 1)
        expect(count(Scripts.renewSlot)).toBe(0)
        // Every shadow was extended to the home's time left.
        for (const slot of slots) {
          const shadowTtl = yield* Effect.promise(() => client.pttl(k.shadow(RedisBackend.slotTag(slot), sessionId)))
          expect(shadowTtl).toBeGreaterThan(Duration.toMillis(ttl) - 500)
        }
        // A release changes one slot: the whole set is listed again, by node (the changed slot, then
        // every slot: at most two renewShadows calls per node); a slot with a group in it goes alone.
        yield* b.release(sessionId, names[0]!, tokens[0]!)
        calls.clear()
        const released = live(yield* b.keepAlive(sessionId, ttl, same.version))
        expect(released.leases?.map(({ name }) => name).sort()).toEqual(names.slice(1).sort())
        expect(count(Scripts.renewShadows)).toBeGreaterThanOrEqual(1)
        expect(count(Scripts.renewShadows)).toBeLessThanOrEqual(2 * nodes.size)
        const groupSlots = new Set(groups.map((group) => RedisBackend.keySlot(k.group(group))))
        expect(count(Scripts.renewSlot)).toBeLessThanOrEqual(2 * [...slots].filter((slot) => groupSlots.has(slot)).length)
        calls.clear()
        expect(live(yield* b.keepAlive(sessionId, ttl, released.version)).leases).toBeUndefined()
        expect(count(Scripts.renewSlot)).toBe(0)
        yield* b.closeSession(sessionId)
      }))

    it.scopedLive(`${mode.label}: a server that refuses script flags (before Redis 7): an error that says Redis 7 is needed`, () =>
      Effect.gen(function*() {
        const client = yield* rawClient(mode.cluster)
        // The flagged scripts refused as Redis 6 refuses a script with flags.
        countScriptCalls(client, [Scripts.acquireInCluster, Scripts.renewHomeSlots])
        // A server before Redis 7 has no FUNCTION either: the scripts go by SHA there, as here.
        const b = yield* RedisBackend.makeWithClient(client, { ...fresh, routeBySlot: true, functions: false })
        const { sessionId } = yield* b.openSession(ttl)
        const refusals: ReadonlyArray<Effect.Effect<unknown, BackendError>> = [
          b.acquire(sessionId, uniqueName("r")),
          b.keepAlive(sessionId, ttl)
        ]
        for (const refused of refusals) {
          const error = yield* Effect.flip(refused)
          expect(error._tag).toBe("BackendError")
          expect(error.message).toMatch(/needs Redis 7 or later/)
        }
      }))

    it.scopedLive(`${mode.label}: a grant carrying a registration older than a slot's close registers again`, () =>
      Effect.gen(function*() {
        const b = yield* RedisBackend.make(mode.options)
        const raw = yield* rawClient(mode.cluster)
        const name = uniqueName("lease")
        const tag = RedisBackend.slotTag(RedisBackend.keySlot(k.lease(name)))
        const { sessionId } = yield* b.openSession(ttl)
        const token = granted(yield* b.acquire(sessionId, name))
        const seq = Number(yield* Effect.promise(() => raw.get(k.session(sessionId))))
        // As if a renewal had closed the slot at the next registration: the next attempt is stale.
        yield* Effect.promise(() => raw.hset(k.shadow(tag, sessionId), "closed", String(seq + 1)))
        expect(granted(yield* b.acquire(sessionId, name))).toBe(token)
        expect(Number(yield* Effect.promise(() => raw.get(k.session(sessionId))))).toBe(seq + 2)
        expect(sortedLeases(yield* b.keepAlive(sessionId, ttl))).toEqual([[name, token]])
        // A closed session's shadow stays closed: nothing can be granted through it any more.
        yield* b.closeSession(sessionId)
        expect(yield* Effect.promise(() => raw.hget(k.shadow(tag, sessionId), "closed"))).toBe("9007199254740992")
        expect((yield* b.acquire(sessionId, name))._tag).toBe("Expired")
      }))
  }
})

describe("Redis backend options", () => {
  it.scopedLive("layerConfig reads SIMBA_REDIS_URL / SIMBA_REDIS_CLUSTER through `config`", () =>
    Effect.gen(function*() {
      const use = (env: Record<string, string>) =>
        Effect.gen(function*() {
          const b = yield* LeaseBackend
          const { sessionId } = yield* b.openSession(ttl)
          const reply = yield* b.acquire(sessionId, uniqueName("config"))
          yield* b.closeSession(sessionId)
          return reply._tag
        }).pipe(
          Effect.provide(
            RedisBackend.layerConfig(RedisBackend.config).pipe(
              Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
            )
          )
        )
      expect(yield* use({})).toBe("Granted")
      expect(yield* use({ SIMBA_REDIS_URL: "redis://127.0.0.1:6379/0" })).toBe("Granted")
      expect(yield* use({ SIMBA_REDIS_CLUSTER: "127.0.0.1:7000, 127.0.0.1:7001" })).toBe("Granted")
      const bad = yield* Effect.exit(use({ SIMBA_REDIS_CLUSTER: "127.0.0.1" }))
      expect(Exit.isFailure(bad) && String(bad.cause)).toContain("host:port")
    }))

  it.scopedLive("invalid options fail with SimbaConfigError naming the option, before any connection", () =>
    Effect.gen(function*() {
      const cases: Array<[RedisBackend.RedisOptions, string]> = [
        [{ keyPrefix: "bad prefix" }, "redis.keyPrefix"],
        [{ keyPrefix: "x{y}" }, "redis.keyPrefix"],
        [{ keyPrefix: "" }, "redis.keyPrefix"],
        [{ url: "http://127.0.0.1:6379" }, "redis.url"],
        [{ url: "redis://127.0.0.1:6379/zero" }, "redis.url"],
        [{ url: "not a url" }, "redis.url"],
        [{ port: 70000 }, "redis.port"],
        [{ port: 1.5 }, "redis.port"],
        [{ url: "redis://127.0.0.1:6379/1", cluster: { nodes: clusterNodes } }, "redis.db"],
        [{ db: -1 }, "redis.db"],
        [{ cluster: { nodes: [] } }, "redis.cluster.nodes"],
        [{ cluster: { nodes: [{ host: "127.0.0.1", port: 0 }] } }, "redis.cluster.nodes"],
        [{ cluster: { nodes: clusterNodes }, routeBySlot: false }, "redis.routeBySlot"],
        [{ commandTimeout: Duration.zero }, "redis.commandTimeout"],
        [{ commandTimeout: Duration.infinity }, "redis.commandTimeout"],
        [{ commandTimeout: "soon" as Duration.DurationInput }, "redis.commandTimeout"],
        [{ connectTimeout: "0 millis" }, "redis.connectTimeout"],
        [{ connectionName: "has space" }, "redis.connectionName"]
      ]
      for (const [options, field] of cases) {
        // The port nothing should listen on: an option that were not refused would fail to connect instead.
        const error = configError(yield* Effect.flip(Effect.scoped(RedisBackend.make({ port: 1, ...options }))))
        expect(error).toBeInstanceOf(SimbaConfigError)
        expect(error.field).toBe(field)
        expect(error.rule.length).toBeGreaterThan(0)
        expect(error.message).toContain(field)
      }
    }))

  it.scopedLive("nobody listening: the layer fails with BackendError(connect), quickly", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const started = performance.now()
      const error = backendError(yield* Effect.flip(Effect.scoped(RedisBackend.make({ port, connectTimeout: "500 millis" }))))
      expect(error.operation).toBe("connect")
      expect(performance.now() - started).toBeLessThan(3000)
      const clusterError = backendError(
        yield* Effect.flip(
          Effect.scoped(RedisBackend.make({ cluster: { nodes: [{ host: "127.0.0.1", port }] }, connectTimeout: "500 millis" }))
        )
      )
      expect(clusterError.operation).toBe("connect")
    }))

  it.scopedLive("password and username: Redacted, passed to Redis, never shown in errors", () =>
    Effect.gen(function*() {
      const secret = `pw-${randomBytes(8).toString("hex")}`
      const server = yield* privateServer(["--requirepass", secret])
      const wrong = backendError(
        yield* Effect.flip(
          Effect.scoped(RedisBackend.make({ port: server.port, ...fresh, password: Redacted.make("not-it"), connectTimeout: "1 second" }))
        )
      )
      expect(wrong.operation).toBe("connect")
      expect(wrong.message).toContain("WRONGPASS")
      expect(wrong.message).not.toContain("not-it")
      const viaOption = yield* RedisBackend.make({ port: server.port, ...fresh, password: Redacted.make(secret) })
      const viaUrl = yield* RedisBackend.make({ url: Redacted.make(`redis://default:${secret}@127.0.0.1:${server.port}/2`), ...fresh })
      for (const b of [viaOption, viaUrl]) {
        const { sessionId } = yield* b.openSession(ttl)
        expect(granted(yield* b.acquire(sessionId, uniqueName("auth")))).toBeGreaterThan(aboveTime)
      }
      const invalidUrl = configError(
        yield* Effect.flip(Effect.scoped(RedisBackend.make({ url: Redacted.make(`redis://:${secret}@[bad`) })))
      )
      expect(invalidUrl.field).toBe("redis.url")
      expect(invalidUrl.message).not.toContain(secret)
      expect(JSON.stringify(invalidUrl)).not.toContain(secret)
    }))
})

describe("Redis backend failures (private redis-server)", () => {
  it.scopedLive("server killed: calls fail with BackendError, then recover after a restart; sessions are gone", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const b = yield* RedisBackend.make({ port: server.port, ...fresh, commandTimeout: "500 millis" })
      const raw = yield* rawClient(false, server.port)
      raw.on("error", () => {})
      const watch = yield* watchHints(b, raw)
      const name = uniqueName("lease")
      const { sessionId } = yield* b.openSession(Duration.seconds(10))
      const first = granted(yield* b.acquire(sessionId, name))

      yield* server.kill
      const calls: ReadonlyArray<Effect.Effect<unknown, BackendError>> = [
        b.keepAlive(sessionId, ttl),
        b.acquire(sessionId, name),
        b.members("g"),
        b.openSession(ttl)
      ]
      for (const call of calls) {
        const error = yield* Effect.flip(call)
        expect(error._tag).toBe("BackendError")
        expect(error.backend).toBe("redis")
      }

      yield* server.start
      // No persistence: the restarted server knows neither the session nor the lease.
      const reply = yield* b.keepAlive(sessionId, ttl).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))))
      expect(reply._tag).toBe("Expired")
      const next = yield* b.openSession(ttl)
      const token = granted(yield* b.acquire(next.sessionId, name))
      // Tokens come from the server's clock: above the lost one.
      expect(token).toBeGreaterThan(first)
      // The subscriber reconnected: a waiting session's lease channel is heard again.
      yield* b.release(next.sessionId, name, token)
      yield* releaseHeard(b, watch, uniqueName("after-restart"), ttl, "10 seconds")
    }))

  it.scopedLive("server paused: a call fails with BackendError after commandTimeout, then works again", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const b = yield* RedisBackend.make({ port: server.port, ...fresh, commandTimeout: "300 millis" })
      const admin = yield* rawClient(false, server.port)
      const { sessionId } = yield* b.openSession(ttl)
      yield* Effect.promise(() => admin.call("CLIENT", "PAUSE", "1000", "ALL"))
      const started = performance.now()
      const error = yield* Effect.flip(b.keepAlive(sessionId, ttl))
      expect(error.operation).toBe("keepAlive")
      expect(String(error.cause)).toContain("timed out")
      expect(performance.now() - started).toBeLessThan(900)
      yield* Effect.sleep(Duration.millis(900))
      const reply = yield* b.keepAlive(sessionId, ttl).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("5 seconds"))))
      expect(reply._tag).toBe("Live")
    }))

  it.scopedLive("READONLY (primary demoted to a replica): BackendError, then recovery once it is primary again", () =>
    Effect.gen(function*() {
      const primary = yield* privateServer(["--repl-diskless-sync-delay", "0"])
      const demoted = yield* privateServer()
      const b = yield* RedisBackend.make({ port: demoted.port, ...fresh })
      const admin = yield* rawClient(false, demoted.port)
      admin.on("error", () => {})
      const { sessionId } = yield* b.openSession(ttl)
      yield* Effect.promise(() => admin.call("REPLICAOF", "127.0.0.1", String(primary.port)))
      const error = yield* Effect.flip(
        b.openSession(ttl).pipe(
          Effect.repeat({ schedule: Schedule.spaced("50 millis").pipe(Schedule.upTo("5 seconds")), until: () => false })
        )
      )
      expect(error.operation).toBe("openSession")
      expect(String(error.cause)).toMatch(/READONLY|LOADING|Connection|writeable/)
      // Let the replica finish its sync: it now holds the primary's (empty) data set.
      yield* Effect.promise(() => admin.info("replication")).pipe(
        Effect.repeat({ schedule: Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")), until: (info) => info.includes("master_link_status:up") })
      )
      yield* Effect.promise(() => admin.call("REPLICAOF", "NO", "ONE"))
      const reopened = yield* b.openSession(ttl).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))))
      expect(granted(yield* b.acquire(reopened.sessionId, uniqueName("after-failover")))).toBeGreaterThan(aboveTime)
      // The old session did not survive the resync from the (empty) primary.
      expect((yield* b.keepAlive(sessionId, ttl))._tag).toBe("Expired")
    }))

  it.scopedLive("NOSCRIPT: after SCRIPT FLUSH the scripts are loaded again and calls succeed (scripts by SHA)", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      for (const routeBySlot of [false, true]) {
        const b = yield* RedisBackend.make({ port: server.port, ...fresh, routeBySlot, functions: false })
        const admin = yield* rawClient(false, server.port)
        const evals = commandCalls(admin, "eval")
        const { sessionId } = yield* b.openSession(ttl)
        const name = uniqueName("lease")
        const token = granted(yield* b.acquire(sessionId, name))
        const before = yield* evals
        yield* Effect.promise(() => admin.script("FLUSH"))
        expect(granted(yield* b.acquire(sessionId, name))).toBe(token)
        expect(sortedLeases(yield* b.keepAlive(sessionId, ttl))).toEqual([[name, token]])
        // EVALSHA answered NOSCRIPT and the script was sent again with EVAL.
        expect(yield* evals).toBeGreaterThan(before)
        yield* b.closeSession(sessionId)
      }
    }))
})

describe("Redis scripts as a function library (private redis-server)", () => {
  const libraries = (admin: RawClient) =>
    Effect.promise(() => admin.call("FUNCTION", "LIST", "LIBRARYNAME", Scripts.library.name) as Promise<ReadonlyArray<unknown>>)

  it.scopedLive("the backend loads the library and calls its functions; after FUNCTION FLUSH it loads it again and calls succeed", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const admin = yield* rawClient(false, server.port)
      for (const routeBySlot of [false, true]) {
        yield* Effect.promise(() => admin.call("FUNCTION", "FLUSH"))
        const b = yield* RedisBackend.make({ port: server.port, ...fresh, routeBySlot })
        expect(yield* libraries(admin)).toHaveLength(1)
        const { sessionId } = yield* b.openSession(ttl)
        const name = uniqueName("lease")
        const shaCalls = yield* commandCalls(admin, "evalsha")
        const token = granted(yield* b.acquire(sessionId, name))
        yield* Effect.promise(() => admin.call("FUNCTION", "FLUSH"))
        expect(yield* libraries(admin)).toHaveLength(0)
        // The next calls meet "Function not found": the library is loaded again, each call sent again.
        expect(granted(yield* b.acquire(sessionId, name))).toBe(token)
        expect(sortedLeases(yield* b.keepAlive(sessionId, ttl))).toEqual([[name, token]])
        expect(yield* libraries(admin)).toHaveLength(1)
        expect(yield* commandCalls(admin, "evalsha")).toBe(shaCalls)
        yield* b.closeSession(sessionId)
      }
    }))

  it.scopedLive("a user that loses FUNCTION after the library is gone: the next calls go by SHA and succeed", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const admin = yield* rawClient(false, server.port)
      yield* Effect.promise(() => admin.call("ACL", "SETUSER", "revoked", "on", "nopass", "~*", "&*", "+@all"))
      const b = yield* RedisBackend.make({ url: `redis://revoked@127.0.0.1:${server.port}`, ...fresh })
      expect(yield* libraries(admin)).toHaveLength(1)
      const { sessionId } = yield* b.openSession(ttl)
      const name = uniqueName("lease")
      const token = granted(yield* b.acquire(sessionId, name))
      yield* Effect.promise(() => admin.call("ACL", "SETUSER", "revoked", "-function"))
      yield* Effect.promise(() => admin.call("FUNCTION", "FLUSH"))
      const shaCalls = yield* commandCalls(admin, "evalsha")
      // "Function not found", the reload refused (NOPERM): the call is sent by SHA instead.
      expect(granted(yield* b.acquire(sessionId, name))).toBe(token)
      const functionCalls = yield* commandCalls(admin, "fcall")
      // And every call after it, without trying FCALL first.
      expect(sortedLeases(yield* b.keepAlive(sessionId, ttl))).toEqual([[name, token]])
      expect(yield* commandCalls(admin, "fcall")).toBe(functionCalls)
      expect(yield* commandCalls(admin, "evalsha")).toBeGreaterThanOrEqual(shaCalls + 2)
      expect(yield* libraries(admin)).toHaveLength(0)
      yield* b.closeSession(sessionId)
    }))

  it.scopedLive("a user not allowed FUNCTION: the scripts go by SHA and the backend works", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const admin = yield* rawClient(false, server.port)
      yield* Effect.promise(() => admin.call("FUNCTION", "FLUSH"))
      yield* Effect.promise(() => admin.call("ACL", "SETUSER", "nofunctions", "on", "nopass", "~*", "&*", "+@all", "-function"))
      const b = yield* RedisBackend.make({ url: `redis://nofunctions@127.0.0.1:${server.port}`, ...fresh })
      const { sessionId } = yield* b.openSession(ttl)
      const shaCalls = yield* commandCalls(admin, "evalsha")
      const name = uniqueName("lease")
      const token = granted(yield* b.acquire(sessionId, name))
      expect(sortedLeases(yield* b.keepAlive(sessionId, ttl))).toEqual([[name, token]])
      expect(yield* commandCalls(admin, "evalsha")).toBeGreaterThanOrEqual(shaCalls + 2)
      expect(yield* commandCalls(admin, "fcall")).toBe(0)
      expect(yield* libraries(admin)).toHaveLength(0)
      yield* b.closeSession(sessionId)
    }))
})

describe("Redis renewal versions, one node (private redis-server)", () => {
  /** Commands the server ran for `effect` (in-script ones included), from `INFO stats` before and after. */
  const commandsOf = <A, E>(port: number, effect: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const admin = yield* rawClient(false, port)
      const processed = Effect.promise(() => admin.info("stats")).pipe(
        Effect.map((info) => Number(/total_commands_processed:(\d+)/.exec(info)?.[1]))
      )
      const before = yield* processed
      const result = yield* effect
      // The second INFO counts itself before its reading.
      return [result, (yield* processed) - before - 1] as const
    })

  it.scopedLive("an unchanged renewal reads no lease: the same few commands for 10 and for 1,000 leases", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const b = yield* RedisBackend.make({ port: server.port, ...fresh })
      const costs: Array<number> = []
      for (const count of [10, 1000]) {
        const { sessionId } = yield* b.openSession(Duration.seconds(30))
        yield* Effect.forEach(Array.from({ length: count }, (_, i) => `versions.${count}.${i}`), (name) => b.acquire(sessionId, name), {
          concurrency: 16,
          discard: true
        })
        const first = live(yield* b.keepAlive(sessionId, Duration.seconds(30)))
        expect(first.leases?.length).toBe(count)
        const [again, commands] = yield* commandsOf(server.port, b.keepAlive(sessionId, Duration.seconds(30), first.version))
        expect(live(again).leases).toBeUndefined()
        expect(live(again).version).toBe(first.version)
        costs.push(commands)
      }
      expect(costs[0]).toBe(costs[1])
      expect(costs[1]).toBeLessThanOrEqual(10)
    }))

  it.scopedLive("a release by an expired session changes no version: its session key stays gone", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const b = yield* RedisBackend.make({ port: server.port, ...fresh })
      const raw = yield* rawClient(false, server.port)
      const name = uniqueName("late")
      const { sessionId } = yield* b.openSession(Duration.millis(200))
      const token = granted(yield* b.acquire(sessionId, name))
      yield* Effect.sleep(Duration.millis(400))
      yield* b.release(sessionId, name, token)
      expect(yield* Effect.promise(() => raw.exists(k.session(sessionId)))).toBe(0)
      expect((yield* b.keepAlive(sessionId, ttl))._tag).toBe("Expired")
    }))

  it.scopedLive("a lease found no longer naming the session is pruned, with a new version", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const b = yield* RedisBackend.make({ port: server.port, ...fresh })
      const raw = yield* rawClient(false, server.port)
      const [kept, lost] = [uniqueName("kept"), uniqueName("lost")]
      const { sessionId } = yield* b.openSession(ttl)
      const keptToken = granted(yield* b.acquire(sessionId, kept))
      granted(yield* b.acquire(sessionId, lost))
      const v1 = live(yield* b.keepAlive(sessionId, ttl)).version
      // As if the server had lost that lease's keys (a partial failover: the hash and its holder
      // record; a hash deleted alone is restored, see holder.test.ts): the known version still answers unchanged.
      yield* Effect.promise(() => raw.del(k.lease(lost), k.leaseHolder(lost)))
      expect(live(yield* b.keepAlive(sessionId, ttl, v1)).leases).toBeUndefined()
      // A renewal that lists finds it gone, prunes it and moves the version on.
      const listed = live(yield* b.keepAlive(sessionId, ttl))
      expect(listed.leases).toEqual([{ name: kept, token: keptToken }])
      expect(listed.version).not.toBe(v1)
      expect(live(yield* b.keepAlive(sessionId, ttl, v1)).leases).toEqual([{ name: kept, token: keptToken }])
      expect(live(yield* b.keepAlive(sessionId, ttl, listed.version)).leases).toBeUndefined()
    }))
})

/**
 * Redis Cluster pulses (docs/design.md, "Redis Cluster: per-slot shadows and pulses"): a session's liveness on a node is
 * its pulse there, which a renewal extends once per node; its shadows in that node's slots outlive the
 * home by a margin and are walked a slice per renewal. Run in mode `cluster` on the suite's cluster and
 * on one server (`routeBySlot`), except where a second node is needed.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { Cluster } from "ioredis"
import { randomBytes } from "node:crypto"
import type { AcquireReply } from "../../src/LeaseBackend.js"
import { marginOf } from "../../src/layers/redis/clusterSession.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import * as Scripts from "../../src/layers/redis/scripts.js"
import { startPrivateCluster } from "../support/redisServer.js"
import { modes, rawClient, type RawClient, spyScripts, uniqueName } from "./RedisServers.js"
import { live } from "../support/replies.js"

const k = RedisBackend.keys()
const fresh = { lockDelay: 0, routeBySlot: true } as const

const tagOfLease = (name: string) => RedisBackend.slotTag(RedisBackend.keySlot(k.lease(name)))
const nodeOf = (client: RawClient, slot: number) => "slots" in client ? client.slots[slot]?.[0] : "server"
const ms = (client: RawClient, key: string) => Effect.promise(() => client.pttl(key))

/** The `tag,known` pairs each renewal call of a pulse carried (its last argument), by call. */
const slicesSent = (client: RawClient) => {
  const sent: Array<number> = []
  const renewals = new Set([Scripts.renewSlots.script.sha, Scripts.renewHomeSlots.script.sha])
  spyScripts(client, ({ args, script }) => {
    if (renewals.has(script.sha)) {
      const list = String(args[args.length - 1])
      sent.push(list === "" ? 0 : list.split(",").length / 2)
    }
    return undefined
  })
  return sent
}

for (const mode of modes.filter((m) => m.routeBySlot)) {
  describe(`Redis pulses, ${mode.label}`, () => {
    it.scopedLive("a session that stops renewing loses its leases when its pulse runs out, though its shadow lives on", () =>
      Effect.gen(function*() {
        const raw = yield* rawClient(mode.cluster)
        const b = yield* RedisBackend.makeWithClient(raw, fresh)
        const ttl = Duration.millis(2000)
        const name = uniqueName("pulse")
        const crashed = yield* b.openSession(ttl)
        expect((yield* b.acquire(crashed.sessionId, name))._tag).toBe("Granted")
        const shadow = k.shadow(tagOfLease(name), crashed.sessionId)
        // The acquire gave the shadow twice the home's time left (2 s), the pulse the home's time left.
        expect(yield* ms(raw, shadow)).toBeGreaterThan(3000)
        const other = yield* b.openSession(Duration.seconds(30))
        expect((yield* b.acquire(other.sessionId, name))._tag).toBe("HeldBy")
        // Nobody renews `crashed`: its home and pulses are gone after 2 s, its shadow lives until ~4 s.
        yield* Effect.sleep("2500 millis")
        expect(yield* ms(raw, shadow)).toBeGreaterThan(0)
        expect((yield* b.acquire(other.sessionId, name))._tag).toBe("Granted")
        yield* b.closeSession(other.sessionId)
      }))

    it.scopedLive("a shadow is judged by its pulse when this node reads it, else by its own time to live", () =>
      Effect.gen(function*() {
        const raw = yield* rawClient(mode.cluster)
        const b = yield* RedisBackend.makeWithClient(raw, fresh)
        const asker = yield* b.openSession(Duration.seconds(30))
        /** A lease held by a session that only exists as a shadow there, naming `pulse` (or none). */
        const heldByGhost = (pulse: (ghost: string, tag: string) => string | undefined) =>
          Effect.gen(function*() {
            const name = uniqueName("ghost")
            const ghost = randomBytes(16).toString("hex")
            const tag = tagOfLease(name)
            const shadow = k.shadow(tag, ghost)
            yield* Effect.promise(() => raw.hset(k.lease(name), "session", ghost, "token", "5"))
            yield* Effect.promise(() => raw.set(k.leaseHolder(name), `${ghost}:5`))
            yield* Effect.promise(() => raw.hset(shadow, "gen", "1", "ver", "1"))
            const named = pulse(ghost, tag)
            if (named !== undefined) yield* Effect.promise(() => raw.hset(shadow, "pulse", named))
            yield* Effect.promise(() => raw.pexpire(shadow, 60_000))
            return (yield* b.acquire(asker.sessionId, name))._tag
          })
        // A pulse of this node that is gone: the session is dead here, its lease taken over.
        expect(yield* heldByGhost((ghost, tag) => k.pulse(tag, ghost))).toBe("Granted")
        // No pulse (a shadow written before pulses): its own time to live (60 s) says it lives.
        expect(yield* heldByGhost(() => undefined)).toBe("HeldBy")
        if (mode.cluster) {
          // A pulse on another node (resharding moved its slot): unreadable here, the shadow decides.
          const elsewhere = (tag: string) => {
            const here = nodeOf(raw, RedisBackend.keySlot(`{${tag}}`))
            let slot = 0
            while (nodeOf(raw, slot) === here) slot++
            return RedisBackend.slotTag(slot)
          }
          expect(yield* heldByGhost((ghost, tag) => k.pulse(elsewhere(tag), ghost))).toBe("HeldBy")
        }
        yield* b.closeSession(asker.sessionId)
      }))

    it.scopedLive("a pulse lost (its node's state, or deleted) is found by the next renewal: the whole set listed, a lease taken meanwhile gone", () =>
      Effect.gen(function*() {
        const raw = yield* rawClient(mode.cluster)
        const b = yield* RedisBackend.makeWithClient(raw, fresh)
        const ttl = Duration.seconds(30)
        const names = Array.from({ length: 6 }, (_, i) => uniqueName(`lost${i}`))
        const holder = yield* b.openSession(ttl)
        const tokens = new Map<string, bigint>()
        for (const name of names) {
          const reply: AcquireReply = yield* b.acquire(holder.sessionId, name)
          if (reply._tag !== "Granted") return expect.fail(`expected Granted, got ${reply._tag}`)
          tokens.set(name, reply.token)
        }
        const first = live(yield* b.keepAlive(holder.sessionId, ttl))
        const known = live(yield* b.keepAlive(holder.sessionId, ttl, first.version))
        expect(known.leases).toBeUndefined()
        // Every pulse of the holder goes, as a node's state would.
        const masters = "nodes" in raw ? raw.nodes("master") : [raw]
        const found = (yield* Effect.forEach(masters, (node) => Effect.promise(() => node.keys(`simba:pulse:*:${holder.sessionId}`)))).flat()
        expect(found.length).toBeGreaterThan(0)
        yield* Effect.forEach(found, (key) => Effect.promise(() => raw.del(key)))
        // Meanwhile another session takes one of its leases: the holder is dead in that slot.
        const other = yield* b.openSession(ttl)
        expect((yield* b.acquire(other.sessionId, names[0]!))._tag).toBe("Granted")
        const after = live(yield* b.keepAlive(holder.sessionId, ttl, known.version))
        expect(after.version).not.toBe(known.version)
        expect(after.leases?.map((l) => l.name).sort()).toEqual(names.slice(1).sort())
        const settled = live(yield* b.keepAlive(holder.sessionId, ttl, after.version))
        expect(settled.leases).toBeUndefined()
        yield* b.closeSession(holder.sessionId)
        yield* b.closeSession(other.sessionId)
      }))

    // TestClock drives the client's slice schedule; the servers' own time hardly moves.
    it.scoped("an unchanged renewal walks one slice of each pulse's slots; a slice left for half the margin is walked with the rest", () =>
      Effect.gen(function*() {
        const raw = yield* rawClient(mode.cluster)
        const sent = slicesSent(raw)
        const b = yield* RedisBackend.makeWithClient(raw, fresh)
        const ttl = Duration.millis(1500)
        const names = Array.from({ length: 40 }, (_, i) => uniqueName(`slice${i}`))
        const session = yield* b.openSession(ttl)
        for (const name of names) expect((yield* b.acquire(session.sessionId, name))._tag).toBe("Granted")
        const slots = new Set(names.map(tagOfLease)).size
        const first = live(yield* b.keepAlive(session.sessionId, ttl))
        yield* TestClock.adjust("100 millis")
        // A new plan (the version it knows changed) walks every slot.
        sent.length = 0
        const planned = live(yield* b.keepAlive(session.sessionId, ttl, first.version))
        expect(sent.reduce((a, n) => a + n, 0)).toBe(slots)
        // Kept: one slice per pulse, a few slots each, every slot once over the rounds.
        let walked = 0
        for (let round = 0; round < 6; round++) {
          yield* TestClock.adjust("100 millis")
          sent.length = 0
          expect(live(yield* b.keepAlive(session.sessionId, ttl, planned.version)).leases).toBeUndefined()
          expect(Math.max(...sent)).toBeLessThan(slots / 3)
          walked += sent.reduce((a, n) => a + n, 0)
        }
        expect(walked).toBeLessThan(slots)
        // Every shadow still outlives the home.
        const homeLeft = yield* ms(raw, k.session(session.sessionId))
        for (const name of names) expect(yield* ms(raw, k.shadow(tagOfLease(name), session.sessionId))).toBeGreaterThan(homeLeft)
        // Half the margin without a renewal: every slice is due, all are walked at once.
        yield* TestClock.adjust(Duration.millis(marginOf(Duration.toMillis(ttl)) / 2 + 1))
        sent.length = 0
        expect(live(yield* b.keepAlive(session.sessionId, ttl, planned.version)).leases).toBeUndefined()
        expect(sent.reduce((a, n) => a + n, 0)).toBe(slots)
        yield* b.closeSession(session.sessionId)
      }))
  })
}

describe("Redis pulses: resharding (a private cluster of two masters)", () => {
  it.scopedLive("a slot moved while its lease is held: renewals go on, the shadow is pointed at its new node's pulse, a crash is taken over when that pulse runs out", () =>
    Effect.gen(function*() {
      const servers = yield* Effect.acquireRelease(
        Effect.promise(() => startPrivateCluster(2)),
        (started) => Effect.promise(() => Promise.all(started.map((server) => server.stop())))
      )
      const admins = yield* Effect.forEach(servers, (server) => rawClient(false, server.port))
      const ids = yield* Effect.forEach(admins, (admin) => Effect.promise(async () => String(await admin.call("CLUSTER", "MYID"))))
      const client = yield* Effect.acquireRelease(
        Effect.sync(() => new Cluster(servers.map((server) => ({ host: "127.0.0.1", port: server.port })))),
        (cluster) => Effect.promise(() => cluster.quit().catch(() => cluster.disconnect()))
      )
      yield* Effect.promise(() => client.ping())
      const b = yield* RedisBackend.makeWithClient(client, fresh)
      const ttl = Duration.millis(2000)
      const holder = yield* b.openSession(ttl)
      // A lease on the node that is not the home's, off that node's pulse slot (its first).
      const homeNode = nodeOf(client, RedisBackend.keySlot(k.session(holder.sessionId)))
      let name = uniqueName("moved")
      while (nodeOf(client, RedisBackend.keySlot(k.lease(name))) === homeNode || [0, 8192].includes(RedisBackend.keySlot(k.lease(name)))) {
        name = uniqueName("moved")
      }
      const slot = RedisBackend.keySlot(k.lease(name))
      const from = nodeOf(client, slot) === `127.0.0.1:${servers[0]!.port}` ? 0 : 1
      const to = 1 - from
      expect((yield* b.acquire(holder.sessionId, name))._tag).toBe("Granted")
      let version = live(yield* b.keepAlive(holder.sessionId, ttl)).version
      // Move the slot with its keys (shadow, lease, holder record) to the other master.
      yield* Effect.promise(async () => {
        await admins[to]!.call("CLUSTER", "SETSLOT", String(slot), "IMPORTING", ids[from]!)
        await admins[from]!.call("CLUSTER", "SETSLOT", String(slot), "MIGRATING", ids[to]!)
        const keys = await admins[from]!.call("CLUSTER", "GETKEYSINSLOT", String(slot), "100") as Array<string>
        expect(keys.length).toBeGreaterThanOrEqual(3)
        await admins[from]!.call("MIGRATE", "127.0.0.1", String(servers[to]!.port), "", "0", "5000", "KEYS", ...keys)
        for (const admin of admins) await admin.call("CLUSTER", "SETSLOT", String(slot), "NODE", ids[to]!)
      })
      // An acquire in the moved slot while the client's table is still the old one: its pulse is on
      // the old node, unreadable where the script runs (`moved`): the table refreshed, tried again.
      const other = yield* b.openSession(Duration.seconds(30))
      let neighbour = uniqueName("neighbour")
      while (RedisBackend.keySlot(k.lease(neighbour)) !== slot) neighbour = uniqueName("neighbour")
      expect((yield* b.acquire(other.sessionId, neighbour))._tag).toBe("Granted")
      const neighbourPulse = yield* Effect.promise(() => client.hget(k.shadow(RedisBackend.slotTag(slot), other.sessionId), "pulse"))
      expect(yield* Effect.promise(() => admins[to]!.exists(neighbourPulse!))).toBe(1)
      // Renewals go on; within a few, the shadow names a pulse its new node serves.
      const shadow = k.shadow(RedisBackend.slotTag(slot), holder.sessionId)
      // Asked of the new node itself (the client's slot table can be behind, see docs/design.md).
      const onNewNode = Effect.flatMap(Effect.promise(() => client.hget(shadow, "pulse")), (pulse) =>
        pulse === null
          ? Effect.succeed(false)
          : Effect.promise(() => admins[to]!.exists(pulse).then((n) => n === 1, () => false)))
      for (let round = 0; round < 10 && !(yield* onNewNode); round++) {
        yield* Effect.sleep("200 millis")
        const renewed = live(yield* b.keepAlive(holder.sessionId, ttl, version))
        if (renewed.leases !== undefined) expect(renewed.leases.map((l) => l.name)).toEqual([name])
        version = renewed.version
      }
      expect(yield* onNewNode).toBe(true)
      // The holder stops renewing: its lease goes when its pulse runs out (2 s), its shadow lives on.
      expect((yield* b.acquire(other.sessionId, name))._tag).toBe("HeldBy")
      yield* Effect.sleep("2500 millis")
      expect(yield* ms(client, shadow)).toBeGreaterThan(0)
      expect((yield* b.acquire(other.sessionId, name))._tag).toBe("Granted")
    }))
})

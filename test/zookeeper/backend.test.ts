/**
 * ZooKeeper-specific behaviour beyond the TCK, on the standalone server at 127.0.0.1:2181:
 *
 * - the lease cache is exact after a renewal's round trip (the argument in ZookeeperBackend.ts): a
 *   lease node deleted behind the session's back is missing from the very next renewal, with no wait;
 * - a release (one delete, no read) deletes only the session's own node with that token;
 * - options are checked before any connection (`SimbaConfigError`), an unreachable ensemble fails the
 *   layer with `BackendError` within `connectTimeout`, a `czxid` beyond 2^53 is refused loudly;
 * - through a TCP proxy that can cut the connection: calls fail with `BackendError` while the
 *   connection is down; back within the session timeout, the session and its leases are intact;
 *   back after it, the session answers `Expired` and its lease is free;
 * - a renewal never waits behind a session's whole backlog: with 1,000 acquires outstanding at once on
 *   one session, its renewals keep it alive (no local deadline passes).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import { createServer, type Server, type Socket } from "node:net"
import ZooKeeper from "zookeeper"
import { AcquireReply, type Hint, LeaseBackend, type LeaseBackendService } from "../../src/LeaseBackend.js"
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"
import { tokenOf } from "../../src/layers/zookeeper/session.js"
import { standalone, ttl } from "./ZookeeperServers.js"

const unique = (label: string) => `zk.${randomBytes(8).toString("hex")}.${label}`

const backendOf = (options: ZookeeperBackend.ZookeeperOptions): Effect.Effect<LeaseBackendService, unknown, Scope.Scope> =>
  Effect.flatMap(Layer.build(ZookeeperBackend.layer(options)), (context) => Effect.succeed(context.unsafeMap.get(LeaseBackend.key) as LeaseBackendService))

/** A raw addon connection (another ZooKeeper session) to act behind the backend's back. */
const rawClient = Effect.acquireRelease(
  Effect.async<ZooKeeper>((resume) => {
    const zk = new ZooKeeper({ connect: "127.0.0.1:2181", timeout: 10_000 })
    zk.once("connect", () => resume(Effect.succeed(zk)))
    zk.init({})
  }),
  (zk) => Effect.sync(() => zk.close())
)

const granted = (reply: { readonly _tag: string; readonly token?: bigint | undefined }): bigint => {
  if (reply._tag !== "Granted" || reply.token === undefined) expect.fail(`expected Granted, got ${reply._tag}`)
  return reply.token
}

describe("ZookeeperBackend: the lease cache", () => {
  it.scopedLive("a lease node deleted behind the session's back is missing from the very next renewal", () =>
    Effect.gen(function*() {
      const b = yield* backendOf(standalone)
      const zk = yield* rawClient
      const [kept, deleted] = [unique("kept"), unique("deleted")]
      const { sessionId } = yield* b.openSession(Duration.seconds(10))
      const keptToken = granted(yield* b.acquire(sessionId, kept))
      const deletedToken = granted(yield* b.acquire(sessionId, deleted))
      const before = yield* b.keepAlive(sessionId, Duration.seconds(10))
      if (before._tag !== "Live") return expect.fail("expected Live")
      expect(before.leases?.map((l) => l.name).sort()).toEqual([kept, deleted].sort())
      // Deleted by another session: the server applies it before it answers that session, and so
      // before it processes the renewal sent next; its watch event reaches the backend before the
      // renewal's reply. No sleep in between.
      yield* Effect.promise(() => zk.delete_(`${standalone.root}/leases/${deleted}`, -1))
      const after = yield* b.keepAlive(sessionId, Duration.seconds(10), before.version)
      if (after._tag !== "Live") return expect.fail("expected Live")
      expect(after.version).not.toBe(before.version)
      expect(after.leases).toEqual([{ name: kept, token: keptToken }])
      // The name is free: another session takes it with a larger token.
      const other = yield* b.openSession(Duration.seconds(10))
      expect(granted(yield* b.acquire(other.sessionId, deleted))).toBeGreaterThan(deletedToken)
      const still = yield* b.keepAlive(sessionId, Duration.seconds(10), after.version)
      if (still._tag !== "Live") return expect.fail("expected Live")
      expect(still.leases).toBeUndefined()
    }), 20_000)

  it.scopedLive("an acquire of a name the session already holds (a lost reply) gives back its own node's token", () =>
    Effect.gen(function*() {
      const b = yield* backendOf(standalone)
      const zk = yield* rawClient
      const name = unique("again")
      const { sessionId } = yield* b.openSession(Duration.seconds(10))
      const token = granted(yield* b.acquire(sessionId, name))
      const stat = (yield* Effect.promise(() => zk.exists(`${standalone.root}/leases/${name}`, false))) as { czxid: number; ephemeralOwner: string }
      expect(BigInt(stat.czxid)).toBe(token)
      expect(stat.ephemeralOwner).toBe(sessionId)
      expect(granted(yield* b.acquire(sessionId, name))).toBe(token)
    }), 20_000)
})

describe("ZookeeperBackend: renewals and a backlog of acquires", () => {
  // ZooKeeper answers one session's requests in order, so a renewal sent behind every create of
  // thousands of acquires waited for all of them: the session passed its local deadline and was
  // replaced, again and again (bench/zookeeper.ts, renew section, at load ~10). The backend keeps at
  // most `inFlightLimit` requests other than renewals in flight per session, so a renewal waits
  // behind that many at most.
  it.scopedLive("1,000 acquires outstanding at once on one session, 5,000 in all: its renewals keep it alive, every acquire is granted", () =>
    Effect.gen(function*() {
      const b = yield* backendOf(standalone)
      const names = Array.from({ length: 5000 }, (_, i) => unique(`backlog-${i}`))
      // The suites' session timeout (2.4 s): a renewal proves 1 s, renewed on every third of that like
      // the client does, each renewal timing out after the same period. Without the window, every
      // renewal waited behind ~2,000 requests: all timed out and the session was lost.
      const { sessionId, remaining } = yield* b.openSession(Duration.decode(ttl))
      const proven = Duration.toMillis(remaining)
      const cadence = Math.floor(proven / 3)
      // 1,000 acquires outstanding at all times (2,000 requests, like a client starting 1,000
      // elections), 5,000 in all.
      const acquires = yield* Effect.fork(
        Effect.forEach(names, (name) => Effect.either(b.acquire(sessionId, name)), { concurrency: 1000 })
      )
      const renewals = { live: 0, timedOut: 0, expired: 0, deadlinesPassed: 0 }
      let deadline = (yield* Clock.currentTimeMillis) + proven
      while (acquires.unsafePoll() === null) {
        const sentAt = yield* Clock.currentTimeMillis
        const reply = yield* b.keepAlive(sessionId, Duration.decode(ttl)).pipe(Effect.timeout(Duration.millis(cadence)), Effect.option)
        const answeredAt = yield* Clock.currentTimeMillis
        if (answeredAt > deadline) renewals.deadlinesPassed++
        if (reply._tag === "None") renewals.timedOut++
        else if (reply.value._tag === "Expired") renewals.expired++
        else {
          renewals.live++
          deadline = sentAt + proven
        }
        if (renewals.expired > 0) break
        yield* Effect.sleep(Duration.millis(Math.max(0, cadence - (answeredAt - sentAt))))
      }
      const replies = yield* Fiber.join(acquires)
      // A renewal that timed out now and then is allowed (a stalled event loop); a deadline passed is not.
      expect(renewals, JSON.stringify(renewals)).toMatchObject({ expired: 0, deadlinesPassed: 0 })
      expect(renewals.live).toBeGreaterThan(0)
      const refused = replies.filter((reply) => reply._tag !== "Right" || reply.right._tag !== "Granted")
      expect(refused.length, String(refused[0])).toBe(0)
      const last = yield* b.keepAlive(sessionId, Duration.decode(ttl))
      if (last._tag !== "Live") return expect.fail("expected Live")
      expect(last.leases?.length).toBe(names.length)
      yield* b.closeSession(sessionId)
    }), 60_000)
})

describe("ZookeeperBackend: release without a read", () => {
  it.scopedLive("a release deletes the session's own node with that token only, also after an outside delete and a new holder", () =>
    Effect.gen(function*() {
      const b = yield* backendOf(standalone)
      const zk = yield* rawClient
      const name = unique("release")
      const path = `${standalone.root}/leases/${name}`
      const { sessionId } = yield* b.openSession(Duration.seconds(10))
      const token = granted(yield* b.acquire(sessionId, name))
      // Another token of the name: no delete.
      yield* b.release(sessionId, name, token + 1n)
      expect(yield* Effect.promise(() => zk.pathExists(path, false))).toBe(true)
      // Deleted behind the session's back, then taken by another session: once the session's next
      // reply is in (its watch event came first), a release with the old token leaves the new node.
      yield* Effect.promise(() => zk.delete_(path, -1))
      const other = yield* b.openSession(Duration.seconds(10))
      const newer = granted(yield* b.acquire(other.sessionId, name))
      expect(newer).toBeGreaterThan(token)
      expect((yield* b.keepAlive(sessionId, Duration.seconds(10)))._tag).toBe("Live")
      yield* b.release(sessionId, name, token)
      const stat = (yield* Effect.promise(() => zk.exists(path, false))) as { czxid: number; ephemeralOwner: string }
      expect(stat.ephemeralOwner).toBe(other.sessionId)
      expect(BigInt(stat.czxid)).toBe(newer)
      // The holder's own release with its token deletes it.
      yield* b.release(other.sessionId, name, newer)
      expect(yield* Effect.promise(() => zk.pathExists(path, false))).toBe(false)
    }), 20_000)
})

describe("ZookeeperBackend: options and failures", () => {
  it.effect("invalid options fail with SimbaConfigError naming the field, before any connection", () =>
    Effect.gen(function*() {
      for (const [options, field] of [
        [{ connect: "no-port" }, "zookeeper.connect"],
        [{ connect: "127.0.0.1:99999" }, "zookeeper.connect"],
        [{ root: "relative" }, "zookeeper.root"],
        [{ root: "/trailing/" }, "zookeeper.root"],
        [{ root: "/bad segment" }, "zookeeper.root"],
        [{ connectTimeout: -1 }, "zookeeper.connectTimeout"]
      ] as const) {
        const exit = yield* Effect.exit(Effect.scoped(Layer.build(ZookeeperBackend.layer(options))))
        expect(Exit.isFailure(exit)).toBe(true)
        if (Exit.isFailure(exit)) {
          const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
          expect(error).toMatchObject({ _tag: "SimbaConfigError", field })
        }
      }
    }))

  it.scopedLive("an unreachable ensemble fails the layer with BackendError within connectTimeout", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const startedAt = performance.now()
      const exit = yield* Effect.exit(backendOf({ connect: `127.0.0.1:${port}`, connectTimeout: "500 millis" }))
      expect(performance.now() - startedAt).toBeLessThan(5000)
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) {
        expect(exit.cause._tag === "Fail" ? exit.cause.error : undefined).toMatchObject({ _tag: "BackendError", backend: "zookeeper" })
      }
    }), 20_000)

  it("a czxid beyond 2^53 is refused loudly, never rounded into a token", () => {
    expect(tokenOf("acquire", { czxid: 2 ** 53 - 1 })).toBe(2n ** 53n - 1n)
    expect(tokenOf("acquire", { czxid: 2 ** 53 + 2 })).toMatchObject({ _tag: "BackendError" })
    expect(tokenOf("acquire", { czxid: 0 })).toMatchObject({ _tag: "BackendError" })
  })
})

// -------------------------------------------------------------------------------------------------
// A TCP proxy in front of 127.0.0.1:2181 that can cut every connection and refuse new ones.
// -------------------------------------------------------------------------------------------------

const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

interface Proxy {
  readonly port: number
  /** Drops every connection; new ones are refused until `heal`. */
  readonly cut: Effect.Effect<void>
  readonly heal: Effect.Effect<void>
}

const proxy: Effect.Effect<Proxy, never, Scope.Scope> = Effect.gen(function*() {
  const port = yield* freePort
  const sockets = new Set<Socket>()
  let server: Server | undefined
  const listen = Effect.async<void>((resume) => {
    server = createServer((client) => {
      const upstream = new (client.constructor as typeof Socket)()
      sockets.add(client).add(upstream)
      const drop = () => {
        client.destroy()
        upstream.destroy()
        sockets.delete(client)
        sockets.delete(upstream)
      }
      client.on("error", drop).on("close", drop)
      upstream.on("error", drop).on("close", drop)
      upstream.connect(2181, "127.0.0.1", () => {
        client.pipe(upstream)
        upstream.pipe(client)
      })
    })
    server.listen(port, "127.0.0.1", () => resume(Effect.void))
  })
  const cut = Effect.async<void>((resume) => {
    for (const socket of sockets) socket.destroy()
    sockets.clear()
    if (server === undefined) return resume(Effect.void)
    server.close(() => resume(Effect.void))
    server = undefined
  })
  yield* listen
  yield* Effect.addFinalizer(() => cut)
  return { port, cut, heal: listen }
})

describe("ZookeeperBackend: connection loss", () => {
  it.scopedLive("calls fail with BackendError while disconnected; back within the timeout, the session and its lease are intact", () =>
    Effect.gen(function*() {
      const link = yield* proxy
      const b = yield* backendOf({ connect: `127.0.0.1:${link.port}`, root: standalone.root })
      const name = unique("survives")
      // T = 6 s. The server expires the session T after the cut; the client library reconnects about
      // 1 s after the proxy is back (its retry delay), which is waited for up to 4 s: 1 s of cut plus
      // at most 4 s stays inside T.
      const { sessionId } = yield* b.openSession(Duration.seconds(6))
      const token = granted(yield* b.acquire(sessionId, name))
      yield* link.cut
      // The client library notices the dropped socket at once (`connecting`).
      const failure = yield* b.keepAlive(sessionId, Duration.seconds(6)).pipe(
        Effect.flip,
        Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("2 seconds")))
      )
      expect(failure).toMatchObject({ _tag: "BackendError", backend: "zookeeper" })
      expect((yield* Effect.flip(b.acquire(sessionId, unique("while-down"))))._tag).toBe("BackendError")
      yield* Effect.sleep("1 second")
      yield* link.heal
      const live = yield* b.keepAlive(sessionId, Duration.seconds(6)).pipe(
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("4 seconds")))
      )
      if (live._tag !== "Live") return expect.fail(`expected Live, got ${live._tag}`)
      expect(live.leases).toEqual([{ name, token }])
    }), 30_000)

  it.scopedLive("back after the session timeout, the session answers Expired and its lease is free", () =>
    Effect.gen(function*() {
      const link = yield* proxy
      const b = yield* backendOf({ connect: `127.0.0.1:${link.port}`, root: standalone.root })
      const direct = yield* backendOf(standalone)
      const name = unique("expires")
      // T = 1.5 s; the cut lasts T + 2 s (the server expires in tickTime buckets: T + 0.5 s at most).
      const { sessionId } = yield* b.openSession(Duration.millis(1500))
      const token = granted(yield* b.acquire(sessionId, name))
      yield* link.cut
      const other = yield* direct.openSession(Duration.seconds(10))
      yield* Effect.sleep("3500 millis")
      expect(granted(yield* direct.acquire(other.sessionId, name))).toBeGreaterThan(token)
      yield* link.heal
      const reply = yield* b.keepAlive(sessionId, Duration.millis(1500)).pipe(
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("4 seconds")))
      )
      expect(reply._tag).toBe("Expired")
      expect((yield* b.acquire(sessionId, name))._tag).toBe("Expired")
      // The addon closed the expired session itself; a new session of the same process connects
      // (the addon defect handled in driver.ts: a descriptor number left registered after a move).
      const fresh = yield* b.openSession(Duration.seconds(10))
      expect((yield* b.acquire(fresh.sessionId, unique("after-expiry")))._tag).toBe("Granted")
    }), 30_000)
})

/** The hints of `backend` from now on, and a wait (at most 5 s) for one that matches. */
const hintsOf = (backend: LeaseBackendService) =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Hint>()
    yield* backend.hints.pipe(Stream.runForEach((hint) => Queue.offer(queue, hint)), Effect.forkScoped)
    // Let the subscription start before anything happens.
    yield* Effect.sleep("50 millis")
    return (predicate: (hint: Hint) => boolean) =>
      Queue.take(queue).pipe(
        Effect.repeat({ until: predicate }),
        Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("no matching hint within 5 s") })
      )
  })

describe("ZookeeperBackend: watches as hints, across backends", () => {
  it.scopedLive("a refused acquire leaves a watch: the waiter takes the lease when the holder (another backend) releases or its session ends", () =>
    Effect.gen(function*() {
      const holderBackend = yield* backendOf(standalone)
      const waiterBackend = yield* backendOf(standalone)
      const awaitHint = yield* hintsOf(waiterBackend)
      const [released, closed, withdrawn] = [unique("released"), unique("closed"), unique("withdrawn")]
      const holder = yield* holderBackend.openSession(Duration.seconds(10))
      const waiter = yield* waiterBackend.openSession(Duration.seconds(10))
      const token = granted(yield* holderBackend.acquire(holder.sessionId, released))
      const closedToken = granted(yield* holderBackend.acquire(holder.sessionId, closed))
      const withdrawnToken = granted(yield* holderBackend.acquire(holder.sessionId, withdrawn))
      for (const name of [released, closed, withdrawn]) {
        expect((yield* waiterBackend.acquire(waiter.sessionId, name))._tag).toBe("HeldBy")
      }
      // A waiter that stopped waiting is only told.
      yield* waiterBackend.withdraw(waiter.sessionId, withdrawn)
      yield* holderBackend.release(holder.sessionId, withdrawn, withdrawnToken)
      yield* awaitHint((hint) => hint._tag === "Released" && hint.name === withdrawn)
      // A waiting session takes the lease on the watch event and is told with a Granted hint.
      yield* holderBackend.release(holder.sessionId, released, token)
      const handed = yield* awaitHint((hint) => hint._tag === "Granted" && hint.name === released && hint.to === waiter.sessionId)
      if (handed._tag !== "Granted") return expect.fail("expected Granted")
      expect(handed.token).toBeGreaterThan(token)
      expect(yield* waiterBackend.acquire(waiter.sessionId, released)).toEqual(AcquireReply.Granted({ token: handed.token }))
      yield* holderBackend.closeSession(holder.sessionId)
      const closedHanded = yield* awaitHint((hint) => hint._tag === "Granted" && hint.name === closed && hint.to === waiter.sessionId)
      if (closedHanded._tag !== "Granted") return expect.fail("expected Granted")
      expect(closedHanded.token).toBeGreaterThan(closedToken)
      // Both are listed by the next renewal; the withdrawn name is not held.
      const renewal = yield* waiterBackend.keepAlive(waiter.sessionId, Duration.seconds(10))
      if (renewal._tag !== "Live") return expect.fail("expected Live")
      expect(renewal.leases?.map((lease) => lease.name).sort()).toEqual([released, closed].sort())
    }), 20_000)

  it.scopedLive("a member's child watch: GroupChanged when another backend's session joins or leaves", () =>
    Effect.gen(function*() {
      const a = yield* backendOf(standalone)
      const b = yield* backendOf(standalone)
      const awaitHint = yield* hintsOf(a)
      const group = unique("group")
      const first = yield* a.openSession(Duration.seconds(10))
      expect(yield* a.join(first.sessionId, group)).toBe("Joined")
      yield* awaitHint((hint) => hint._tag === "GroupChanged" && hint.group === group)
      const other = yield* b.openSession(Duration.seconds(10))
      expect(yield* b.join(other.sessionId, group)).toBe("Joined")
      yield* awaitHint((hint) => hint._tag === "GroupChanged" && hint.group === group)
      yield* b.leave(other.sessionId, group)
      yield* awaitHint((hint) => hint._tag === "GroupChanged" && hint.group === group)
      expect(yield* a.members(group)).toEqual([first.sessionId])
    }), 20_000)

  it.scopedLive("a release while the waiter's connection is down still reaches it after the reconnect", () =>
    Effect.gen(function*() {
      const link = yield* proxy
      const waiterBackend = yield* backendOf({ connect: `127.0.0.1:${link.port}`, root: standalone.root })
      const holderBackend = yield* backendOf(standalone)
      const awaitHint = yield* hintsOf(waiterBackend)
      const name = unique("while-away")
      const holder = yield* holderBackend.openSession(Duration.seconds(10))
      const waiter = yield* waiterBackend.openSession(Duration.seconds(10))
      const token = granted(yield* holderBackend.acquire(holder.sessionId, name))
      expect((yield* waiterBackend.acquire(waiter.sessionId, name))._tag).toBe("HeldBy")
      yield* link.cut
      yield* holderBackend.release(holder.sessionId, name, token)
      yield* Effect.sleep("300 millis")
      yield* link.heal
      yield* awaitHint((hint) => hint._tag === "Released" && hint.name === name)
      const reply = yield* waiterBackend.acquire(waiter.sessionId, name).pipe(
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("4 seconds")))
      )
      expect(reply._tag).toBe("Granted")
    }), 30_000)
})

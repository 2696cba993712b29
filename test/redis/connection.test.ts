/**
 * The Redis backend's connections: the eviction check at start (`maxmemory-policy`), calls in flight
 * failed at once when their connection drops, and a backend built on an ioredis client you bring.
 * Servers that are reconfigured, paused or cut are private ones (`privateServer`, `privateCluster`).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Either from "effect/Either"
import { Cluster, Redis } from "ioredis"
import { randomBytes } from "node:crypto"
import { SimbaConfigError } from "../../src/Errors.js"
import { BackendError, LeaseBackend, type LeaseBackendService } from "../../src/LeaseBackend.js"
import * as Connection from "../../src/layers/redis/connection.js"
import * as RedisBackend from "../../src/layers/redis/RedisBackend.js"
import * as Scripts from "../../src/layers/redis/scripts.js"
import * as Simba from "../../src/Simba.js"
import { startProxy } from "../support/proxy.js"
import {
  clientIds,
  clusterNodes,
  privateCluster,
  privateServer,
  type RawClient,
  rawClient,
  uniqueName,
  releaseHeard,
  watchHints
} from "./RedisServers.js"
import { granted } from "../support/replies.js"

const ttl = Duration.millis(1500)

/** A plain ioredis connection to one private server, closed with the scope. */
const admin = (port: number): Effect.Effect<Redis, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => new Redis(port, "127.0.0.1")),
    (client) => Effect.promise(() => client.quit().catch(() => client.disconnect()))
  )

/** A unique connection or prefix name. */
const unique = (label: string) => `${label}-${randomBytes(6).toString("hex")}`


type StartError = BackendError | SimbaConfigError | RedisBackend.EvictionPolicyError

const evictionError = (error: StartError): RedisBackend.EvictionPolicyError => {
  if (error._tag !== "EvictionPolicyError") expect.fail(`expected EvictionPolicyError, got ${error._tag}: ${error.message}`)
  return error
}

/** Opens and closes a session: the backend works. */
/** A store (private server, or a new key prefix) nobody used: no lock-delay needed (see `lockDelay`). */
const fresh = { lockDelay: 0 } as const

const works = (backend: LeaseBackendService) =>
  Effect.gen(function*() {
    const { sessionId } = yield* backend.openSession(ttl)
    expect(granted(yield* backend.acquire(sessionId, uniqueName("works")))).toBeGreaterThanOrEqual(1n)
    yield* backend.closeSession(sessionId)
  })

describe("Redis eviction policy at start", () => {
  it.scopedLive("allkeys-lru is refused with the reason and the fix; accepted with allowEvictionPolicy", () =>
    Effect.gen(function*() {
      const server = yield* privateServer(["--maxmemory-policy", "allkeys-lru"])
      const error = evictionError(yield* Effect.flip(Effect.scoped(RedisBackend.make({ port: server.port }))))
      expect(error.policy).toBe("allkeys-lru")
      expect(error.node).toBe(`127.0.0.1:${server.port}`)
      expect(error.message).toContain("maxmemory-policy allkeys-lru")
      expect(error.message).toContain("two leaders at once")
      expect(error.message).toContain("CONFIG SET maxmemory-policy noeviction")
      expect(error.message).toContain("allowEvictionPolicy: true")
      // The refusal closed its connections: none left behind on the server.
      const probe = yield* admin(server.port)
      expect(yield* clientIds(probe, "simba")).toEqual([])

      yield* works(yield* RedisBackend.make({ port: server.port, allowEvictionPolicy: true, ...fresh }))
    }))

  it.scopedLive("volatile-lru is refused too (it evicts exactly the session keys); noeviction is accepted", () =>
    Effect.gen(function*() {
      const server = yield* privateServer(["--maxmemory-policy", "volatile-lru"])
      expect(evictionError(yield* Effect.flip(Effect.scoped(RedisBackend.make({ port: server.port })))).policy)
        .toBe("volatile-lru")
      const probe = yield* admin(server.port)
      yield* Effect.promise(() => probe.config("SET", "maxmemory-policy", "noeviction"))
      yield* works(yield* RedisBackend.make({ port: server.port, ...fresh }))
    }))

  it.scopedLive("CONFIG renamed away (managed services): the policy is read from INFO memory", () =>
    Effect.gen(function*() {
      const server = yield* privateServer(["--maxmemory-policy", "allkeys-random", "--rename-command", "CONFIG", ""])
      const error = evictionError(yield* Effect.flip(Effect.scoped(RedisBackend.make({ port: server.port }))))
      expect(error.policy).toBe("allkeys-random")
      const fine = yield* privateServer(["--rename-command", "CONFIG", ""])
      yield* works(yield* RedisBackend.make({ port: fine.port, ...fresh }))
    }))

  it.scopedLive("CONFIG and INFO refused by ACL: refused as unreadable, and allowEvictionPolicy lets it start", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const probe = yield* admin(server.port)
      const password = randomBytes(8).toString("hex")
      yield* Effect.promise(() => probe.call("ACL", "SETUSER", "app", "on", `>${password}`, "~*", "&*", "+@all", "-config", "-info"))
      // The ready check sends INFO: off for a user who may not run it.
      const options = {
        url: `redis://app:${password}@127.0.0.1:${server.port}`,
        redisOptions: { enableReadyCheck: false }
      }
      const error = evictionError(yield* Effect.flip(Effect.scoped(RedisBackend.make(options))))
      expect(error.policy).toBeUndefined()
      expect(error.unreadable).toContain("CONFIG GET: NOPERM")
      expect(error.unreadable).toContain("INFO memory: NOPERM")
      expect(error.message).toContain("could not be read")
      expect(error.message).not.toContain(password)
      yield* works(yield* RedisBackend.make({ ...options, allowEvictionPolicy: true, ...fresh }))
    }))

  it.scopedLive("Cluster: every master is read; one with volatile-ttl refuses the backend", () =>
    Effect.gen(function*() {
      const servers = yield* privateCluster(2)
      const nodes = servers.map((s) => ({ host: "127.0.0.1", port: s.port }))
      yield* works(yield* RedisBackend.make({ cluster: { nodes }, ...fresh }))
      const second = yield* admin(servers[1]!.port)
      yield* Effect.promise(() => second.config("SET", "maxmemory-policy", "volatile-ttl"))
      const error = evictionError(yield* Effect.flip(Effect.scoped(RedisBackend.make({ cluster: { nodes: [nodes[0]!] } }))))
      expect(error.node).toBe(`127.0.0.1:${servers[1]!.port}`)
      expect(error.policy).toBe("volatile-ttl")
    }), 60_000)

  it.effect("allowEvictionPolicy must be a boolean", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.scoped(RedisBackend.make({ port: 1, allowEvictionPolicy: "yes" as unknown as boolean }))
      )
      expect(error).toBeInstanceOf(SimbaConfigError)
      expect(error.message).toContain("redis.allowEvictionPolicy")
    }))
})

/**
 * Holds every write at the server (`CLIENT PAUSE WRITE`: scripts wait, `CLIENT LIST`/`KILL` do not),
 * starts `call`, waits until the connection named `name` is blocked in it on one of `admins`' servers,
 * kills that connection, and returns the call's exit and how long it took to fail after the kill.
 */
const killMidCall = <A>(
  admins: ReadonlyArray<Redis>,
  name: string,
  call: Effect.Effect<A, BackendError>
) =>
  Effect.gen(function*() {
    yield* Effect.forEach(admins, (a) => Effect.promise(() => a.call("CLIENT", "PAUSE", "20000", "WRITE")))
    const fiber = yield* Effect.fork(call)
    const [target, id] = yield* Effect.forEach(admins, (a) => Effect.map(clientIds(a, name, "fcall"), (ids) => [a, ids] as const))
      .pipe(
        Effect.flatMap((all) => {
          const found = all.find(([, ids]) => ids.length === 1)
          return found === undefined ? Effect.fail("not at the server yet") : Effect.succeed([found[0], found[1][0]!] as const)
        }),
        Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds"))),
        Effect.orDie
      )
    const killedAt = yield* Clock.currentTimeMillis
    yield* Effect.promise(() => target.call("CLIENT", "KILL", "ID", id))
    const exit = yield* Fiber.await(fiber)
    const failedAfter = (yield* Clock.currentTimeMillis) - killedAt
    yield* Effect.forEach(admins, (a) => Effect.promise(() => a.call("CLIENT", "UNPAUSE")))
    return { exit, failedAfter }
  })

describe("Redis calls in flight on a dropped connection", () => {
  // The call timeout is long and the bound a quarter of it: a behaviour check (failed by the close,
  // not by the timeout), with room for a loaded machine.
  const commandTimeout = 8_000

  const expectFastFailure = (exit: Exit.Exit<unknown, BackendError>, failedAfter: number) => {
    if (!Exit.isFailure(exit)) expect.fail("the call in flight succeeded")
    const error = Exit.causeOption(exit).pipe((cause) => cause._tag === "Some" ? cause.value : undefined)
    expect(String(error)).toContain("closed while the call was in flight")
    expect(failedAfter).toBeLessThan(commandTimeout / 4)
    console.log(`call in flight failed ${failedAfter} ms after its connection was killed (timeout ${commandTimeout} ms)`)
  }

  it.scopedLive("single node: fails at once, then the backend reconnects and works", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const name = unique("simba-inflight")
      const backend = yield* RedisBackend.make({ port: server.port, connectionName: name, commandTimeout, ...fresh })
      const probe = yield* admin(server.port)
      const { exit, failedAfter } = yield* killMidCall([probe], name, backend.openSession(ttl))
      expectFastFailure(exit, failedAfter)
      yield* works(backend).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))))
    }), 60_000)

  it.scopedLive("cluster: a node's connection killed fails the call at once, then the backend works", () =>
    Effect.gen(function*() {
      const servers = yield* privateCluster(2)
      const name = unique("simba-inflight")
      const backend = yield* RedisBackend.make({
        cluster: { nodes: servers.map((s) => ({ host: "127.0.0.1", port: s.port })) },
        connectionName: name,
        commandTimeout,
        ...fresh
      })
      const admins = yield* Effect.forEach(servers, (s) => admin(s.port))
      const { exit, failedAfter } = yield* killMidCall(admins, name, backend.openSession(ttl))
      expectFastFailure(exit, failedAfter)
      yield* works(backend).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))))
    }), 60_000)
})

describe("Redis command connection that stops answering", () => {
  // A short command timeout: the test waits for one to pass. The shared server is not touched; the
  // path to it is broken by a proxy of the test's own.
  const commandTimeout = 400
  const retried = Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))

  it.scopedLive("a command timeout closes its connection; once the path heals the backend answers again", () =>
    Effect.gen(function*() {
      const proxy = yield* Effect.acquireRelease(Effect.promise(() => startProxy(6379)), (p) => Effect.promise(() => p.close()))
      const name = unique("simba-silent")
      const backend = yield* RedisBackend.make({ port: proxy.port, connectionName: name, commandTimeout, ...fresh })
      const probe = yield* admin(6379)
      const before = yield* clientIds(probe, name)
      expect(before).toHaveLength(1)
      const { sessionId } = yield* backend.openSession(ttl)
      // The acquire is lost on the way (the proxy drops what it holds back): no reply ever comes on
      // this connection, and ioredis keeps the command queued for one. Without a reconnect every
      // later reply would be read as the answer to an earlier command, and every call time out.
      proxy.blackhole()
      const lost = yield* Effect.exit(backend.acquire(sessionId, uniqueName("silent")))
      if (!Exit.isFailure(lost)) expect.fail("the acquire sent into the blackhole succeeded")
      expect(Cause.pretty(lost.cause)).toContain("timed out")
      proxy.heal()
      yield* works(backend).pipe(Effect.retry(retried))
      const after = yield* clientIds(probe, name)
      expect(after).toHaveLength(1)
      expect(after[0]).not.toBe(before[0])
    }), 30_000)
})

describe("Redis backend on a client you bring", () => {
  /**
   * Builds a backend on `client` in an inner scope, checks it works and hears its own hints, closes
   * the scope, and checks that the client is still open and usable and that the subscriber is gone.
   */
  const roundTrip = (client: RawClient, clusterMode: boolean) =>
    Effect.gen(function*() {
      const keyPrefix = unique("simba-byo")
      const connectionName = unique("simba-byo")
      const raw = yield* rawClient(clusterMode)
      const hintsConnections = () =>
        Effect.forEach(
          clusterMode ? clusterNodes.map((n) => n.port) : [6379],
          (port) => Effect.flatMap(admin(port), (a) => clientIds(a, `${connectionName}:hints`))
        ).pipe(Effect.map((all) => all.flat().length), Effect.scoped)
      yield* Effect.scoped(Effect.gen(function*() {
        const backend = yield* RedisBackend.makeWithClient(client, { keyPrefix, connectionName, ...fresh })
        const hints = yield* watchHints(backend, raw, keyPrefix)
        yield* releaseHeard(backend, hints, uniqueName("byo"), ttl)
        expect(yield* hintsConnections()).toBeGreaterThanOrEqual(1)
      }))
      // Simba closed its subscriber and left the client alone.
      expect(client.status).toBe("ready")
      expect(yield* Effect.promise(() => client.set(`${keyPrefix}:after`, "1", "PX", 1000))).toBe("OK")
      expect(yield* hintsConnections()).toBe(0)
    })

  const userClient = <C extends RawClient>(make: () => C) =>
    Effect.acquireRelease(Effect.sync(make), (client) => Effect.promise(() => client.quit().catch(() => client.disconnect())))

  it.scopedLive("single node: an ioredis Redis with its default options", () =>
    Effect.flatMap(userClient(() => new Redis(6379, "127.0.0.1")), (client) => roundTrip(client, false)))

  it.scopedLive("cluster: an ioredis Cluster", () =>
    Effect.flatMap(userClient(() => new Cluster(clusterNodes)), (client) => roundTrip(client, true)), 30_000)

  it.scopedLive("Simba on your client: an election is won through it", () =>
    Effect.gen(function*() {
      const client = yield* userClient(() => new Redis(6379, "127.0.0.1"))
      const name = uniqueName("byo-election")
      yield* Effect.scoped(Effect.gen(function*() {
        const backend = yield* RedisBackend.makeWithClient(client, { keyPrefix: unique("simba-byo"), ...fresh })
        const simba = yield* Simba.make({ leaseDuration: "1500 millis", margin: "400 millis" }).pipe(
          Effect.provideService(LeaseBackend, backend)
        )
        const election = yield* simba.election(name)
        yield* election.status.pipe(
          Effect.repeat({ until: (status) => status === "LEADER", schedule: Schedule.spaced("20 millis") }),
          Effect.timeout("10 seconds")
        )
      }))
      expect(yield* Effect.promise(() => client.ping())).toBe("PONG")
    }), 30_000)

  // A client with ioredis's defaults has no command timeout: the backend times its calls out itself
  // (one sweeper for all calls, `tracker`). The server is paused for 2 s, the timeout is 300 ms: a
  // call that fails before the pause ends was failed by the timeout, not answered.
  it.scopedLive("no ioredis commandTimeout: calls in flight fail after the backend's commandTimeout, each on time; then work again", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const client = yield* userClient(() => new Redis(server.port, "127.0.0.1"))
      const backend = yield* RedisBackend.makeWithClient(client, { commandTimeout: "300 millis", ...fresh })
      // Far longer than the pause: the session outlives it whatever the server does meanwhile.
      const long = Duration.seconds(60)
      const { sessionId } = yield* backend.openSession(long)
      const pauser = yield* admin(server.port)
      yield* Effect.promise(() => pauser.call("CLIENT", "PAUSE", "2000", "ALL"))
      const timedCall = (delay: number) =>
        Effect.gen(function*() {
          yield* Effect.sleep(Duration.millis(delay))
          const sent = performance.now()
          const error = yield* Effect.flip(backend.keepAlive(sessionId, long))
          return { error, after: performance.now() - sent }
        })
      // Sent at different times: each fails by its own deadline, not the first one's.
      const calls = yield* Effect.all([timedCall(0), timedCall(150), timedCall(450)], { concurrency: "unbounded" })
      for (const { after, error } of calls) {
        expect(error.operation).toBe("keepAlive")
        expect(String(error.cause)).toContain("no reply within 300 ms")
        expect(after).toBeGreaterThanOrEqual(299)
        expect(after).toBeLessThan(1200)
      }
      expect(client.status).toBe("ready")
      // Once the pause is over the same connection answers again.
      const reply = yield* backend.keepAlive(sessionId, long).pipe(
        Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("5 seconds")))
      )
      expect(reply._tag).toBe("Live")
    }), 30_000)

  it.scopedLive("a lazyConnect client is connected; a closed one fails with BackendError", () =>
    Effect.gen(function*() {
      const lazy = yield* userClient(() => new Redis(6379, "127.0.0.1", { lazyConnect: true }))
      expect(lazy.status).toBe("wait")
      yield* roundTrip(lazy, false)
      const closed = new Redis(6379, "127.0.0.1")
      yield* Effect.promise(() => closed.quit())
      const error = yield* Effect.flip(Effect.scoped(RedisBackend.makeWithClient(closed)))
      expect(error).toBeInstanceOf(BackendError)
      expect(error.message).toContain("closed")
    }), 30_000)

  it.scopedLive("refused: a client with an ioredis keyPrefix, a Cluster with routeBySlot false, a bad option", () =>
    Effect.gen(function*() {
      const prefixed = yield* userClient(() => new Redis(6379, "127.0.0.1", { keyPrefix: "app:", lazyConnect: true }))
      const cluster = yield* userClient(() => new Cluster(clusterNodes, { lazyConnect: true }))
      const cases: ReadonlyArray<readonly [RawClient, RedisBackend.RedisClientOptions, string]> = [
        [prefixed, {}, "redis.client"],
        [cluster, { routeBySlot: false }, "redis.routeBySlot"],
        [prefixed, { keyPrefix: "bad prefix" }, "redis.keyPrefix"],
        [prefixed, { commandTimeout: "0 millis" }, "redis.commandTimeout"]
      ]
      for (const [client, options, field] of cases) {
        const error = yield* Effect.flip(Effect.scoped(RedisBackend.makeWithClient(client, options)))
        if (!(error instanceof SimbaConfigError)) expect.fail(`expected SimbaConfigError, got ${error._tag}`)
        expect(error.field).toBe(field)
      }
      // Refused before any connection: the lazy clients were never connected.
      expect(prefixed.status).toBe("wait")
      expect(cluster.status).toBe("wait")
    }))

  it.scopedLive("layerWithClient: a call in flight on your client fails at once when its connection drops", () =>
    Effect.gen(function*() {
      const server = yield* privateServer()
      const name = unique("simba-byo-inflight")
      // The application's client: ioredis defaults (offline queue, resend of unfulfilled commands).
      const client = yield* userClient(() => new Redis(server.port, "127.0.0.1", { connectionName: name }))
      const backend = yield* RedisBackend.makeWithClient(client, { commandTimeout: 8_000, ...fresh })
      const probe = yield* admin(server.port)
      const { exit, failedAfter } = yield* killMidCall([probe], name, backend.openSession(ttl))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(failedAfter).toBeLessThan(2_000)
      console.log(`call in flight on a client you bring failed ${failedAfter} ms after the kill`)
      yield* works(backend).pipe(Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))))
    }), 60_000)
})

describe("Redis calls nobody waits on (Runner.runBehind)", () => {
  /** The runner of a new connection, and the writes its socket makes (each a system call). */
  const counted = Effect.gen(function*() {
    const client = yield* admin(6379)
    yield* Effect.promise(() => client.ping())
    // The scripts as the backend calls them by default: functions of the library, loaded first.
    const tracker = yield* Connection.tracker(client, 5_000, undefined)
    const library = yield* Connection.loadLibrary(client, tracker, Scripts.library)
    expect(library).toBe(Scripts.library)
    const stream = client.stream
    const writes: Array<number> = []
    const write = stream._write.bind(stream)
    const writev = stream._writev?.bind(stream)
    stream._write = (chunk, encoding, callback) => {
      writes.push(1)
      write(chunk, encoding, callback)
    }
    if (writev !== undefined) {
      stream._writev = (chunks, callback) => {
        writes.push(chunks.length)
        writev(chunks, callback)
      }
    }
    const runner = Connection.runner(client, tracker, library)
    return { runner, writes }
  })
  /** A script call (a boot marker of a unique key): any call will do. */
  const call = () => Scripts.bootMarker({ marker: uniqueName("coalesce") }, { delayMs: 0, resumeAt: "" })
  /** Sends a call behind, then (unless `alone`) one awaited in the same turn; resolves with both replies. */
  const pair = (runner: Connection.Runner, alone = false) =>
    Effect.async<ReadonlyArray<unknown>>((resume) => {
      const replies: Array<unknown> = []
      const answered = (result: Either.Either<unknown, BackendError>) => {
        replies.push(Either.getOrThrow(result))
        if (replies.length === (alone ? 1 : 2)) resume(Effect.succeed(replies))
      }
      runner.runBehind("behind", call(), answered)
      if (!alone) runner.runWith("next", call(), answered)
    })

  it.scoped("a call behind that another call followed in the same turn waits for the next one: both leave in one write", () =>
    Effect.gen(function*() {
      const { runner, writes } = yield* counted
      // The first time there is no evidence of a call following: the call behind goes out at once.
      expect((yield* pair(runner)).length).toBe(2)
      expect(writes).toEqual([1, 1])
      writes.length = 0
      for (let i = 0; i < 3; i++) expect((yield* pair(runner)).length).toBe(2)
      expect(writes).toEqual([2, 2, 2])
    }))

  it.scoped("a call behind with nothing after it leaves by the end of the turn, and the next one after it goes out at once", () =>
    Effect.gen(function*() {
      const { runner, writes } = yield* counted
      yield* pair(runner)
      yield* pair(runner)
      writes.length = 0
      // Corked (a call followed the last one), nothing follows: flushed at the turn's end, answered.
      expect(yield* pair(runner, true)).toEqual([[1, expect.any(String)]])
      expect(writes).toEqual([1])
      // No call followed that one: the next call behind is not held back.
      yield* pair(runner, true)
      expect(writes).toEqual([1, 1])
    }))
})

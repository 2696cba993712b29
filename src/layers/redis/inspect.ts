/**
 * `inspect` of the Redis backend (`LeaseBackend.Inventory`): what the store holds under the key
 * prefix, for operators. Read-only: `SCAN` (on every master of a cluster), then plain reads
 * (`TIME`, `PTTL`, `HGETALL`, `GET`, `ZRANGE`) pipelined on the node that holds the keys; no script
 * runs, so nothing is renewed, pruned, restored or published. Its cost grows with the keyspace (SCAN
 * walks every key of a node), and what it lists may have moved on by the time it is read.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { Redis } from "ioredis"
import type { BackendError, GroupView, Inventory, LeaseStatus, SessionStatus } from "../../LeaseBackend.js"
import { brokenRule } from "../../LeaseName.js"
import { isSessionId } from "../../internal/sessionId.js"
import { backendError, type Client, isCluster, type Tracker } from "./connection.js"
import type { Keys } from "./keys.js"

const operation = "inspect"
/** `SCAN ... COUNT`: keys examined per call, a bounded amount of server work per round trip. */
const scanCount = 1000
/** Keys read per pipeline (a few commands each), so one reply stays a bounded size. */
const readBatch = 1000

/** A key of the prefix that `inspect` reads, by what it is. */
type Found =
  | { readonly kind: "session"; readonly sessionId: string }
  | { readonly kind: "lease"; readonly name: string }
  | { readonly kind: "group"; readonly group: string }

/** A lease as read on its node: the session its hash (or holder record) names, before liveness is known. */
interface RawLease {
  readonly name: string
  readonly session: string | undefined
  readonly token: bigint
  /** The queue, first in line first, dead entries included. */
  readonly queue: ReadonlyArray<string>
}

interface NodeView {
  readonly sessions: ReadonlyArray<SessionStatus>
  readonly leases: ReadonlyArray<RawLease>
  readonly groups: ReadonlyArray<GroupView>
}

// The replies read, as ioredis gives them (HGETALL as an object), decoded: a key of the prefix that
// is not what the scripts write fails the call rather than being listed wrong.
const Time = Schema.Tuple(Schema.NumberFromString, Schema.NumberFromString)
const Pttl = Schema.Int
const LeaseHash = Schema.Struct({
  session: Schema.optional(Schema.String),
  token: Schema.optional(Schema.BigInt)
})
const HolderRecord = Schema.NullOr(Schema.String)
const Members = Schema.Array(Schema.String)

/** `SCAN MATCH` glob of `text` taken literally. */
const literalGlob = (text: string): string => text.replace(/[*?[\]\\]/g, "\\$&")

/** `key` without `start` and `end`, or `undefined` when it does not have them. */
const between = (key: string, start: string, end: string): string | undefined =>
  key.length > start.length + end.length && key.startsWith(start) && key.endsWith(end)
    ? key.slice(start.length, key.length - end.length)
    : undefined

/**
 * What `key` is, or `undefined` for the keys `inspect` does not read (queues, session sets, shadows,
 * boot markers, or keys of a longer prefix). A lease is found by its hash or by its holder record
 * (which outlives a hash deleted by hand). Names are checked as the SPI checks them: they hold no
 * braces, so `lease:{a}:queue` is never read as the lease `a}:queue`.
 */
const classify = (k: Keys, key: string): Found | undefined => {
  const sessionId = between(key, k.sessionPrefix, "}")
  if (sessionId !== undefined) return isSessionId(sessionId) ? { kind: "session", sessionId } : undefined
  const name = between(key, k.leasePrefix, "}") ?? between(key, k.leasePrefix, "}:holder")
  if (name !== undefined) return brokenRule(name) === undefined ? { kind: "lease", name } : undefined
  const group = between(key, k.groupPrefix, "}")
  if (group !== undefined) return brokenRule(group) === undefined ? { kind: "group", group } : undefined
  return undefined
}

/** The holder record `sid:token` (see `recorded_holder` in the Lua prelude), or `undefined`. */
const recordedHolder = (record: string | null): { readonly session: string; readonly token: bigint } | undefined => {
  const match = record === null ? null : /^([^:]+):(\d+)$/.exec(record)
  return match === null ? undefined : { session: match[1]!, token: BigInt(match[2]!) }
}

/** A group member's score (its expiry, server ms) as Redis prints a double. */
const scoreOf = (text: string): number => text === "inf" || text === "+inf" ? Infinity : text === "-inf" ? -Infinity : Number(text)

type Replies = ReadonlyArray<[error: Error | null, result: unknown]>

/** Reply `at` of a pipeline, decoded with `schema`; a reply error or an undecodable reply fails. */
const replyAt = <A, I>(
  replies: Replies,
  at: number,
  schema: Schema.Schema<A, I>,
  what: string
): Either.Either<A, BackendError> => {
  const entry = replies[at]
  if (entry === undefined) return Either.left(backendError(operation, `no reply for ${what}`))
  const [error, result] = entry
  if (error !== null) return Either.left(backendError(operation, new Error(`${what}: ${error.message}`, { cause: error })))
  return Either.mapLeft(
    Schema.decodeUnknownEither(schema)(result),
    (cause) => backendError(operation, new Error(`${what}: unexpected reply`, { cause }))
  )
}

/** The inventory of the store behind `client` (every master of a cluster) under the keys `k` of `prefix`. */
export const make = (
  client: Client,
  { track }: Tracker,
  prefix: string,
  k: Keys
): Effect.Effect<Inventory, BackendError> => {
  const pattern = `${literalGlob(prefix)}:*`

  /** Every key of the prefix on `node` (SCAN may answer a key twice: a set). */
  const scan = (node: Redis): Effect.Effect<Set<string>, BackendError> => {
    const found = new Set<string>()
    const from = (cursor: string): Effect.Effect<Set<string>, BackendError> =>
      Effect.flatMap(track(operation, () => node.scan(cursor, "MATCH", pattern, "COUNT", scanCount)), ([next, keys]) => {
        for (const key of keys) found.add(key)
        return next === "0" ? Effect.succeed(found) : from(next)
      })
    return from("0")
  }

  /**
   * Reads `batch` on `node` in one pipeline, its server time first (group members expire by it). A
   * key gone since the scan reads as missing (PTTL -2, empty hash, no record) and is skipped.
   */
  const read = (node: Redis, batch: ReadonlyArray<Found>): Effect.Effect<NodeView, BackendError> =>
    Effect.gen(function*() {
      const replies = yield* track(operation, () => {
        const pipeline = node.pipeline().time()
        for (const found of batch) {
          switch (found.kind) {
            case "session":
              pipeline.pttl(k.session(found.sessionId))
              break
            case "lease":
              pipeline.hgetall(k.lease(found.name)).get(k.leaseHolder(found.name)).zrange(k.leaseQueue(found.name), 0, -1)
              break
            case "group":
              pipeline.zrange(k.group(found.group), 0, -1, "WITHSCORES")
              break
          }
        }
        return pipeline.exec()
      })
      if (replies === null) return yield* Effect.fail(backendError(operation, "the pipeline was discarded"))
      const [seconds, micros] = yield* replyAt(replies, 0, Time, "TIME")
      const now = seconds * 1000 + Math.floor(micros / 1000)
      const sessions: Array<SessionStatus> = []
      const leases: Array<RawLease> = []
      const groups: Array<GroupView> = []
      let at = 1
      for (const found of batch) {
        switch (found.kind) {
          case "session": {
            const key = k.session(found.sessionId)
            const pttl = yield* replyAt(replies, at++, Pttl, `PTTL ${key}`)
            // -2: gone; -1 (no expiry) never comes from the scripts, and says nothing of its time left.
            if (pttl !== -2) {
              sessions.push({ sessionId: found.sessionId, remaining: pttl >= 0 ? Duration.millis(pttl) : undefined })
            }
            break
          }
          case "lease": {
            const key = k.lease(found.name)
            const hash = yield* replyAt(replies, at++, LeaseHash, `HGETALL ${key}`)
            const record = yield* replyAt(replies, at++, HolderRecord, `GET ${k.leaseHolder(found.name)}`)
            const queue = yield* replyAt(replies, at++, Members, `ZRANGE ${k.leaseQueue(found.name)}`)
            // As the scripts read it: a hash with neither holder nor token (deleted by hand, or
            // holding waiters only) is held by the session its holder record names.
            const recorded = hash.session === undefined && hash.token === undefined ? recordedHolder(record) : undefined
            const hashFound = Object.keys(hash).length > 0
            if (!hashFound && recorded === undefined) break
            leases.push({
              name: found.name,
              session: recorded?.session ?? hash.session,
              // No token yet (waiters of a lease never granted here): the floor of the first one.
              token: recorded?.token ?? hash.token ?? 0n,
              queue
            })
            break
          }
          case "group": {
            const key = k.group(found.group)
            const scored = yield* replyAt(replies, at++, Members, `ZRANGE ${key}`)
            // A member whose expiry passed is not live (the scripts drop it at their next visit).
            const members: Array<string> = []
            for (let i = 0; i + 1 < scored.length; i += 2) if (scoreOf(scored[i + 1]!) >= now) members.push(scored[i]!)
            if (members.length > 0) groups.push({ group: found.group, members })
            break
          }
        }
      }
      return { sessions, leases, groups }
    })

  /** What `node` holds: scanned, then read in batches. */
  const readNode = (node: Redis): Effect.Effect<NodeView, BackendError> =>
    Effect.gen(function*() {
      const found: Array<Found> = []
      for (const key of yield* scan(node)) {
        const item = classify(k, key)
        if (item !== undefined) found.push(item)
      }
      const views: Array<NodeView> = []
      for (let i = 0; i < found.length; i += readBatch) views.push(yield* read(node, found.slice(i, i + readBatch)))
      return {
        sessions: views.flatMap((v) => v.sessions),
        leases: views.flatMap((v) => v.leases),
        groups: views.flatMap((v) => v.groups)
      }
    })

  /**
   * The time left of sessions a holder or waiter names that the scan did not list (opened while it
   * ran, or gone), routed by key (a cluster's sessions live on any node): the live ones.
   */
  const lookUp = (sessionIds: ReadonlyArray<string>): Effect.Effect<Array<SessionStatus>, BackendError> =>
    Effect.gen(function*() {
      const live: Array<SessionStatus> = []
      for (let i = 0; i < sessionIds.length; i += readBatch) {
        const batch = sessionIds.slice(i, i + readBatch)
        const ttls = yield* track(operation, () => Promise.all(batch.map((id) => client.pttl(k.session(id)))))
        batch.forEach((sessionId, j) => {
          const pttl = ttls[j]!
          if (pttl !== -2) live.push({ sessionId, remaining: pttl >= 0 ? Duration.millis(pttl) : undefined })
        })
      }
      return live
    })

  return Effect.gen(function*() {
    // The masters now (a cluster's topology may have changed since the start).
    const nodes = isCluster(client) ? client.nodes("master") : [client]
    const views = yield* Effect.forEach(nodes, readNode, { concurrency: "unbounded" })
    const sessions = new Map<string, SessionStatus>()
    for (const session of views.flatMap((v) => v.sessions)) sessions.set(session.sessionId, session)
    const leases = views.flatMap((v) => v.leases)
    const named = new Set<string>()
    for (const lease of leases) {
      if (lease.session !== undefined) named.add(lease.session)
      for (const waiter of lease.queue) named.add(waiter)
    }
    const unlisted = [...named].filter((id) => !sessions.has(id) && isSessionId(id))
    for (const session of yield* lookUp(unlisted)) sessions.set(session.sessionId, session)
    return {
      sessions: [...sessions.values()],
      // A session gone (expired, closed) holds nothing and waits for nothing, and a holder never waits.
      leases: leases.map(({ name, queue, session, token }): LeaseStatus => {
        const holder = session !== undefined && sessions.has(session) ? session : undefined
        return { name, holder, token, waiters: queue.filter((id) => id !== holder && sessions.has(id)) }
      }),
      groups: views.flatMap((v) => v.groups)
    }
  })
}

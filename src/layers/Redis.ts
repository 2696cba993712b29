/**
 * The Redis backend (ioredis 5): single node, or Redis Cluster through ioredis `Cluster`.
 *
 * Every state change is one Lua script, run by SHA (`EVALSHA`, then `EVAL` after a `NOSCRIPT`, which
 * loads it again), and every decision about time is taken by the server: expiry through `PX`/`PTTL`
 * and `redis.call('TIME')`; the client's clock is never read. Replies are decoded with `Schema`; any
 * failure (connection lost, command timeout, `LOADING`, `READONLY`, `CLUSTERDOWN`, a reply that does
 * not decode) is a `BackendError { backend: "redis", operation, cause }`, never a crash.
 *
 * ## Key layout (prefix `simba` by default; the braces are literal, they are Redis hash tags)
 *
 * - `simba:lease:{name}`: hash `{ session, token, expires }`. Never expires, never deleted, so the
 *   token of a name never goes backwards while the data survives (see "persistence" below). A grant
 *   sets `token = token + 1` (`HINCRBY`) and `session`; a release deletes `session` and `expires`
 *   and keeps `token`. `expires` (server epoch ms) is the holder session's expiry as of the grant or
 *   the last renewal: information for operators, decisions look at the session key. While the lease
 *   is free and reserved for a waiter (below) it also carries `reserved` (that session's id) and
 *   `reservedUntil` (server epoch ms).
 * - `simba:lease:{name}:queue`: the lease's waiter queue, a sorted set of session ids scored by the
 *   server time they were first refused (same hash slot as the lease); its `PX` is extended to the
 *   ttl of each waiter that asks, so it vanishes once nobody has asked for a session's lifetime.
 * - `simba:session:{sid}`: the session ("home") key, a string with `PX`; `sid` is 32 lowercase hex
 *   from `node:crypto` `randomBytes` (128 bits). It is never revived: once gone, `keepAlive`,
 *   `acquire` and `join` answer `Expired`.
 * - `simba:session:{sid}:leases` / `:groups`: sets of the names it holds and the groups it joined,
 *   expiring with it.
 * - `simba:group:{g}`: sorted set of member session ids scored by their expiry (server epoch ms);
 *   expired members are dropped (`ZREMRANGEBYSCORE`) before any read.
 * - Pub/sub: a release (and a session close, for each lease) publishes `released` (or, handing it
 *   off, `granted:<sid>:<token>` / `released:<sid>`) on the channel named exactly like the lease key,
 *   `simba:lease:{name}`; a group change publishes `joined`,
 *   `left` or `expired` on the channel named like the group key, `simba:group:{g}`. The subscriber
 *   connection listens with `PSUBSCRIBE simba:lease:*` and `simba:group:*`.
 *
 * A lease is free when its hash names no session, or when the session it names is gone (takeover).
 *
 * ## Waiter queue (fair FIFO hand-off)
 *
 * Without it every release would wake every waiting client at once (the `released` hint), each would
 * send an acquire, one would win at random and the others would have wasted a call each. Instead:
 *
 * - an acquire refused because of a live holder (or another session's reservation) adds the
 *   requester to the queue (`ZADD NX`: a waiter keeps its place when it asks again);
 * - when a release or closeSession frees the lease, without `routeBySlot` the script **grants** it
 *   to the first waiter whose session is still alive (dead ones leave the queue): the next token,
 *   the lease in that session's set, exactly as its own acquire would, and publishes
 *   `granted:<sid>:<token>`, which the subscriber turns into `Hint.Granted({ name, to, token })`.
 *   The waiter's client adopts it without another round trip (the hand-off costs one release plus
 *   one pub/sub message); if the message is lost, its next renewal lists the lease and it adopts it
 *   then; a client that no longer wants it releases it, and it goes to the next waiter. The engine
 *   adopts a lease it did not ask for only when its token is above every token of the name it has
 *   seen (see `Engine`), so a late or repeated message can never revive an old grant;
 * - with `routeBySlot`, and when an acquire finds the holder's session gone (takeover), the first live
 *   waiter (with `routeBySlot`: its shadow in the lease's slot, not closed) gets a reservation of
 *   `reservationMillis` (250 ms) instead, published as `released:<sid>`, which the subscriber turns
 *   into `Hint.Released({ name, to: sid })` (clients other than `sid` ignore it): a grant there
 *   would need the waiter's registration in that slot to be current, which only its own acquire
 *   establishes; a plain `released` (nobody waits; and the message of older versions) is a hint
 *   without `to`;
 * - while the reservation runs, only that session is granted the lease; the others are told
 *   `HeldBy` with `remaining` = what is left of the reservation, and queued. The grant removes the
 *   requester from the queue and clears the reservation;
 * - a reservation that runs out unused (the waiter gave up, or lost the message) drops that waiter
 *   from the queue; the next acquire (any waiter retries right after `remaining`) reserves the lease
 *   for the next live waiter and publishes again, or takes it itself when it is the head.
 *
 * R = 250 ms: long enough for the message to reach the head's subscriber and its acquire to come back
 * (a few round trips plus an event-loop stall of a loaded client), short enough that a waiter that
 * stopped waiting delays the others once, briefly. Safety is unchanged: reservations only decide
 * *who* among the candidates may take a free lease; tokens, server-time decisions and "never revive"
 * are exactly as before, and a grant by hand-off is the grant the waiter's own acquire would get. An
 * uncontended acquire (free lease, empty queue) stays one script call, and a release one call. In a cluster a waiter whose only link to the lease's slot is its shadow there
 * counts as alive while that shadow lives (it is extended by the waiter's own acquires; a renewal
 * drops a slot where the session holds nothing): a waiter silent for longer than its ttl may be
 * skipped, and queues again at the back when it next asks.
 *
 * ## Redis Cluster (`routeBySlot`, the default with `cluster`)
 *
 * A script may only touch keys of one hash slot, and every key of a lease lives in the slot of its
 * name (`{name}`), while the session lives in the slot of its id (`{sid}`). Checking "is the holder's
 * session alive" inside the lease's slot therefore needs a copy of the session there: a per-slot
 * **shadow** of the session.
 *
 * - For slot `s`, `tag(s)` is a fixed short string hashing to `s` (the first base-36 counter that
 *   does, computed once): `simba:shadow:{tag(s)}:sid` (a hash `{ gen, closed }` with `PX`) is the
 *   session's shadow in slot `s`, and `simba:shadow:{tag(s)}:sid:leases` the names it holds there.
 *   Liveness and takeover in slot `s` look at shadows.
 * - The home key keeps `simba:session:{sid}:slots` (hash `tag -> seq`, the slots that may hold its
 *   leases) instead of `:leases`; its value is a counter (`INCR` keeps the `PX`) that numbers the
 *   registrations.
 * - `acquire` = 2 calls: the home (alive? register the slot, return its `PTTL` and a new `seq`), then
 *   the lease's slot (create or extend the shadow to at least that `PTTL`, then decide as on one
 *   node). `join` is the same with the group's slot; `release` is 1 call in the lease's slot;
 *   `members` 1 call in the group's slot.
 * - `keepAlive` = 1 call to the home (extend it; read the slots and groups), then **one call per slot
 *   that holds the session's leases or groups**, all sent at once (so the latency is one round trip
 *   per node), each extending the shadow to at least the home's remaining time, so a shadow never
 *   expires before the deadline the client derives from that reply; plus, rarely, one call back to
 *   the home to forget slots that became empty.
 * - Forgetting a slot safely: when a slot holds nothing, the renewal marks its shadow `closed = gen`
 *   (the last registration applied there) and the home drops the slot only if its registration is
 *   still that one. A grant carrying an older registration then answers `stale` and `acquire`
 *   registers again, so a lease can never be granted in a slot the renewal no longer visits.
 * - `closeSession` deletes the home first (from then on everything answers `Expired`), then releases
 *   and leaves slot by slot; shadows stay behind as `closed` markers until they expire.
 *
 * Trade-off: on one node, a renewal is one script whatever the number of leases. In a cluster it is
 * one script per distinct slot among the session's leases and groups: names spread over the 16384
 * slots, so a client holding 1,000 leases sends up to ~1,000 small scripts per renewal (all written at
 * once, so still about one round trip per node in latency, but not in server or client work: ~0.1 ms
 * of client CPU each; `redisOptions: { enableAutoPipelining: true }` batches the writes per node).
 * Lease names cannot
 * carry hash tags (`{` is not a valid name character), so names cannot be forced into one slot. The
 * alternative, one script per node touching several slots (Redis 7 `allow-cross-slot-keys`), breaks
 * during resharding and on Redis 6, and was rejected. A session that holds few leases at a time (the
 * common case) pays a handful of calls per renewal. A shadow outlives its home by about one round
 * trip (it is extended after the home, by the home's remaining time), which only delays a takeover,
 * never allows an early one. Durations, not timestamps, cross between nodes, so the nodes' clocks
 * need not agree.
 *
 * ## Failure behaviour
 *
 * Commands are not queued while disconnected (`enableOfflineQueue: false`) and are not resent after a
 * reconnect (`autoResendUnfulfilledCommands: false`); every command has a timeout (`commandTimeout`,
 * default 5 s). A call that fails or times out may still have been applied by the server: the engine
 * handles that (an unknown held lease shows up in the next renewal and is released). After
 * `READONLY` (a failed-over primary) the connection is re-established. The subscriber connection is
 * resubscribed after a reconnect (ioredis `autoResubscribe`; in a cluster, ioredis picks another node
 * and resubscribes); hints published while it was disconnected are lost, and candidates fall back to
 * their retry period.
 *
 * Pub/sub: in a cluster, a classic `PUBLISH` (from a script too) reaches subscribers on every node
 * over the cluster bus, so one subscriber connection to any node hears every release; sharded pub/sub
 * (`SPUBLISH`/`SSUBSCRIBE`) would keep messages inside a shard but has no patterns, and would need one
 * subscription per name and shard. Channels are global to a server (not per `db`): deployments that
 * share a server should use distinct `keyPrefix`es, or they get each other's (harmless) hints.
 *
 * Interruption: ioredis cannot take back a command once sent, so interrupting a call abandons its
 * reply; the script may still run (as with a timeout, see above).
 *
 * Persistence: the lease hashes are what keeps tokens rising. On a Redis without persistence, a
 * restart loses them and tokens start again from 1; enable AOF (`appendonly yes`, `appendfsync
 * everysec` or `always`) where fencing tokens must survive a restart.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as PubSub from "effect/PubSub"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Cluster, Redis } from "ioredis"
import type { ClusterOptions, RedisOptions as IORedisOptions } from "ioredis"
import { createHash, randomBytes } from "node:crypto"
import type { ConnectionOptions as TlsConnectionOptions } from "node:tls"
import {
  AcquireReply,
  BackendError,
  type GroupView,
  type HeldLease,
  Hint,
  KeepAliveReply,
  LeaseBackend,
  type LeaseBackendService,
  type OpenedSession
} from "../LeaseBackend.js"
import { brokenRule } from "../LeaseName.js"

// -------------------------------------------------------------------------------------------------
// Options
// -------------------------------------------------------------------------------------------------

/** A Redis Cluster node to start from. */
export interface RedisClusterNode {
  readonly host: string
  readonly port: number
}

/** How to reach Redis. Fields given explicitly win over the same part of `url`. */
export interface RedisOptions {
  /** `redis://[user[:password]@]host[:port][/db]`, or `rediss://` for TLS. */
  readonly url?: Redacted.Redacted | string | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  /** `true` for TLS with Node's defaults, or Node `tls` options. */
  readonly tls?: boolean | TlsConnectionOptions | undefined
  /** Database number (single node only). */
  readonly db?: number | undefined
  /** First part of every key and channel, `[A-Za-z0-9._:-]+`. Default `simba`. */
  readonly keyPrefix?: string | undefined
  /** Use a Redis Cluster (ioredis `Cluster`) started from these nodes; `url` then gives only credentials and TLS. */
  readonly cluster?: { readonly nodes: ReadonlyArray<RedisClusterNode> } | undefined
  /**
   * Keep every script call inside one hash slot (per-slot session shadows, see the module comment).
   * Required by Redis Cluster. Default: `true` with `cluster`, `false` otherwise.
   */
  readonly routeBySlot?: boolean | undefined
  /** Time allowed to connect (both connections). Default 10 seconds. */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /** Time after which a command fails. Default 5 seconds. */
  readonly commandTimeout?: Duration.DurationInput | undefined
  /** `CLIENT SETNAME` of the command connection; the subscriber gets `<name>:hints`. Default `simba`. */
  readonly connectionName?: string | undefined
  /**
   * Further ioredis options for every connection (for example `family`, `keepAlive`). Applied under
   * the ones above and under those this backend relies on (`lazyConnect`, `enableOfflineQueue`,
   * `autoResendUnfulfilledCommands`, `commandTimeout`), which always win.
   */
  readonly redisOptions?: IORedisOptions | undefined
  /** Further ioredis `Cluster` options (for example `natMap`, `dnsLookup`, `slotsRefreshTimeout`), applied the same way. */
  readonly clusterOptions?: ClusterOptions | undefined
}

const defaultPrefix = "simba"
const prefixPattern = /^[A-Za-z0-9._:-]+$/
const sessionIdPattern = /^[0-9a-f]{32}$/

/**
 * Options read from the environment: `SIMBA_REDIS_URL` (default `redis://127.0.0.1:6379`),
 * `SIMBA_REDIS_CLUSTER` (optional, `host:port,host:port,...`: use a cluster; the URL then only gives
 * credentials and TLS) and `SIMBA_REDIS_KEY_PREFIX` (default `simba`).
 */
export const config: Config.Config<RedisOptions> = Config.all({
  url: Config.redacted("SIMBA_REDIS_URL").pipe(Config.withDefault(Redacted.make("redis://127.0.0.1:6379"))),
  cluster: Config.string("SIMBA_REDIS_CLUSTER").pipe(
    Config.mapOrFail((text) => {
      const nodes: Array<RedisClusterNode> = []
      for (const part of text.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
        const match = /^(.+):(\d{1,5})$/.exec(part)
        const port = match === null ? NaN : Number(match[2])
        if (match === null || !(port > 0 && port < 65536)) {
          return Either.left(ConfigError.InvalidData([], `expected host:port, got ${JSON.stringify(part)}`))
        }
        nodes.push({ host: match[1]!, port })
      }
      return nodes.length === 0
        ? Either.left(ConfigError.InvalidData([], "expected at least one host:port"))
        : Either.right<{ readonly nodes: ReadonlyArray<RedisClusterNode> }>({ nodes })
    }),
    Config.option,
    Config.map(Option.getOrUndefined)
  ),
  keyPrefix: Config.string("SIMBA_REDIS_KEY_PREFIX").pipe(Config.withDefault(defaultPrefix))
})

// -------------------------------------------------------------------------------------------------
// Hash slots
// -------------------------------------------------------------------------------------------------

const crcTable = (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    table[i] = crc
  }
  return table
})()

const crc16 = (bytes: ArrayLike<number>): number => {
  let crc = 0
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ crcTable[((crc >> 8) ^ bytes[i]!) & 0xff]!
  return crc
}

/** The Redis Cluster hash slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key, mod 16384). */
export const keySlot = (key: string): number => {
  const open = key.indexOf("{")
  if (open !== -1) {
    const close = key.indexOf("}", open + 1)
    if (close > open + 1) key = key.slice(open + 1, close)
  }
  return crc16(Buffer.from(key, "utf8")) & 16383
}

let slotTags: Array<string> | undefined

/** A fixed short string hashing to `slot`: the first base-36 counter value that does (table built once, ~10 ms). */
export const slotTag = (slot: number): string => {
  if (slotTags === undefined) {
    const tags: Array<string> = new Array(16384)
    const codes: Array<number> = []
    let left = 16384
    for (let i = 0; left > 0; i++) {
      const tag = i.toString(36)
      codes.length = tag.length
      for (let j = 0; j < tag.length; j++) codes[j] = tag.charCodeAt(j)
      const s = crc16(codes) & 16383
      if (tags[s] === undefined) {
        tags[s] = tag
        left--
      }
    }
    slotTags = tags
  }
  return slotTags[slot]!
}

// -------------------------------------------------------------------------------------------------
// Keys
// -------------------------------------------------------------------------------------------------

/** The keys and channels of one key prefix (see the module comment). */
export const keys = (prefix: string = defaultPrefix) => ({
  /** Lease hash, also the channel its releases are published on. */
  lease: (name: string) => `${prefix}:lease:{${name}}`,
  /** Waiter queue of a lease (sorted set of session ids by server time of arrival), in the lease's slot. */
  leaseQueue: (name: string) => `${prefix}:lease:{${name}}:queue`,
  /** Group sorted set, also the channel its changes are published on. */
  group: (group: string) => `${prefix}:group:{${group}}`,
  session: (sessionId: string) => `${prefix}:session:{${sessionId}}`,
  sessionLeases: (sessionId: string) => `${prefix}:session:{${sessionId}}:leases`,
  sessionGroups: (sessionId: string) => `${prefix}:session:{${sessionId}}:groups`,
  sessionSlots: (sessionId: string) => `${prefix}:session:{${sessionId}}:slots`,
  shadow: (tag: string, sessionId: string) => `${prefix}:shadow:{${tag}}:${sessionId}`,
  shadowLeases: (tag: string, sessionId: string) => `${prefix}:shadow:{${tag}}:${sessionId}:leases`,
  leasePattern: `${prefix}:lease:*`,
  groupPattern: `${prefix}:group:*`
})

// -------------------------------------------------------------------------------------------------
// Lua scripts
// -------------------------------------------------------------------------------------------------

interface Script {
  readonly name: string
  readonly lua: string
  readonly sha: string
}

/**
 * How long a freed lease stays reserved for the head of its waiter queue (server ms). Long enough for
 * the `released` message to reach the head's subscriber and its acquire to come back (a few round
 * trips, plus an event-loop stall on a loaded client), short enough that a waiter that stopped
 * waiting (or lost the message) delays the others only briefly.
 */
export const reservationMillis = 250
const RESERVE_MS = reservationMillis

const prelude = `
if redis.replicate_commands then redis.replicate_commands() end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Make key live at least ms more; never shortens; a missing key stays missing.
local function extend(key, ms)
  local cur = redis.call('PTTL', key)
  if cur ~= -2 and cur < ms then redis.call('PEXPIRE', key, ms) end
end
-- Drop the members whose expiry passed (publishing the change), then list the live ones.
local function live_members(gk, now)
  if redis.call('ZREMRANGEBYSCORE', gk, '-inf', '(' .. now) > 0 then
    redis.call('PUBLISH', gk, 'expired')
  end
  return redis.call('ZRANGE', gk, 0, -1)
end
-- Renew membership of sid in gk (never re-adds) and list the live members; nil when not a member.
local function group_view(gk, sid, now, rem)
  if not redis.call('ZSCORE', gk, sid) then return nil end
  redis.call('ZADD', gk, 'XX', now + rem, sid)
  extend(gk, rem)
  return live_members(gk, now)
end
-- {name, token} of the leases in set whose hash still names sid; the others leave the set.
local function held_leases(set, sid, lease_prefix, expires)
  local held = {}
  for _, name in ipairs(redis.call('SMEMBERS', set)) do
    local lk = lease_prefix .. name .. '}'
    local h = redis.call('HMGET', lk, 'session', 'token')
    if h[1] == sid then
      redis.call('HSET', lk, 'expires', expires)
      held[#held + 1] = {name, h[2]}
    else
      redis.call('SREM', set, name)
    end
  end
  return held
end
-- ---- FIFO hand-off (see "Waiter queue" in the module comment) ----
-- Sessions are alive while holder_prefix .. sid .. holder_suffix exists; holder_suffix '' means a
-- per-slot shadow, which is dead too once closeSession marked it closed.
local closed_marker = '9007199254740992'
local function alive(hp, sid, hs)
  local key = hp .. sid .. hs
  if redis.call('EXISTS', key) == 0 then return false end
  return hs ~= '' or redis.call('HGET', key, 'closed') ~= closed_marker
end
-- The first live waiter of queue q (dead ones leave it), or nil.
local function next_waiter(q, hp, hs)
  while true do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then return nil end
    if alive(hp, head, hs) then return head end
    redis.call('ZREM', q, head)
  end
end
-- Reserve the free lease lk for sid until now + RESERVE_MS and tell it ('released:<sid>').
local function reserve(lk, sid, now)
  redis.call('HSET', lk, 'reserved', sid, 'reservedUntil', now + ${RESERVE_MS})
  redis.call('PUBLISH', lk, 'released:' .. sid)
end
-- sid (whose liveness key has own ms left) holds lk (name, listed in its set) from now on.
local function hold(lk, set, name, sid, now, own)
  redis.call('HSET', lk, 'session', sid, 'expires', now + own)
  redis.call('SADD', set, name)
  extend(set, own)
end
-- One node: grant the free lease lk (name) to the live waiter head, as its acquire would, and tell
-- it ('granted:<sid>:<token>'), so it holds the lease without another round trip.
local function grant_to(lk, q, name, head, hp, hs)
  local home = hp .. head .. hs
  local token = redis.call('HINCRBY', lk, 'token', 1)
  hold(lk, home .. ':leases', name, head, now_ms(), redis.call('PTTL', home))
  redis.call('ZREM', q, head)
  redis.call('PUBLISH', lk, 'granted:' .. head .. ':' .. token)
end
-- lk was held (so carries no reservation: a grant clears it) and just became free: on one node grant
-- it to the first live waiter; in a cluster (hs == '': the waiter's registration lives in another
-- slot, see "Redis Cluster") reserve it for that waiter; publish a plain 'released' when nobody waits.
local function hand_off(lk, q, name, hp, hs)
  local head = next_waiter(q, hp, hs)
  if not head then
    redis.call('PUBLISH', lk, 'released')
  elseif hs ~= '' then
    grant_to(lk, q, name, head, hp, hs)
  else
    reserve(lk, head, now_ms())
  end
end
-- Queue sid (once: a waiter keeps its place) behind the others; the queue lives while its waiters may.
local function wait_in(q, sid, now, own)
  redis.call('ZADD', q, 'NX', now, sid)
  extend(q, own)
end
-- Release every lease in set that still names sid, handing each off.
local function release_all(set, sid, lease_prefix, hp, hs)
  for _, name in ipairs(redis.call('SMEMBERS', set)) do
    local lk = lease_prefix .. name .. '}'
    if redis.call('HGET', lk, 'session') == sid then
      redis.call('HDEL', lk, 'session', 'expires')
      hand_off(lk, lk .. ':queue', name, hp, hs)
    end
  end
end
-- Grant lease lk to sid (whose liveness key has own ms left) unless a live session holds it or it
-- is reserved for another live waiter; a refused sid joins the queue q.
local function acquire(lk, q, set, sid, name, own, hp, hs)
  local h = redis.call('HMGET', lk, 'session', 'token', 'reserved', 'reservedUntil')
  local now = now_ms()
  if h[1] ~= sid then
    if h[1] then
      local left = redis.call('PTTL', hp .. h[1] .. hs)
      if left ~= -2 then
        wait_in(q, sid, now, own)
        return {'held', h[2] or '', left}
      end
      -- Takeover: the holder's session is gone, the lease is free.
      redis.call('HDEL', lk, 'session', 'expires')
    end
    -- Free: who may take it?
    local head, untill = nil, 0
    if h[3] and tonumber(h[4]) > now and alive(hp, h[3], hs) then
      head, untill = h[3], tonumber(h[4])
    else
      -- No reservation, or one that ran out unused (that waiter stopped waiting: drop it).
      if h[3] then
        redis.call('ZREM', q, h[3])
        redis.call('HDEL', lk, 'reserved', 'reservedUntil')
      end
      head = next_waiter(q, hp, hs)
      if head and head ~= sid then
        reserve(lk, head, now)
        untill = now + ${RESERVE_MS}
      end
    end
    if head and head ~= sid then
      wait_in(q, sid, now, own)
      return {'held', h[2] or '', math.max(untill - now, 1)}
    end
    redis.call('HINCRBY', lk, 'token', 1)
    if head then
      redis.call('ZREM', q, sid)
      redis.call('HDEL', lk, 'reserved', 'reservedUntil')
    end
  end
  hold(lk, set, name, sid, now, own)
  return {'granted', redis.call('HGET', lk, 'token')}
end
`

const script = (name: string, body: string): Script => {
  const lua = `${prelude}\n${body}`
  return { name, lua, sha: createHash("sha1").update(lua).digest("hex") }
}

const scripts = {
  // KEYS: home. ARGV: ttl.
  open: script(
    "open",
    `
if not redis.call('SET', KEYS[1], '0', 'PX', ARGV[1], 'NX') then return {'exists'} end
return {'ok', redis.call('PTTL', KEYS[1])}
`
  ),
  // KEYS: lease, leases set, lease queue. ARGV: sid, token, name, holder prefix, holder suffix.
  release: script(
    "release",
    `
local h = redis.call('HMGET', KEYS[1], 'session', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'session', 'expires')
redis.call('SREM', KEYS[2], ARGV[3])
hand_off(KEYS[1], KEYS[3], ARGV[3], ARGV[4], ARGV[5])
return 1
`
  ),
  // KEYS: group. ARGV: none.
  members: script("members", `return live_members(KEYS[1], now_ms())`),

  // ---- single node: one script per operation ----

  // KEYS: home, home:leases, home:groups. ARGV: sid, ttl, lease prefix, group prefix.
  keepAlive: script(
    "keepAlive",
    `
local sid, ttl = ARGV[1], tonumber(ARGV[2])
local cur = redis.call('PTTL', KEYS[1])
if cur == -2 then return {'expired'} end
local rem = cur
if cur < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
  rem = ttl
end
local now = now_ms()
extend(KEYS[2], rem)
extend(KEYS[3], rem)
local leases = held_leases(KEYS[2], sid, ARGV[3], now + rem)
local groups = {}
for _, g in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local view = group_view(ARGV[4] .. g .. '}', sid, now, rem)
  if view then groups[#groups + 1] = {g, view} else redis.call('SREM', KEYS[3], g) end
end
return {'live', rem, leases, groups}
`
  ),
  // KEYS: lease, home, home:leases, lease queue. ARGV: sid, name, holder prefix, holder suffix.
  acquire: script(
    "acquire",
    `
local own = redis.call('PTTL', KEYS[2])
if own == -2 then return {'expired'} end
return acquire(KEYS[1], KEYS[4], KEYS[3], ARGV[1], ARGV[2], own, ARGV[3], ARGV[4])
`
  ),
  // KEYS: home, home:leases, home:groups. ARGV: sid, lease prefix, group prefix, holder prefix, holder suffix.
  close: script(
    "close",
    `
release_all(KEYS[2], ARGV[1], ARGV[2], ARGV[4], ARGV[5])
for _, g in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local gk = ARGV[3] .. g .. '}'
  if redis.call('ZREM', gk, ARGV[1]) == 1 then redis.call('PUBLISH', gk, 'left') end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
`
  ),
  // KEYS: home, home:groups, group. ARGV: sid, group.
  join: script(
    "join",
    `
local own = redis.call('PTTL', KEYS[1])
if own == -2 then return 'expired' end
local added = redis.call('ZADD', KEYS[3], now_ms() + own, ARGV[1])
extend(KEYS[3], own)
redis.call('SADD', KEYS[2], ARGV[2])
extend(KEYS[2], own)
if added == 1 then redis.call('PUBLISH', KEYS[3], 'joined') end
return 'joined'
`
  ),
  // KEYS: home:groups, group. ARGV: sid, group.
  leave: script(
    "leave",
    `
redis.call('SREM', KEYS[1], ARGV[2])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then redis.call('PUBLISH', KEYS[2], 'left') end
return 1
`
  ),

  // ---- cluster (routeBySlot): home-slot and lease/group-slot halves ----

  // KEYS: home, home:slots. ARGV: tag. Registers the slot; returns the home's PTTL and the registration.
  homeAcquire: script(
    "homeAcquire",
    `
local own = redis.call('PTTL', KEYS[1])
if own == -2 then return {'expired'} end
local seq = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], seq)
extend(KEYS[2], own)
return {'ok', own, seq}
`
  ),
  // KEYS: lease, shadow, shadow:leases, lease queue. ARGV: sid, name, holder prefix, holder suffix, seq, own.
  slotAcquire: script(
    "slotAcquire",
    `
local seq = tonumber(ARGV[5])
local st = redis.call('HMGET', KEYS[2], 'gen', 'closed')
if st[2] and tonumber(st[2]) >= seq then return {'stale'} end
if not st[1] or tonumber(st[1]) < seq then redis.call('HSET', KEYS[2], 'gen', seq) end
extend(KEYS[2], tonumber(ARGV[6]))
return acquire(KEYS[1], KEYS[4], KEYS[3], ARGV[1], ARGV[2], redis.call('PTTL', KEYS[2]), ARGV[3], ARGV[4])
`
  ),
  // KEYS: home, home:slots, home:groups. ARGV: ttl.
  homeKeepAlive: script(
    "homeKeepAlive",
    `
local ttl = tonumber(ARGV[1])
local cur = redis.call('PTTL', KEYS[1])
if cur == -2 then return {'expired'} end
local rem = cur
if cur < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
  rem = ttl
end
extend(KEYS[2], rem)
extend(KEYS[3], rem)
return {'live', rem, redis.call('HGETALL', KEYS[2]), redis.call('SMEMBERS', KEYS[3])}
`
  ),
  // KEYS: shadow, shadow:leases, group... ARGV: sid, rem, lease prefix, seq ('' = no leases here), group...
  slotKeepAlive: script(
    "slotKeepAlive",
    `
local sid, rem = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local leases, prune = {}, ''
if ARGV[4] ~= '' then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    extend(KEYS[1], rem)
    extend(KEYS[2], rem)
    leases = held_leases(KEYS[2], sid, ARGV[3], now + rem)
    if #leases == 0 then
      prune = redis.call('HGET', KEYS[1], 'gen') or '0'
      redis.call('HSET', KEYS[1], 'closed', prune)
    end
  else
    -- Lost, or its first grant is still on the way: close it at the registration we know of.
    redis.call('HSET', KEYS[1], 'closed', ARGV[4])
    redis.call('PEXPIRE', KEYS[1], rem)
    prune = ARGV[4]
  end
end
local groups = {}
for i = 3, #KEYS do
  local view = group_view(KEYS[i], sid, now, rem)
  if view then groups[#groups + 1] = {ARGV[i + 2], view} end
end
return {leases, groups, prune}
`
  ),
  // KEYS: home:slots. ARGV: tag, registration, tag, registration, ...
  homePrune: script(
    "homePrune",
    `
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
`
  ),
  // KEYS: home, home:slots, home:groups. Deletes the session; returns what it held.
  homeClose: script(
    "homeClose",
    `
local left = redis.call('PTTL', KEYS[1])
local slots = redis.call('HKEYS', KEYS[2])
local groups = redis.call('SMEMBERS', KEYS[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return {left, slots, groups}
`
  ),
  // KEYS: shadow, shadow:leases, group... ARGV: sid, lease prefix, leases here ('1' or ''), home's PTTL,
  // shadow prefix of this slot.
  slotClose: script(
    "slotClose",
    `
local sid = ARGV[1]
if ARGV[3] ~= '' then
  release_all(KEYS[2], sid, ARGV[2], ARGV[5], '')
  redis.call('DEL', KEYS[2])
  -- Stays as a closed marker, so a grant still on the way cannot recreate it.
  redis.call('HSET', KEYS[1], 'closed', closed_marker)
  extend(KEYS[1], math.max(tonumber(ARGV[4]), 1))
end
for i = 3, #KEYS do
  if redis.call('ZREM', KEYS[i], sid) == 1 then redis.call('PUBLISH', KEYS[i], 'left') end
end
return 1
`
  ),
  // KEYS: home, home:groups. ARGV: group.
  homeJoin: script(
    "homeJoin",
    `
local own = redis.call('PTTL', KEYS[1])
if own == -2 then return {'expired'} end
redis.call('SADD', KEYS[2], ARGV[1])
extend(KEYS[2], own)
return {'ok', own}
`
  ),
  // KEYS: group. ARGV: sid, own.
  slotJoin: script(
    "slotJoin",
    `
local own = tonumber(ARGV[2])
local added = redis.call('ZADD', KEYS[1], now_ms() + own, ARGV[1])
extend(KEYS[1], own)
if added == 1 then redis.call('PUBLISH', KEYS[1], 'joined') end
return 'joined'
`
  ),
  // KEYS: group. ARGV: sid.
  slotLeave: script(
    "slotLeave",
    `
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then redis.call('PUBLISH', KEYS[1], 'left') end
return 1
`
  ),
  // KEYS: home:groups. ARGV: group.
  homeLeave: script("homeLeave", `return redis.call('SREM', KEYS[1], ARGV[1])`)
} as const

// -------------------------------------------------------------------------------------------------
// Replies
// -------------------------------------------------------------------------------------------------

const Expired = Schema.Tuple(Schema.Literal("expired"))
const Millis = Schema.Int
const Token = Schema.BigInt
const LeaseList = Schema.Array(Schema.Tuple(Schema.String, Token))
const GroupList = Schema.Array(Schema.Tuple(Schema.String, Schema.Array(Schema.String)))

const OpenResult = Schema.Union(Schema.Tuple(Schema.Literal("ok"), Millis), Schema.Tuple(Schema.Literal("exists")))
const AcquireResult = Schema.Union(
  Schema.Tuple(Schema.Literal("granted"), Token),
  Schema.Tuple(Schema.Literal("held"), Schema.Union(Schema.Literal(""), Token), Millis),
  Schema.Tuple(Schema.Literal("stale")),
  Expired
)
const KeepAliveResult = Schema.Union(Schema.Tuple(Schema.Literal("live"), Millis, LeaseList, GroupList), Expired)
const HomeAcquireResult = Schema.Union(Schema.Tuple(Schema.Literal("ok"), Millis, Schema.Int), Expired)
const HomeKeepAliveResult = Schema.Union(
  Schema.Tuple(Schema.Literal("live"), Millis, Schema.Array(Schema.String), Schema.Array(Schema.String)),
  Expired
)
const SlotKeepAliveResult = Schema.Tuple(LeaseList, GroupList, Schema.String)
const SlotKeepAliveResults = Schema.Array(SlotKeepAliveResult)
const HomeCloseResult = Schema.Tuple(Millis, Schema.Array(Schema.String), Schema.Array(Schema.String))
const HomeJoinResult = Schema.Union(Schema.Tuple(Schema.Literal("ok"), Millis), Expired)
const JoinResult = Schema.Literal("joined", "expired")
const Members = Schema.Array(Schema.String)
const Count = Schema.Int
const Counts = Schema.Array(Count)

// -------------------------------------------------------------------------------------------------
// Connections
// -------------------------------------------------------------------------------------------------

type Client = Redis | Cluster

const backendError = (operation: string, cause: unknown) => new BackendError({ backend: "redis", operation, cause })

const millisOption = (
  operation: string,
  name: string,
  input: Duration.DurationInput | undefined,
  fallback: number
): Effect.Effect<number, BackendError> => {
  if (input === undefined) return Effect.succeed(fallback)
  const ms = Duration.toMillis(Duration.decode(input))
  return Number.isFinite(ms) && ms >= 1
    ? Effect.succeed(Math.ceil(ms))
    : Effect.fail(backendError(operation, `${name} must be a finite duration of at least 1 ms`))
}

interface Resolved {
  readonly prefix: string
  readonly routeBySlot: boolean
  readonly connectTimeout: number
  readonly redisOptions: IORedisOptions
  readonly cluster: ReadonlyArray<RedisClusterNode> | undefined
  readonly connectionName: string
  readonly clusterOptions: ClusterOptions | undefined
}

const resolveOptions = (options: RedisOptions): Effect.Effect<Resolved, BackendError> =>
  Effect.gen(function*() {
    const fail = (rule: string) => Effect.fail(backendError("configure", rule))
    const prefix = options.keyPrefix ?? defaultPrefix
    if (!prefixPattern.test(prefix)) return yield* fail("keyPrefix may contain only the characters [A-Za-z0-9._:-]")
    let fromUrl: {
      host?: string
      port?: number
      username?: string
      password?: string
      db?: number
      tls?: boolean
    } = {}
    if (options.url !== undefined) {
      const text = typeof options.url === "string" ? options.url : Redacted.value(options.url)
      let url: URL
      try {
        url = new URL(text)
      } catch {
        return yield* fail("url is not a valid URL") // the URL may hold a password: never echo it
      }
      if (url.protocol !== "redis:" && url.protocol !== "rediss:") {
        return yield* fail(`url must start with redis:// or rediss:// (got ${url.protocol}//)`)
      }
      const dbText = url.pathname.replace(/^\//, "")
      if (dbText !== "" && !/^\d+$/.test(dbText)) return yield* fail("url path must be a database number")
      fromUrl = {
        ...(url.hostname !== "" ? { host: url.hostname.replace(/^\[(.*)\]$/, "$1") } : {}),
        ...(url.port !== "" ? { port: Number(url.port) } : {}),
        ...(url.username !== "" ? { username: decodeURIComponent(url.username) } : {}),
        ...(url.password !== "" ? { password: decodeURIComponent(url.password) } : {}),
        ...(dbText !== "" ? { db: Number(dbText) } : {}),
        ...(url.protocol === "rediss:" ? { tls: true } : {})
      }
    }
    const port = options.port ?? fromUrl.port ?? 6379
    if (!Number.isInteger(port) || port < 1 || port > 65535) return yield* fail("port must be an integer in 1..65535")
    const db = options.db ?? fromUrl.db ?? 0
    if (!Number.isInteger(db) || db < 0) return yield* fail("db must be a non-negative integer")
    const tlsOption = options.tls ?? fromUrl.tls ?? false
    const tls = tlsOption === true ? {} : tlsOption === false ? undefined : tlsOption
    const password = options.password !== undefined ? Redacted.value(options.password) : fromUrl.password
    const username = options.username ?? fromUrl.username
    const connectTimeout = yield* millisOption("configure", "connectTimeout", options.connectTimeout, 10_000)
    const commandTimeout = yield* millisOption("configure", "commandTimeout", options.commandTimeout, 5_000)
    const connectionName = options.connectionName ?? "simba"
    const cluster = options.cluster?.nodes
    if (cluster !== undefined) {
      if (cluster.length === 0) return yield* fail("cluster.nodes must not be empty")
      if (db !== 0) return yield* fail("db must be 0 with a cluster")
    }
    const routeBySlot = options.routeBySlot ?? cluster !== undefined
    const redisOptions: IORedisOptions = {
      ...options.redisOptions,
      host: options.host ?? fromUrl.host ?? "127.0.0.1",
      port,
      db,
      ...(username !== undefined ? { username } : {}),
      ...(password !== undefined ? { password } : {}),
      ...(tls !== undefined ? { tls } : {}),
      connectionName,
      connectTimeout,
      commandTimeout,
      lazyConnect: true,
      // Fail fast while disconnected and never replay a command later: the engine retries.
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      // A primary that became a replica (failover) answers READONLY: reconnect, do not resend.
      reconnectOnError: (error) => error.message.startsWith("READONLY") ? 1 : false
    }
    return { prefix, routeBySlot, connectTimeout, redisOptions, cluster, connectionName, clusterOptions: options.clusterOptions }
  })

const newClient = (resolved: Resolved): Client => {
  if (resolved.cluster === undefined) return new Redis(resolved.redisOptions)
  const { db: _db, host: _host, port: _port, ...nodeOptions } = resolved.redisOptions
  const clusterOptions: ClusterOptions = {
    ...resolved.clusterOptions,
    lazyConnect: true,
    enableOfflineQueue: false,
    redisOptions: nodeOptions
  }
  return new Cluster(resolved.cluster.map((node) => ({ host: node.host, port: node.port })), clusterOptions)
}

/** The subscriber: the same options as `client`, its own connection(s), another name. */
const duplicate = (client: Client, connectionName: string): Client =>
  client instanceof Cluster
    ? client.duplicate(undefined, { redisOptions: { ...client.options.redisOptions, connectionName } })
    : client.duplicate({ connectionName })

/**
 * ioredis attaches the failed command to a reply error (`error.command.args`): for `AUTH` and `HELLO`
 * those are credentials, so such an error is replaced by one carrying only its message.
 */
const scrub = (cause: unknown): unknown => {
  if (!(cause instanceof Error) || !("command" in cause)) return cause
  const command: unknown = cause.command
  const name = typeof command === "object" && command !== null && "name" in command ? String(command.name) : ""
  if (!/^(auth|hello)$/i.test(name)) return cause
  const clean = new Error(cause.message)
  clean.name = cause.name
  return clean
}

/** Creates a connection in the scope (closed by a finalizer) and waits until it is ready. */
const connect = (
  resolved: Resolved,
  create: () => Client,
  onError: (error: Error) => void
): Effect.Effect<Client, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    // ioredis rejects `connect()` with "Connection is closed." and reports the reason (refused,
    // WRONGPASS, ...) as an `error` event: keep the last one for the BackendError.
    let lastError: Error | undefined
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = create()
        // Without a listener ioredis prints every error; failures reach callers as BackendError.
        client.on("error", (error: Error) => {
          lastError = error
          onError(error)
        })
        return client
      }),
      (client) =>
        Effect.tryPromise(() => client.quit()).pipe(
          Effect.timeout("1 second"),
          Effect.catchAllCause((cause) => Effect.logDebug("simba redis: QUIT failed, disconnecting", cause)),
          Effect.ensuring(Effect.sync(() => client.disconnect()))
        )
    )
    yield* Effect.tryPromise({
      try: () => client.connect(),
      catch: (cause) => backendError("connect", scrub(lastError ?? cause))
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(resolved.connectTimeout),
        onTimeout: () =>
          backendError(
            "connect",
            lastError === undefined
              ? `not connected within ${resolved.connectTimeout} ms`
              : `not connected within ${resolved.connectTimeout} ms: ${lastError.message}`
          )
      })
    )
    return client
  })

// -------------------------------------------------------------------------------------------------
// The backend
// -------------------------------------------------------------------------------------------------

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

/**
 * A `LeaseBackendService` on Redis, with its command and subscriber connections in the scope. Fails
 * with `BackendError` when an option is invalid or Redis cannot be reached.
 */
export const make = (options: RedisOptions): Effect.Effect<LeaseBackendService, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const resolved = yield* resolveOptions(options)
    const k = keys(resolved.prefix)
    // Build the slot tag table now rather than during the first acquire.
    if (resolved.routeBySlot) slotTag(0)
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const logError = (connection: string) => (error: Error) =>
      runFork(Effect.logDebug(`simba redis: ${connection} connection error: ${error.message}`))

    const client = yield* connect(
      resolved,
      () => newClient(resolved),
      logError("command")
    )

    // Hints: a dedicated subscriber connection, resubscribed by ioredis after a reconnect.
    const hintsPubSub = yield* Effect.acquireRelease(PubSub.sliding<Hint>(4096), PubSub.shutdown)
    // Synchronous, so hints keep the order of the messages, and without a fiber per message; never
    // throws, even once the PubSub is shut down (4,096 unread hints: later ones are dropped, and the
    // engine's retries cover them).
    const publishHint = (hint: Hint) => {
      hintsPubSub.unsafeOffer(hint)
    }
    const leaseChannel = k.lease("")
    const leaseHead = leaseChannel.slice(0, -1)
    const groupHead = k.group("").slice(0, -1)
    const onMessage = (_pattern: string, channel: string, message: string) => {
      if (!channel.endsWith("}")) return
      if (channel.startsWith(leaseHead)) {
        const name = channel.slice(leaseHead.length, -1)
        // `granted:<sid>:<token>`: handed to that session (FIFO hand-off, one node); `released:<sid>`:
        // reserved for that session (FIFO hand-off, cluster); plain `released`: anyone may try.
        if (message === "released") publishHint(Hint.Released({ name }))
        else if (message.startsWith("released:")) publishHint(Hint.Released({ name, to: message.slice(9) }))
        else if (message.startsWith("granted:")) {
          const [to, token] = message.slice(8).split(":")
          if (to !== undefined && token !== undefined && /^[1-9][0-9]*$/.test(token)) {
            publishHint(Hint.Granted({ name, to, token: BigInt(token) }))
          }
        }
      } else if (channel.startsWith(groupHead)) {
        publishHint(Hint.GroupChanged({ group: channel.slice(groupHead.length, -1) }))
      }
    }
    const subscriber = yield* connect(
      resolved,
      () => duplicate(client, `${resolved.connectionName}:hints`),
      logError("subscriber")
    )
    subscriber.on("pmessage", onMessage)
    yield* Effect.tryPromise({
      try: () => subscriber.psubscribe(k.leasePattern, k.groupPattern),
      catch: (cause) => backendError("subscribe", cause)
    })

    /** One script call by SHA; after NOSCRIPT (script cache flushed, failover) `EVAL` loads it again. */
    interface Call {
      readonly script: Script
      readonly keys: ReadonlyArray<string>
      readonly args: ReadonlyArray<string | number>
    }
    const send = ({ args, keys: keyList, script: s }: Call): Promise<unknown> =>
      client.evalsha(s.sha, keyList.length, ...keyList, ...args).catch((error: unknown) =>
        isNoScript(error) ? client.eval(s.lua, keyList.length, ...keyList, ...args) : Promise.reject(error)
      )
    // Synchronous decoding, one parser per reply schema: the schemas have no effects, and the
    // Effect-based parser costs more than the round trip on a busy client.
    const parsers = new Map<unknown, (raw: unknown) => Either.Either<unknown, ParseResult.ParseError>>()
    const parserOf = <A, I>(schema: Schema.Schema<A, I>) => {
      let parse = parsers.get(schema)
      if (parse === undefined) {
        parse = Schema.decodeUnknownEither(schema)
        parsers.set(schema, parse)
      }
      return parse as (raw: unknown) => Either.Either<A, ParseResult.ParseError>
    }
    const decode = <A, I>(operation: string, schema: Schema.Schema<A, I>) => {
      const parse = parserOf(schema)
      return (raw: unknown): Effect.Effect<A, BackendError> =>
        Either.match(parse(raw), {
          onLeft: (error) => Effect.fail(backendError(operation, error)),
          onRight: Effect.succeed
        })
    }

    /** Runs one script and decodes its reply. */
    const run = <A, I>(
      operation: string,
      s: Script,
      keyList: ReadonlyArray<string>,
      args: ReadonlyArray<string | number>,
      schema: Schema.Schema<A, I>
    ): Effect.Effect<A, BackendError> =>
      Effect.tryPromise({
        try: () => send({ script: s, keys: keyList, args }),
        catch: (cause) => backendError(operation, scrub(cause))
      }).pipe(Effect.flatMap(decode(operation, schema)))

    /**
     * Runs several scripts at once (one per slot: ioredis sends them to their nodes without waiting)
     * as one effect, and decodes the replies; fails if any fails.
     */
    const runAll = <A, I>(
      operation: string,
      calls: ReadonlyArray<Call>,
      schema: Schema.Schema<ReadonlyArray<A>, ReadonlyArray<I>>
    ): Effect.Effect<ReadonlyArray<A>, BackendError> =>
      calls.length === 0
        ? Effect.succeed([])
        : Effect.tryPromise({
          try: () => Promise.all(calls.map(send)),
          catch: (cause) => backendError(operation, scrub(cause))
        }).pipe(Effect.flatMap(decode(operation, schema)))

    const ttlMillis = (operation: string, ttl: Duration.Duration): Effect.Effect<number, BackendError> => {
      const ms = Duration.toMillis(ttl)
      return Number.isFinite(ms) && ms >= 1
        ? Effect.succeed(Math.ceil(ms))
        : Effect.fail(backendError(operation, `ttl must be a finite duration of at least 1 ms (got ${Duration.format(ttl)})`))
    }
    const checkName = (operation: string, name: string): Effect.Effect<void, BackendError> => {
      const rule = brokenRule(name)
      return rule === undefined ? Effect.void : Effect.fail(backendError(operation, `invalid name ${JSON.stringify(name)}: ${rule}`))
    }
    // Ids this backend never issues name no session: answered without a round trip.
    const known = (sessionId: string) => sessionIdPattern.test(sessionId)
    const holderPrefix = k.session("").slice(0, -1)
    const leasePrefix = leaseHead
    const groupPrefix = groupHead

    const openSession = (ttl: Duration.Duration): Effect.Effect<OpenedSession, BackendError> =>
      Effect.gen(function*() {
        const ms = yield* ttlMillis("openSession", ttl)
        // 128 random bits: a collision is not expected, but SET NX makes one an error, never a reuse.
        const sessionId = randomBytes(16).toString("hex")
        const reply = yield* run("openSession", scripts.open, [k.session(sessionId)], [ms], OpenResult)
        if (reply[0] === "exists") return yield* Effect.fail(backendError("openSession", "session id collision"))
        return { sessionId, remaining: Duration.millis(reply[1]) }
      })

    const acquireReply = (reply: Schema.Schema.Type<typeof AcquireResult>): AcquireReply | undefined => {
      switch (reply[0]) {
        case "granted":
          return AcquireReply.Granted({ token: reply[1] })
        case "held":
          return AcquireReply.HeldBy({
            token: reply[1] === "" ? undefined : reply[1],
            remaining: reply[2] >= 0 ? Duration.millis(reply[2]) : undefined
          })
        case "expired":
          return AcquireReply.Expired()
        case "stale":
          return undefined
      }
    }

    const groupViews = (groups: Schema.Schema.Type<typeof GroupList>): Array<GroupView> =>
      groups.map(([group, members]) => ({ group, members: [...members].sort() }))
    const heldLeases = (leases: Schema.Schema.Type<typeof LeaseList>): Array<HeldLease> =>
      leases.map(([name, token]) => ({ name, token }))

    // ---- single node ----

    const single: Omit<LeaseBackendService, "backend" | "hints" | "openSession" | "members"> = {
      keepAlive: (sessionId, ttl) =>
        Effect.gen(function*() {
          const ms = yield* ttlMillis("keepAlive", ttl)
          if (!known(sessionId)) return KeepAliveReply.Expired()
          const reply = yield* run(
            "keepAlive",
            scripts.keepAlive,
            [k.session(sessionId), k.sessionLeases(sessionId), k.sessionGroups(sessionId)],
            [sessionId, ms, leasePrefix, groupPrefix],
            KeepAliveResult
          )
          if (reply[0] === "expired") return KeepAliveReply.Expired()
          return KeepAliveReply.Live({
            remaining: Duration.millis(reply[1]),
            leases: heldLeases(reply[2]),
            groups: groupViews(reply[3])
          })
        }),
      closeSession: (sessionId) =>
        known(sessionId)
          ? run(
            "closeSession",
            scripts.close,
            [k.session(sessionId), k.sessionLeases(sessionId), k.sessionGroups(sessionId)],
            [sessionId, leasePrefix, groupPrefix, holderPrefix, "}"],
            Count
          ).pipe(Effect.asVoid)
          : Effect.void,
      acquire: (sessionId, name) =>
        Effect.gen(function*() {
          yield* checkName("acquire", name)
          if (!known(sessionId)) return AcquireReply.Expired()
          const reply = yield* run(
            "acquire",
            scripts.acquire,
            [k.lease(name), k.session(sessionId), k.sessionLeases(sessionId), k.leaseQueue(name)],
            [sessionId, name, holderPrefix, "}"],
            AcquireResult
          )
          const mapped = acquireReply(reply)
          if (mapped === undefined) return yield* Effect.fail(backendError("acquire", "unexpected stale reply"))
          return mapped
        }),
      release: (sessionId, name, token) =>
        Effect.gen(function*() {
          yield* checkName("release", name)
          if (!known(sessionId) || token <= 0n) return
          yield* run(
            "release",
            scripts.release,
            [k.lease(name), k.sessionLeases(sessionId), k.leaseQueue(name)],
            [sessionId, token.toString(), name, holderPrefix, "}"],
            Count
          )
        }),
      join: (sessionId, group) =>
        Effect.gen(function*() {
          yield* checkName("join", group)
          if (!known(sessionId)) return "Expired" as const
          const reply = yield* run(
            "join",
            scripts.join,
            [k.session(sessionId), k.sessionGroups(sessionId), k.group(group)],
            [sessionId, group],
            JoinResult
          )
          return reply === "joined" ? "Joined" as const : "Expired" as const
        }),
      leave: (sessionId, group) =>
        Effect.gen(function*() {
          yield* checkName("leave", group)
          if (!known(sessionId)) return
          yield* run("leave", scripts.leave, [k.sessionGroups(sessionId), k.group(group)], [sessionId, group], Count)
        })
    }

    // ---- cluster: every call inside one slot ----

    const leaseTag = (name: string) => slotTag(keySlot(k.lease(name)))

    /** Groups per slot the work of a renewal or a close: the leases' slots (with their registration) and the groups. */
    interface SlotWork {
      readonly tag: string
      seq: string
      readonly groups: Array<string>
    }
    const slotWork = (slotsFlat: ReadonlyArray<string>, groups: ReadonlyArray<string>) => {
      const bySlot = new Map<number, SlotWork>()
      const entry = (tag: string) => {
        const slot = keySlot(tag)
        let work = bySlot.get(slot)
        if (work === undefined) {
          work = { tag: slotTag(slot), seq: "", groups: [] }
          bySlot.set(slot, work)
        }
        return work
      }
      for (let i = 0; i + 1 < slotsFlat.length; i += 2) entry(slotsFlat[i]!).seq = slotsFlat[i + 1]!
      for (const group of groups) entry(slotTag(keySlot(k.group(group)))).groups.push(group)
      return [...bySlot.values()]
    }

    const cluster: typeof single = {
      keepAlive: (sessionId, ttl) =>
        Effect.gen(function*() {
          const ms = yield* ttlMillis("keepAlive", ttl)
          if (!known(sessionId)) return KeepAliveReply.Expired()
          const home = yield* run(
            "keepAlive",
            scripts.homeKeepAlive,
            [k.session(sessionId), k.sessionSlots(sessionId), k.sessionGroups(sessionId)],
            [ms],
            HomeKeepAliveResult
          )
          if (home[0] === "expired") return KeepAliveReply.Expired()
          const remaining = home[1]
          const work = slotWork(home[2], home[3])
          const replies = yield* runAll(
            "keepAlive",
            work.map((w) => ({
              script: scripts.slotKeepAlive,
              keys: [k.shadow(w.tag, sessionId), k.shadowLeases(w.tag, sessionId), ...w.groups.map(k.group)],
              args: [sessionId, remaining, leasePrefix, w.seq, ...w.groups]
            })),
            SlotKeepAliveResults
          )
          const prune = replies.flatMap((reply, i) => reply[2] === "" ? [] : [work[i]!.tag, reply[2]])
          if (prune.length > 0) {
            yield* run("keepAlive", scripts.homePrune, [k.sessionSlots(sessionId)], prune, Count)
          }
          return KeepAliveReply.Live({
            remaining: Duration.millis(remaining),
            leases: replies.flatMap((reply) => heldLeases(reply[0])),
            groups: replies.flatMap((reply) => groupViews(reply[1]))
          })
        }),
      closeSession: (sessionId) =>
        Effect.gen(function*() {
          if (!known(sessionId)) return
          const [left, tags, groups] = yield* run(
            "closeSession",
            scripts.homeClose,
            [k.session(sessionId), k.sessionSlots(sessionId), k.sessionGroups(sessionId)],
            [],
            HomeCloseResult
          )
          const work = slotWork(tags.flatMap((tag) => [tag, "1"]), groups)
          yield* runAll(
            "closeSession",
            work.map((w) => ({
              script: scripts.slotClose,
              keys: [k.shadow(w.tag, sessionId), k.shadowLeases(w.tag, sessionId), ...w.groups.map(k.group)],
              args: [sessionId, leasePrefix, w.seq === "" ? "" : "1", Math.max(left, 1), k.shadow(w.tag, "")]
            })),
            Counts
          )
        }),
      acquire: (sessionId, name) =>
        Effect.gen(function*() {
          yield* checkName("acquire", name)
          if (!known(sessionId)) return AcquireReply.Expired()
          const tag = leaseTag(name)
          // A registration overtaken by a renewal that closed the slot answers `stale`: register again.
          for (let attempt = 0; attempt < 3; attempt++) {
            const home = yield* run(
              "acquire",
              scripts.homeAcquire,
              [k.session(sessionId), k.sessionSlots(sessionId)],
              [tag],
              HomeAcquireResult
            )
            if (home[0] === "expired") return AcquireReply.Expired()
            const reply = yield* run(
              "acquire",
              scripts.slotAcquire,
              [k.lease(name), k.shadow(tag, sessionId), k.shadowLeases(tag, sessionId), k.leaseQueue(name)],
              [sessionId, name, k.shadow(tag, ""), "", home[2], home[1]],
              AcquireResult
            )
            const mapped = acquireReply(reply)
            if (mapped !== undefined) return mapped
          }
          return yield* Effect.fail(backendError("acquire", "slot registration went stale three times in a row"))
        }),
      release: (sessionId, name, token) =>
        Effect.gen(function*() {
          yield* checkName("release", name)
          if (!known(sessionId) || token <= 0n) return
          const tag = leaseTag(name)
          yield* run(
            "release",
            scripts.release,
            [k.lease(name), k.shadowLeases(tag, sessionId), k.leaseQueue(name)],
            [sessionId, token.toString(), name, k.shadow(tag, ""), ""],
            Count
          )
        }),
      join: (sessionId, group) =>
        Effect.gen(function*() {
          yield* checkName("join", group)
          if (!known(sessionId)) return "Expired" as const
          const home = yield* run(
            "join",
            scripts.homeJoin,
            [k.session(sessionId), k.sessionGroups(sessionId)],
            [group],
            HomeJoinResult
          )
          if (home[0] === "expired") return "Expired" as const
          yield* run("join", scripts.slotJoin, [k.group(group)], [sessionId, home[1]], JoinResult)
          return "Joined" as const
        }),
      leave: (sessionId, group) =>
        Effect.gen(function*() {
          yield* checkName("leave", group)
          if (!known(sessionId)) return
          yield* run("leave", scripts.slotLeave, [k.group(group)], [sessionId], Count)
          yield* run("leave", scripts.homeLeave, [k.sessionGroups(sessionId)], [group], Count)
        })
    }

    const members = (group: string): Effect.Effect<ReadonlyArray<string>, BackendError> =>
      checkName("members", group).pipe(
        Effect.zipRight(run("members", scripts.members, [k.group(group)], [], Members)),
        Effect.map((ids) => [...ids].sort())
      )

    const service: LeaseBackendService = {
      backend: "redis",
      openSession,
      members,
      hints: Stream.fromPubSub(hintsPubSub),
      ...(resolved.routeBySlot ? cluster : single)
    }
    return service
  })

/** The Redis backend as a layer; both connections are closed when the layer's scope closes. */
export const layer = (options: RedisOptions): Layer.Layer<LeaseBackend, BackendError> =>
  Layer.scoped(LeaseBackend, make(options))

/** The Redis backend with its options read from `Config` (for example `config`, from the environment). */
export const layerConfig = (
  options: Config.Config.Wrap<RedisOptions>
): Layer.Layer<LeaseBackend, BackendError | ConfigError.ConfigError> =>
  Layer.scoped(LeaseBackend, Effect.flatMap(Config.unwrap(options), make))

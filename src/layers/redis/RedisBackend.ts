/**
 * The Redis backend (ioredis 5): single node, or Redis Cluster through ioredis `Cluster`. This module
 * is the entry (`make`, `layer`, `layerConfig`, `config`, `SimbaRedisLive`); the folder holds one
 * module per concern:
 *
 * - `options.ts`: `RedisOptions`, URL parsing, `config` (environment), validation, the `Mode`;
 * - `keys.ts`: the key and channel names of a prefix, session ids;
 * - `slots.ts`: hash slots (`keySlot`) and the per-slot tags of session shadows (`slotTag`);
 * - `scripts.ts`: the Lua scripts, each with one typed caller (named keys and arguments);
 * - `replies.ts`: the scripts' replies as `Schema`s, and their translation into the SPI's answers;
 * - `connection.ts`: ioredis (loaded lazily), the connections, calls in flight, the script runner,
 *   the subscriber, a client you bring (`makeWithClient`);
 * - `eviction.ts`: the `maxmemory-policy` check at start;
 * - `hints.ts`: pub/sub messages decoded into `Hint`s;
 * - `operations.ts`: the store operations, each written once for both modes; `LeaseBackend.make`
 *   adds the rules every backend shares (ttl and name checks, unknown sessions, errors, spans).
 *
 * ioredis is an optional peer dependency, loaded when `make` runs (never by `import "simba"`).
 *
 * Every state change is one Lua script, run by SHA (`EVALSHA`, then `EVAL` after a `NOSCRIPT`, which
 * loads it again), and every decision about time is taken by the server: expiry through `PX`/`PTTL`
 * and `redis.call('TIME')`; the client's clock is never read. Replies are decoded with `Schema`; any
 * failure (connection lost, command timeout, `LOADING`, `READONLY`, `CLUSTERDOWN`, a reply that does
 * not decode) is a `BackendError { backend: "redis", operation, cause }`, never a crash. An invalid
 * option is a `SimbaConfigError { field: "redis.<option>", rule }`, before any connection.
 *
 * ## Modes
 *
 * The scripts find a session in one of two ways, chosen once per backend (`Mode`):
 * - `node` (a single server, the default without `cluster`): a session is alive while its session key
 *   exists, and one script touches the session's keys and a lease's or group's together;
 * - `cluster` (`routeBySlot`, the default and a requirement with `cluster`): every script call stays
 *   inside one hash slot, through per-slot shadows of the session (see "Redis Cluster" below).
 * Each operation is written once; where the modes differ its body says so (`mode === "node"`), and
 * the scripts that differ take the mode as an argument.
 *
 * ## Key layout (prefix `simba` by default; the braces are literal, they are Redis hash tags)
 *
 * - `simba:lease:{name}`: hash `{ session, token, expires }`. A grant sets `token = max(token + 1,
 *   the server's TIME in microseconds)` and `session`, and makes the hash persistent; a release (or a
 *   takeover) deletes `session` and `expires`, keeps `token`, and lets the hash expire after
 *   `idleExpiry` (default 1 hour) unless the lease is granted again (see "Tokens" below). `expires` (server epoch ms) is the holder session's expiry as of the grant or
 *   the last renewal that listed the lease (an unchanged renewal reads no lease hash): information
 *   for operators, decisions look at the session key. While the lease
 *   is free and reserved for a waiter (below) it also carries `reserved` (that session's id) and
 *   `reservedUntil` (server epoch ms); while its queue may hold waiters, `queued` (so a lease nobody
 *   waits for is acquired and released without reading its queue).
 * - `simba:lease:{name}:holder`: the holder record, `sid:token`, written by every grant and deleted
 *   by every free (same hash slot as the lease). A lease hash deleted by hand while held is not a
 *   free lease: an acquire that finds no hash (no token) reads the record with the boot marker (one
 *   `MGET`) and, when it names a live session, writes the hash back for it and answers `HeldBy` (the
 *   client logs at Error); a renewal that lists the holder's leases restores it too. A record whose
 *   session is gone leaves the lease free, its token the floor of the next one.
 * - `simba:lease:{name}:queue`: the lease's waiter queue, a sorted set of session ids scored by the
 *   server time they were first refused (same hash slot as the lease); its `PX` is extended to the
 *   ttl of each waiter that asks, so it vanishes once nobody has asked for a session's lifetime.
 * - `simba:session:{sid}`: the session ("home") key, a counter with `PX` (`INCR` keeps it); `sid` is
 *   32 lowercase hex from `node:crypto` `randomBytes` (128 bits). It is never revived: once gone,
 *   `keepAlive`, `acquire` and `join` answer `Expired`. Its value is the version of the session's
 *   lease set in mode `node` (see "Renewal versions"), the slot registration counter in mode `cluster`.
 * - `simba:session:{sid}:leases` / `:groups`: sets of the names it holds and the groups it joined,
 *   expiring with it.
 * - `simba:group:{g}`: sorted set of member session ids scored by their expiry (server epoch ms);
 *   expired members are dropped (`ZREMRANGEBYSCORE`) before any read.
 * - Pub/sub: a release (and a session close, for each lease) publishes `released` on the channel
 *   named exactly like the lease key, `simba:lease:{name}`, or, handing it off, tells the waiter: in
 *   mode `node` on the channel named like the waiter's session key, `simba:session:{sid}`
 *   (`granted:<token>:<name>` / `released:<name>`), so that only its client wakes; in mode `cluster`
 *   on the lease's channel (`released:<sid>`). A group change publishes `joined`, `left` or `expired`
 *   on the channel named like the group key, `simba:group:{g}`. The subscriber connection listens to
 *   the groups with `PSUBSCRIBE simba:group:*`, to each of this backend's sessions' channels while
 *   the session lives (mode `node`), and to a lease's channel (`SUBSCRIBE`) only while one of this
 *   backend's sessions waits for the lease, and a linger after (`watches.ts`): an uncontended
 *   release publishes to a channel nobody hears, and a client is not woken by every release of every
 *   other client of the store (an idle client on the prefix spent ~50 µs of CPU per lock another
 *   process took, when it listened to every lease channel by pattern).
 *
 * A lease is free when its hash names no session, or when the session it names is gone (takeover).
 *
 * ## Renewal versions
 *
 * A `Live` reply carries a `version` of the session's lease set, and omits the list when the client
 * already knows that version (`keepAlive(sid, ttl, known)`).
 * - Mode `node`: the version is the session key's value, which every script that changes the set
 *   bumps (`INCR`, in the same script): a grant by acquire, a hand-off grant to a waiter, a release,
 *   and a renewal that finds a listed lease no longer naming the session (it prunes it). A renewal
 *   naming the current version reads no lease: a fixed handful of commands whatever the number of
 *   leases (8 for a session in no group, the `EVALSHA` included; a few more per group). A bump
 *   never touches a gone session's key (`INCR` would create it). The renewal trusts the version: a
 *   lease hash lost by the server without the session key (a partial failover) shows up only at the
 *   next change of the set, or when the client renews without `known`.
 * - Mode `cluster`: the set changes in the leases' slots, where the home's counter cannot be bumped,
 *   so each shadow carries the version of the session's set in its slot (`ver`, bumped by the same
 *   changes; a shadow made anew starts at the server's TIME in microseconds, so it never repeats a
 *   version a client saw), and the session's version is the list of `slot=version` of the slots
 *   holding its leases. A renewal hands each slot the version the client knows there; a slot whose
 *   set is still that one reads no lease (its calls are made anyway, one per slot, see below). When
 *   every slot is unchanged nothing is listed; otherwise the unchanged slots are asked once more
 *   for their lists, as the SPI answers the whole set.
 *
 * ## Waiter queue (fair FIFO hand-off)
 *
 * Without it every release would wake every waiting client at once (the `released` hint), each would
 * send an acquire, one would win at random and the others would have wasted a call each. Instead:
 *
 * - an acquire refused because of a live holder (or another session's reservation) adds the
 *   requester to the queue (`ZADD NX`: a waiter keeps its place when it asks again);
 * - when a release or closeSession frees the lease, in mode `node` the script **grants** it
 *   to the first waiter whose session is still alive (dead ones leave the queue): the next token,
 *   the lease in that session's set, exactly as its own acquire would, and publishes
 *   `granted:<token>:<name>` on that session's channel, which the subscriber turns into
 *   `Hint.Granted({ name, to, token })`.
 *   The waiter's client adopts it without another round trip (the hand-off costs one release plus
 *   one pub/sub message); if the message is lost, its next renewal lists the lease and it adopts it
 *   then; a client that no longer wants it releases it, and it goes to the next waiter. The engine
 *   adopts a lease it did not ask for only when its token is above every token of the name it has
 *   seen (see `Engine`), so a late or repeated message can never revive an old grant;
 * - in mode `cluster`, and when an acquire finds the holder's session gone (takeover), the first live
 *   waiter (in mode `cluster`: its shadow in the lease's slot, not closed) gets a reservation of
 *   `reservationMillis` (250 ms) instead, published as `released:<sid>` on the lease's channel (mode
 *   `cluster`) or `released:<name>` on the session's (mode `node`), which the subscriber turns into
 *   `Hint.Released({ name, to: sid })` (clients other than `sid` ignore it): a grant there
 *   would need the waiter's registration in that slot to be current, which only its own acquire
 *   establishes; a plain `released` (nobody waits; and the message of older versions) is a hint
 *   without `to`;
 * - while the reservation runs, only that session is granted the lease; the others are told
 *   `HeldBy` with `remaining` = what is left of the reservation, and queued. The grant removes the
 *   requester from the queue and clears the reservation;
 * - a waiter that stops waiting calls `withdraw` (the `withdraw` script: `ZREM`, and a reservation it
 *   had passes to the next live waiter); dead waiters (session gone) are dropped by the walks for the
 *   first live waiter, at most `queueScanBatch` (32) entries per script call, resuming at the next call;
 *   when a whole batch is dead the lease goes to whoever asks, so no call ever walks the whole queue;
 * - a reservation that runs out unused (the waiter gave up, or lost the message) drops that waiter
 *   from the queue; the next acquire (any waiter retries right after `remaining`) reserves the lease
 *   for the next live waiter and publishes again, or takes it itself when it is the head.
 *
 * R = 250 ms: long enough for the message to reach the head's subscriber and its acquire to come back
 * (a few round trips plus an event-loop stall of a loaded client), short enough that a waiter that
 * stopped waiting delays the others once, briefly. Safety is unchanged: reservations only decide
 * *who* among the candidates may take a free lease; tokens, server-time decisions and "never revive"
 * are exactly as before, and a grant by hand-off is the grant the waiter's own acquire would get. An
 * uncontended acquire (free lease, empty queue) stays one script call, and a release one call. In
 * a cluster a waiter whose only link to the lease's slot is its shadow there counts as alive while
 * that shadow lives (it is extended by the waiter's own acquires; a renewal drops a slot where the
 * session holds nothing): a waiter silent for longer than its ttl may be skipped, and queues again
 * at the back when it next asks.
 *
 * ## Redis Cluster (mode `cluster`)
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
 * - `acquire` = 2 calls: `register` in the home (alive? register the slot, return its `PTTL` and a
 *   new `seq`), then `acquire` in the lease's slot (create or extend the shadow to at least that
 *   `PTTL`, then decide as on one node). `join` is the same with the group's slot; `release` is 1
 *   call in the lease's slot; `members` 1 call in the group's slot.
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
 * Lease names cannot carry hash tags (`{` is not a valid name character), so names cannot be forced into one slot. The
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
 * default 5 s). A call in flight when its connection (in a cluster: any node's) closes fails at once
 * (`Connection.tracker`: ioredis would drop it unsettled until the timeout). A command that times out
 * closes the connection it was sent on (ours, not a client you bring), and ioredis connects again: a
 * connection that stopped answering would otherwise time out every later call. A call that fails or
 * times out may still have been applied by the server: the engine
 * handles that (an unknown held lease shows up in the next renewal and is released). After
 * `READONLY` (a failed-over primary) the connection is re-established. The subscriber connection is
 * resubscribed after a reconnect (ioredis `autoResubscribe`; in a cluster, ioredis picks another node
 * and resubscribes); hints published while it was disconnected are lost: on one server the backend
 * then hints every waited-for name (`Released`), so its candidates ask again; in a cluster (whose
 * subscriber moves without an event) they fall back to their retry period.
 *
 * Pub/sub: in a cluster, a classic `PUBLISH` (from a script too) reaches subscribers on every node
 * over the cluster bus, so one subscriber connection to any node hears every channel it subscribed;
 * sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`) would keep messages inside a shard but has no patterns
 * (the groups' listener), and would need a subscriber connection per shard. Channels are global to a
 * server (not per `db`): deployments that share a server should use distinct `keyPrefix`es, or they
 * get each other's (harmless) hints.
 *
 * Interruption: ioredis cannot take back a command once sent, so interrupting a call abandons its
 * reply; the script may still run (as with a timeout, see above).
 *
 * Eviction: at start every server (every master) must run `maxmemory-policy noeviction`, or the
 * backend fails with `EvictionPolicyError` unless `allowEvictionPolicy` (see `eviction.ts`).
 *
 * ## Tokens
 *
 * A new token is `max(stored + 1, TIME in microseconds)`, read inside the script (a double in Lua:
 * exact below 2^53, which TIME in microseconds reaches in the year ~2255; a string in Redis, a bigint
 * on the client). A store that lost the hash (restart without persistence, flush, fail-over to a
 * replica that lacks it, the idle expiry) therefore still issues tokens above every earlier one,
 * provided the server's clock has not stepped back since by more than the time that passed: for an
 * idle expiry that is `idleExpiry` (1 hour by default: far longer than any lease and any NTP step),
 * for a lost store it is the outage. Persistence (AOF) is no longer what keeps
 * tokens rising; it still keeps the sessions and holders across a restart.
 */
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { SimbaConfigError } from "../../Errors.js"
import * as LeaseBackend from "../../LeaseBackend.js"
import * as Connection from "./connection.js"
import * as Hints from "./hints.js"
import * as Markers from "./markers.js"
import { isSessionId, keys } from "./keys.js"
import * as Operations from "./operations.js"
import * as Eviction from "./eviction.js"
import type { EvictionPolicyError } from "./eviction.js"
import {
  type BackendSettings,
  type RedisClientOptions,
  type RedisOptions,
  resolve,
  resolveBackend
} from "./options.js"
import { slotTag } from "./slots.js"

export { keys } from "./keys.js"
export type { Client } from "./connection.js"
export { EvictionPolicyError } from "./eviction.js"
export { config, type Mode, type RedisClientOptions, type RedisClusterNode, type RedisOptions } from "./options.js"
export { reservationMillis } from "./scripts.js"
export { keySlot, slotTag } from "./slots.js"

/** Everything after the command connection is ready: the eviction check, the subscriber, the operations. */
const start = (
  client: Connection.Client,
  settings: BackendSettings,
  owned: boolean
): Effect.Effect<LeaseBackend.LeaseBackendService, LeaseBackend.BackendError | EvictionPolicyError, Scope.Scope> =>
  Effect.gen(function*() {
    const k = keys(settings.prefix)
    // Build the slot tag table now rather than during the first acquire.
    if (settings.mode === "cluster") slotTag(0)
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const logError = (connection: string) => (error: Error) =>
      runFork(Effect.logDebug(`simba redis: ${connection} connection error: ${error.message}`))
    const tracker = yield* Connection.tracker(
      client,
      settings.commandTimeout,
      owned ? (reason) => runFork(Effect.logWarning(`simba redis: command connection: ${reason}`)) : undefined
    )
    yield* Eviction.check(client, tracker, settings.allowEvictionPolicy)
    const subscriber = yield* Connection.subscriber(settings, client, logError("subscriber"))
    const { delayMs, idleMs, mode } = settings
    const { hints, watches } = yield* Hints.make(
      mode,
      k,
      subscriber,
      (error) => runFork(Effect.logDebug("simba redis: subscriber: (un)subscribing a channel failed", error))
    )
    const runner = Connection.runner(client, tracker)
    yield* Markers.markOnStart(mode, k, runner, client, delayMs)
    return LeaseBackend.make({
      backend: "redis",
      isSessionId,
      hints,
      ...Operations.make(mode, k, runner, watches, {
        idleMs,
        delayMs,
        markAll: Markers.markAll(mode, k, runner, client, delayMs)
      })
    })
  })

/** What `make` and `makeWithClient` build: the backend in a scope, or why it could not start. */
type Made = Effect.Effect<
  LeaseBackend.LeaseBackendService,
  LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError,
  Scope.Scope
>

/**
 * A `LeaseBackendService` on Redis, with its command and subscriber connections in the scope. Fails
 * with `SimbaConfigError` when an option is invalid, with `EvictionPolicyError` when a server's
 * `maxmemory-policy` is not `noeviction` (see `RedisOptions.allowEvictionPolicy`), and with
 * `BackendError` when ioredis is not installed or Redis cannot be reached.
 */
export const make = (
  options: RedisOptions
): Made =>
  Effect.gen(function*() {
    const settings = yield* resolve(options)
    const driver = yield* Connection.loadIORedis
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const client = yield* Connection.connect(
      settings,
      () => Connection.newClient(driver, settings),
      (error) => runFork(Effect.logDebug(`simba redis: command connection error: ${error.message}`))
    )
    return yield* start(client, settings, true)
  })

/**
 * A `LeaseBackendService` on an ioredis client (`Redis` or `Cluster`) you made: its commands go over
 * that connection, and a duplicate of it (`client.duplicate()`, named `<connectionName>:hints`) is the
 * subscriber. Simba never closes your client: you close it, after the scope that uses the backend;
 * the duplicate is Simba's and closes with the scope. A client never connected (`lazyConnect`) is
 * connected; a closed one fails with `BackendError`.
 *
 * The client keeps its own options; the backend fails a call at once when the connection is not
 * ready (never into the offline queue) or closes while the call is in flight, and after
 * `commandTimeout`; a timeout does not close your client's connection (the backend's own connections
 * are reconnected after one, see "Failure behaviour"). The client must not have an ioredis `keyPrefix`
 * (use `keyPrefix` here): the pub/sub channels are named like the keys and would no longer match them.
 */
export const makeWithClient = (
  client: Connection.Client,
  options: RedisClientOptions = {}
): Made =>
  Effect.gen(function*() {
    const cluster = Connection.isCluster(client)
    const settings = yield* resolveBackend(options, cluster)
    const clientPrefix = cluster ? client.options.redisOptions?.keyPrefix : client.options.keyPrefix
    if (clientPrefix !== undefined && clientPrefix !== "") {
      return yield* new SimbaConfigError({
        field: "redis.client",
        rule: "must have no ioredis keyPrefix (pub/sub channels are not prefixed): pass keyPrefix to Simba instead"
      })
    }
    yield* Connection.awaitReady(client, settings.connectTimeout)
    return yield* start(client, settings, false)
  })

/** The Redis backend as a layer; both connections are closed when the layer's scope closes. */
export const layer = (
  options: RedisOptions
): Layer.Layer<LeaseBackend.LeaseBackend, LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError> =>
  Layer.scoped(LeaseBackend.LeaseBackend, make(options))

/**
 * The Redis backend on an ioredis client you made (see `makeWithClient`): Simba never closes it; the
 * subscriber connection it duplicates closes with the layer.
 */
export const layerWithClient = (
  client: Connection.Client,
  options: RedisClientOptions = {}
): Layer.Layer<LeaseBackend.LeaseBackend, LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError> =>
  Layer.scoped(LeaseBackend.LeaseBackend, makeWithClient(client, options))

/** The Redis backend with its options read from `Config` (for example `config`, from the environment). */
export const layerConfig = (
  options: Config.Config.Wrap<RedisOptions>
): Layer.Layer<
  LeaseBackend.LeaseBackend,
  LeaseBackend.BackendError | SimbaConfigError | EvictionPolicyError | ConfigError.ConfigError
> => Layer.scoped(LeaseBackend.LeaseBackend, Effect.flatMap(Config.unwrap(options), make))

/**
 * The Lua scripts: every state change of the backend is one of them, atomic on the server (see
 * `RedisBackend` for the key layout, the waiter queue and the per-slot design).
 *
 * Each script is declared once with the names of its keys and arguments; `define` binds them to Lua
 * locals of the same names at the top of the script and returns the script's one typed caller,
 * which takes them as named fields and builds `KEYS`/`ARGV` in that order. No call site writes a
 * positional array, and no script body indexes `KEYS` or `ARGV`.
 *
 * The mode (`node` or `cluster`, see `Mode`) is an explicit argument of the scripts that behave
 * differently in each: where a session is found alive, and whether a freed lease is granted to its
 * first waiter (`node`) or reserved for it (`cluster`).
 */
import type * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import * as Replies from "./replies.js"

/**
 * How long a freed lease stays reserved for the head of its waiter queue (server ms). Long enough for
 * the `released` message to reach the head's subscriber and its acquire to come back (a few round
 * trips, plus an event-loop stall on a loaded client), short enough that a waiter that stopped
 * waiting (or lost the message) delays the others only briefly.
 */
export const reservationMillis = 250

/**
 * The most waiter-queue entries one script call examines when it looks for the first live waiter (a
 * release's hand-off, an acquire of a free lease, a reservation that ran out). Dead entries (sessions
 * gone without withdrawing: crashed clients) are dropped in batches of this size and the walk
 * resumes at the next call, so one call's work stays bounded whatever the queue holds: 32 entries
 * cost one `ZRANGE`, 32 `EXISTS` and one `ZREM` (tens of µs), and one call prunes more dead entries
 * than one acquire can add (at most one), so a queue that is used drains its dead entries.
 */
export const queueScanBatch = 32

/** A script as Redis runs it (prelude, parameter bindings, body), with its SHA1 for `EVALSHA`. */
export interface Script {
  readonly name: string
  readonly lua: string
  readonly sha: string
}

/** A value in `ARGV`. */
export type Arg = string | number

/** One script call, ready to send: `KEYS` and `ARGV` in the script's order, and its reply's decoder. */
export interface Call<A> {
  readonly script: Script
  readonly keys: ReadonlyArray<string>
  readonly args: ReadonlyArray<Arg>
  readonly decode: (raw: unknown) => Either.Either<A, ParseResult.ParseError>
}

/** Named values: one per name, and a list for the trailing `rest` name (if any). */
type Named<Names extends ReadonlyArray<string>, Rest extends string, V> =
  & { readonly [N in Names[number]]: V }
  & { readonly [N in Rest]: ReadonlyArray<V> }

/** The typed caller of one script; `script` is there for tests and loading. */
export interface Caller<Keys extends ReadonlyArray<string>, Args extends ReadonlyArray<string>, KR extends string, AR extends string, A> {
  (keys: Named<Keys, KR, string>, args: Named<Args, AR, Arg>): Call<A>
  readonly script: Script
  /** Every key and argument name, as bound in Lua. */
  readonly params: ReadonlyArray<string>
}

// -------------------------------------------------------------------------------------------------
// Prelude: the functions the scripts share
// -------------------------------------------------------------------------------------------------

/** The Lua every script starts with. Its function names are never parameter names (checked by a test). */
export const prelude = `
if redis.replicate_commands then redis.replicate_commands() end
-- The server's time (one TIME): in ms, and in microseconds (for tokens).
local function server_time()
  local t = redis.call('TIME')
  local s, u = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(u / 1000), s * 1000000 + u
end
local function now_ms()
  local ms = server_time()
  return ms
end
-- Make key live at least ms more; never shortens; a missing key stays missing. Answers its ms left.
local function extend(key, ms)
  local cur = redis.call('PTTL', key)
  if cur ~= -2 and cur < ms then
    redis.call('PEXPIRE', key, ms)
    return ms
  end
  return cur
end
-- Renew a session key for ttl ms (never shortens it), and the sets that expire with it: the ms it
-- has left, or nil when it is gone.
local function renew(ttl, key, ...)
  local rem = redis.call('PTTL', key)
  if rem == -2 then return nil end
  if rem < ttl then
    redis.call('PEXPIRE', key, ttl)
    rem = ttl
  end
  for _, set in ipairs({...}) do extend(set, rem) end
  return rem
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
-- The session key home lists the group g among its groups (set groups): the ms home has left, or
-- nil when the session is gone.
local function home_join(home, groups, g)
  local own = redis.call('PTTL', home)
  if own == -2 then return nil end
  redis.call('SADD', groups, g)
  extend(groups, own)
  return own
end
-- sid (own ms left) is a member of gk; 'joined' is published when it was not one yet.
local function add_member(gk, sid, own)
  local added = redis.call('ZADD', gk, now_ms() + own, sid)
  extend(gk, own)
  if added == 1 then redis.call('PUBLISH', gk, 'joined') end
  return 'joined'
end
-- sid leaves gk; 'left' is published when it was a member.
local function remove_member(gk, sid)
  if redis.call('ZREM', gk, sid) == 1 then redis.call('PUBLISH', gk, 'left') end
end
-- The holder record of lk (see hold): 'sid:token' while held; the session id and token, or nil.
local function recorded_holder(record)
  if not record then return nil end
  return string.match(record, '^([^:]+):(%d+)$')
end
-- The lease hash lk was lost (deleted by hand) while its holder record names sid, whose session
-- lives: write it back, so nobody else is granted it while sid may still believe it holds it.
local function restore(lk, sid, token, expires)
  redis.call('HSET', lk, 'session', sid, 'token', token, 'expires', expires)
  redis.call('PERSIST', lk)
end
-- {name, token} of the leases in set whose hash still names sid (or, lost, whose holder record
-- does: restored), and how many others left the set.
local function held_leases(set, sid, lease_prefix, expires)
  local held, pruned = {}, 0
  for _, name in ipairs(redis.call('SMEMBERS', set)) do
    local lk = lease_prefix .. name .. '}'
    local h = redis.call('HMGET', lk, 'session', 'token')
    local rsid, rtok
    if not h[1] and not h[2] then rsid, rtok = recorded_holder(redis.call('GET', lk .. ':holder')) end
    if h[1] == sid then
      redis.call('HSET', lk, 'expires', expires)
      held[#held + 1] = {name, h[2]}
    elseif rsid == sid then
      restore(lk, sid, rtok, expires)
      held[#held + 1] = {name, rtok}
    else
      redis.call('SREM', set, name)
      pruned = pruned + 1
    end
  end
  return held, pruned
end
-- ---- Where a session is found alive: the mode ----
-- 'node': at its session key, prefix .. sid .. '}'. 'cluster' (every call inside one hash slot): at
-- its shadow in this slot, prefix .. sid, which is dead too once closeSession marked it closed.
local closed_marker = '9007199254740992'
-- Also carries the store's rules for lease hashes: idle = ms a freed hash lives without a grant;
-- marker = the boot marker of this store (mode 'node') or of this slot (mode 'cluster'), and delay =
-- the lock-delay in ms (see lock_delay).
local function holders_in(mode, prefix, idle, marker, delay)
  if mode ~= 'node' and mode ~= 'cluster' then error('simba: unknown mode ' .. tostring(mode)) end
  return {mode = mode, prefix = prefix, idle = tonumber(idle), marker = marker, delay = tonumber(delay)}
end
local function holder_key(holders, sid)
  if holders.mode == 'node' then return holders.prefix .. sid .. '}' end
  return holders.prefix .. sid
end
local function alive(holders, sid)
  local key = holder_key(holders, sid)
  if redis.call('EXISTS', key) == 0 then return false end
  return holders.mode == 'node' or redis.call('HGET', key, 'closed') ~= closed_marker
end
-- A new version of the session's lease set in this slot (mode 'cluster'): the shadow's 'ver', which
-- renewals compare with the client's. A shadow without one starts at the server's TIME in
-- microseconds, so a shadow lost and made again never repeats a version a client saw (while the
-- clock does not step back, as for tokens).
local function bump_shadow(shadow)
  if redis.call('HEXISTS', shadow, 'ver') == 1 then
    return string.format('%.0f', redis.call('HINCRBY', shadow, 'ver', 1))
  end
  local _, us = server_time()
  local ver = string.format('%.0f', us)
  redis.call('HSET', shadow, 'ver', ver)
  return ver
end
-- The lease set of the session whose liveness key is key changed: a new version of the set, which
-- renewals compare with the client's. Mode 'node': the session key's value (INCR keeps its PX);
-- mode 'cluster': the shadow's (see bump_shadow). Never on a gone session (INCR or HSET would
-- create the key: a revival).
local function changed(holders, key)
  if redis.call('EXISTS', key) == 0 then return end
  if holders.mode == 'node' then redis.call('INCR', key) else bump_shadow(key) end
end
-- changed, for a session this script has just found alive.
local function bump(holders, key)
  if holders.mode == 'node' then redis.call('INCR', key) else bump_shadow(key) end
end
-- ---- Tokens and the life of a lease hash ----
-- A new token after stored (the lease's last token, or nil): max(stored + 1, the server's TIME in
-- microseconds us), so a store that lost the hash (restart without persistence, flush, fail-over,
-- idle expiry) still hands out a token above every earlier one while the clock does not step back.
-- Lua numbers are doubles: TIME in us is about 1.8e15 (2026), exact below 2^53 (~9.0e15, year
-- ~2255), and so are stored + 1 and the max; '%.0f' prints the integer without an exponent. Tokens
-- are strings here and bigints on the client.
local function next_token(stored, us)
  return string.format('%.0f', math.max(tonumber(stored or '0') + 1, us))
end
-- ---- Lock-delay after lost state ----
-- The boot marker holds the server time (ms) from which grants may resume. A missing marker means the
-- store (or, in a cluster, the node holding this slot) lost its state: restart without persistence,
-- flush, fail-over to a replica that lacks it. Some session may still believe it holds a lease there
-- until its own deadline, so nothing is granted for one lock-delay: the marker is created with
-- now + delay. resume is the marker's value (nil: missing). Answers the ms left (0: grants allowed)
-- and whether this call found it missing.
-- Only a lease without a stored token (no hash, or one holding waiters only) needs the check: a wipe
-- takes the lease hashes with the marker, and no script writes a token during a lock-delay, so a
-- hash with a token proves this store kept its state since that token's grant (a marker deleted
-- alone starts a delay for the leases without one; those with one lost nothing).
local function lock_delay(holders, now, resume)
  if not resume then
    redis.call('SET', holders.marker, now + holders.delay)
    return holders.delay, true
  end
  return math.max(tonumber(resume) - now, 0), false
end
-- lk names no holder from now on: it expires once idle that long (a grant makes it persistent again),
-- and its holder record goes.
local function free(lk, holders)
  redis.call('HDEL', lk, 'session', 'expires')
  redis.call('PEXPIRE', lk, holders.idle)
  redis.call('DEL', lk .. ':holder')
end
-- ---- FIFO hand-off (see "Waiter queue" in RedisBackend) ----
-- The first live waiter of queue q (dead ones leave it) of lease lk, or nil.
-- At most ${queueScanBatch} entries are examined per call (see queueScanBatch): with more dead ones
-- ahead it answers nil too (the next call resumes the walk), and the lease goes to whoever asks.
-- Only called when lk carries 'queued' (see wait_in); an empty queue clears it.
local function next_waiter(lk, q, holders)
  local batch = redis.call('ZRANGE', q, 0, ${queueScanBatch - 1})
  if #batch == 0 then
    redis.call('HDEL', lk, 'queued')
    return nil
  end
  local dead, head = {}, nil
  for _, sid in ipairs(batch) do
    if alive(holders, sid) then
      head = sid
      break
    end
    dead[#dead + 1] = sid
  end
  if #dead > 0 then redis.call('ZREM', q, unpack(dead)) end
  return head
end
-- Reserve the free lease lk (name) for sid until now + the reservation and tell sid: in mode 'node'
-- on its session's channel ('released:<name>'), in mode 'cluster' on the lease's ('released:<sid>').
local function reserve(lk, name, sid, now, holders)
  redis.call('HSET', lk, 'reserved', sid, 'reservedUntil', now + ${reservationMillis})
  if holders.mode == 'node' then
    redis.call('PUBLISH', holder_key(holders, sid), 'released:' .. name)
  else
    redis.call('PUBLISH', lk, 'released:' .. sid)
  end
end
-- sid (whose liveness key has own ms left) holds lk (name, listed in its set) with token from now
-- on. expiring: lk may carry an expiry (a free hash that exists), which the grant removes. The
-- holder record lk .. ':holder' ('sid:token', in lk's slot) outlives a hash deleted by hand: an
-- acquire that finds the hash gone and the record naming a live session restores the hash instead
-- of granting (see acquire). The set expires with the session (its renewals extend both).
local function hold(lk, set, name, sid, token, now, own, expiring)
  redis.call('HSET', lk, 'session', sid, 'token', token, 'expires', now + own)
  if expiring then redis.call('PERSIST', lk) end
  redis.call('SET', lk .. ':holder', sid .. ':' .. token)
  redis.call('SADD', set, name)
  redis.call('PEXPIRE', set, own)
end
-- Mode 'node': grant the lease lk (name, last token stored) to the live waiter head, as its
-- acquire would, and tell it on its session's channel ('granted:<token>:<name>', heard by head's
-- client alone), so it holds the lease without another round trip. expiring: as in hold.
local function grant_to(lk, q, name, head, holders, stored, expiring)
  local home = holder_key(holders, head)
  local now, us = server_time()
  local token = next_token(stored, us)
  hold(lk, home .. ':leases', name, head, token, now, redis.call('PTTL', home), expiring)
  bump(holders, home)
  redis.call('ZREM', q, head)
  redis.call('PUBLISH', home, 'granted:' .. token .. ':' .. name)
end
-- lk (last token stored; queued: it carries 'queued') becomes free: its holder gives it up (held:
-- the hash still names it) or its reservation was withdrawn. In mode 'node' it goes straight to the
-- first live waiter (a held hash is overwritten by the new holder, never freed in between); in mode
-- 'cluster' (the waiter's registration lives in another slot, see "Redis Cluster") it is freed and
-- reserved for that waiter; freed with a plain 'released' when nobody waits. No lock-delay check:
-- lk has a token, so this store kept its state (see lock_delay).
local function hand_off(lk, q, name, holders, stored, queued, held)
  local head = nil
  if queued then head = next_waiter(lk, q, holders) end
  if head and holders.mode == 'node' then
    grant_to(lk, q, name, head, holders, stored, not held)
    return
  end
  if held then free(lk, holders) end
  if head then
    reserve(lk, name, head, now_ms(), holders)
  else
    redis.call('PUBLISH', lk, 'released')
  end
end
-- Queue sid (once: a waiter keeps its place) behind the others; the queue lives while its waiters may.
-- The lease hash lk carries 'queued' while its queue may hold waiters (queued: it already does), so
-- an acquire or release of a lease nobody waits for reads no queue; a hash this creates (waiters
-- of a lease with no hash, during a lock-delay) expires once idle, like a freed one.
local function wait_in(lk, q, sid, now, own, queued, exists, holders)
  redis.call('ZADD', q, 'NX', now, sid)
  extend(q, own)
  if not queued then
    redis.call('HSET', lk, 'queued', '1')
    if not exists then redis.call('PEXPIRE', lk, holders.idle) end
  end
end
-- Release every lease in set that still names sid, handing each off.
local function release_all(set, sid, lease_prefix, holders)
  for _, name in ipairs(redis.call('SMEMBERS', set)) do
    local lk = lease_prefix .. name .. '}'
    local h = redis.call('HMGET', lk, 'session', 'token', 'queued')
    if h[1] == sid then hand_off(lk, lk .. ':queue', name, holders, h[2], h[3], true) end
  end
end
-- Grant lease lk to sid (whose liveness key has own ms left) unless a live session holds it or it
-- is reserved for another live waiter; a refused sid joins the queue q. Answers as the reply of the
-- acquire script; a 'granted' or 'held' answer carries a 4th element 1 when it restored a lease
-- hash deleted by hand from its holder record.
local function acquire(lk, q, set, sid, name, own, holders)
  local h = redis.call('HMGET', lk, 'session', 'token', 'reserved', 'reservedUntil', 'queued')
  local now, us = server_time()
  if h[1] == sid then
    hold(lk, set, name, sid, h[2], now, own, false)
    return {'granted', h[2]}
  end
  -- A free hash that exists has an expiry (freed, or made by wait_in), which a grant removes.
  local exists = h[2] or h[3] or h[5]
  local stored = h[2]
  if h[1] then
    local left = redis.call('PTTL', holder_key(holders, h[1]))
    if left ~= -2 then
      wait_in(lk, q, sid, now, own, h[5], true, holders)
      return {'held', h[2] or '', left}
    end
    -- Takeover: the holder's session is gone, the lease is free.
    free(lk, holders)
  elseif not stored then
    -- No token: a new or idle-expired name, a hash deleted by hand, or a store that lost its state.
    local m = redis.call('MGET', holders.marker, lk .. ':holder')
    -- Nothing is granted while a lock-delay runs: the requester waits in the queue.
    local pause, fresh = lock_delay(holders, now, m[1])
    if pause > 0 then
      wait_in(lk, q, sid, now, own, h[5], exists, holders)
      return {'delayed', pause, fresh and 1 or 0}
    end
    local rsid, rtok = recorded_holder(m[2])
    if rsid == sid then
      -- The hash was deleted by hand while sid held the lease: it still does, with its token.
      hold(lk, set, name, sid, rtok, now, own, exists)
      return {'granted', rtok, 1}
    elseif rsid and alive(holders, rsid) then
      -- The hash was deleted by hand while rsid holds the lease: it still does.
      local key = holder_key(holders, rsid)
      local left = redis.call('PTTL', key)
      restore(lk, rsid, rtok, now + left)
      redis.call('SADD', key .. ':leases', name)
      extend(key .. ':leases', left)
      bump(holders, key)
      wait_in(lk, q, sid, now, own, h[5], true, holders)
      return {'held', rtok, left, 1}
    end
    -- The recorded holder is gone: free, and its token is the last one handed out.
    stored = rtok
  end
  -- Who may take it?
  local head, untill = nil, 0
  if h[3] and tonumber(h[4]) > now and alive(holders, h[3]) then
    head, untill = h[3], tonumber(h[4])
  else
    -- No reservation, or one that ran out unused (that waiter stopped waiting: drop it).
    if h[3] then
      redis.call('ZREM', q, h[3])
      redis.call('HDEL', lk, 'reserved', 'reservedUntil')
    end
    if h[5] then head = next_waiter(lk, q, holders) end
    if head and head ~= sid then
      reserve(lk, name, head, now, holders)
      untill = now + ${reservationMillis}
    end
  end
  if head and head ~= sid then
    wait_in(lk, q, sid, now, own, h[5], true, holders)
    return {'held', stored or '', math.max(untill - now, 1)}
  end
  local token = next_token(stored, us)
  if head then
    redis.call('ZREM', q, sid)
    if h[3] then redis.call('HDEL', lk, 'reserved', 'reservedUntil') end
  end
  hold(lk, set, name, sid, token, now, own, exists)
  bump(holders, holder_key(holders, sid))
  return {'granted', token}
end
`

// -------------------------------------------------------------------------------------------------
// Declaring a script
// -------------------------------------------------------------------------------------------------

/** `local name = KEYS[i]` for each name, and a table of the rest (`KEYS[n + 1]` on) for `rest`. */
const bind = (table: "KEYS" | "ARGV", names: ReadonlyArray<string>, rest: string | undefined): string => {
  const lines = names.map((name, i) => `local ${name} = ${table}[${i + 1}]`)
  if (rest !== undefined) {
    lines.push(`local ${rest} = {}`, `for i = ${names.length + 1}, #${table} do ${rest}[#${rest} + 1] = ${table}[i] end`)
  }
  return lines.join("\n")
}

/** The values of `names` in order, then those of `rest`. */
const flatten = <V>(names: ReadonlyArray<string>, rest: string | undefined, values: object): Array<V> => {
  // `values` is a `Named<...>` of exactly these names (checked where the caller is typed).
  const byName = values as Readonly<Record<string, V | ReadonlyArray<V>>>
  const out = names.map((name) => byName[name] as V)
  if (rest !== undefined) for (const value of byName[rest] as ReadonlyArray<V>) out.push(value)
  return out
}

const define = <
  const Keys extends ReadonlyArray<string>,
  const Args extends ReadonlyArray<string>,
  A,
  I,
  KR extends string = never,
  AR extends string = never
>(
  name: string,
  params: {
    readonly keys: Keys
    /** Further keys, any number, bound as a Lua table. */
    readonly restKeys?: KR
    readonly args: Args
    /** Further arguments, any number, bound as a Lua table. */
    readonly restArgs?: AR
    readonly reply: Schema.Schema<A, I>
  },
  body: string
): Caller<Keys, Args, KR, AR, A> => {
  const { args, keys, restArgs, restKeys } = params
  const lua = [prelude, bind("KEYS", keys, restKeys), bind("ARGV", args, restArgs), body].join("\n")
  const script: Script = { name, lua, sha: createHash("sha1").update(lua).digest("hex") }
  const decode = Schema.decodeUnknownEither(params.reply)
  const call = (keyValues: Named<Keys, KR, string>, argValues: Named<Args, AR, Arg>): Call<A> => ({
    script,
    keys: flatten(keys, restKeys, keyValues),
    args: flatten(args, restArgs, argValues),
    decode
  })
  const names = [...keys, ...args, ...(restKeys === undefined ? [] : [restKeys]), ...(restArgs === undefined ? [] : [restArgs])]
  return Object.assign(call, { script, params: names })
}

// -------------------------------------------------------------------------------------------------
// Scripts of both modes
// -------------------------------------------------------------------------------------------------

/**
 * Creates the session key (never an existing one) with `ttl` ms to live. Its value counts: in mode
 * `node` the versions of the session's lease set, in mode `cluster` the slot registrations.
 */
export const open = define("open", { keys: ["home"], args: ["ttl"], reply: Replies.Opened }, `
if not redis.call('SET', home, '0', 'PX', ttl, 'NX') then return {'exists'} end
return {'ok', redis.call('PTTL', home)}
`)

/**
 * Grants the lease unless a live session holds it or it is reserved for another live waiter; a
 * refused session joins the queue. `holder` is where the session is found alive in the lease's slot
 * and `holderLeases` the set of the names it holds there: its session key and `:leases` (mode
 * `node`; `registration` and `homeRemaining` unused), or its shadow there (mode `cluster`, with the
 * registration number and the home's time left that `register` answered).
 */
export const acquire = define("acquire", {
  keys: ["lease", "queue", "holder", "holderLeases", "marker"],
  args: ["sessionId", "name", "mode", "holderPrefix", "registration", "homeRemaining", "idleMs", "delayMs"],
  reply: Replies.Acquired
}, `
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
local own
if holders.mode == 'node' then
  own = redis.call('PTTL', holder)
  if own == -2 then return {'expired'} end
else
  -- A registration a renewal already closed here is stale; the shadow lives as long as the home.
  local seq = tonumber(registration)
  local st = redis.call('HMGET', holder, 'gen', 'closed')
  if st[2] and tonumber(st[2]) >= seq then return {'stale'} end
  if not st[1] or tonumber(st[1]) < seq then redis.call('HSET', holder, 'gen', seq) end
  own = extend(holder, tonumber(homeRemaining))
end
return acquire(lease, queue, holderLeases, sessionId, name, own, holders)
`)

/**
 * Releases the lease if the session holds it with exactly `token`, and hands it off (see `acquire`;
 * `holder` and `holderLeases` as there).
 */
export const release = define("release", {
  keys: ["lease", "queue", "holder", "holderLeases", "marker"],
  args: ["sessionId", "token", "name", "mode", "holderPrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
local h = redis.call('HMGET', lease, 'session', 'token', 'queued')
if h[1] ~= sessionId or h[2] ~= token then return 0 end
local holders = holders_in(mode, holderPrefix, idleMs, marker, delayMs)
redis.call('SREM', holderLeases, name)
changed(holders, holder)
hand_off(lease, queue, name, holders, h[2], h[3], true)
return 1
`)

/**
 * The session no longer waits for the lease: it leaves the queue; a reservation it had on the free
 * lease is handed to the next live waiter (`holder*` as in `acquire`, to find waiters alive).
 */
export const withdraw = define("withdraw", {
  keys: ["lease", "queue", "marker"],
  args: ["sessionId", "name", "mode", "holderPrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
local removed = redis.call('ZREM', queue, sessionId)
local h = redis.call('HMGET', lease, 'session', 'reserved', 'token', 'queued')
if h[2] == sessionId then
  redis.call('HDEL', lease, 'reserved', 'reservedUntil')
  if not h[1] then hand_off(lease, queue, name, holders_in(mode, holderPrefix, idleMs, marker, delayMs), h[3], h[4], false) end
end
return removed
`)

/** The live members of a group. */
export const members = define("members", { keys: ["group"], args: [], reply: Replies.Members }, `
return live_members(group, now_ms())
`)

// -------------------------------------------------------------------------------------------------
// Mode `node`: the session's keys and a lease's or group's in one script
// -------------------------------------------------------------------------------------------------

/**
 * Renews the session and its groups' memberships; answers the version of its lease set (the session
 * key's value), its groups and, unless the set is still the version `known`, its leases. An unchanged
 * renewal reads no lease: its commands do not depend on the number of leases.
 */
export const renew = define("renew", {
  keys: ["home", "homeLeases", "homeGroups"],
  args: ["sessionId", "ttl", "known", "leasePrefix", "groupPrefix"],
  reply: Replies.Renewed
}, `
local rem = renew(tonumber(ttl), home, homeLeases, homeGroups)
if not rem then return {'expired'} end
local version = redis.call('GET', home)
local names = redis.call('SMEMBERS', homeGroups)
-- The clock only when something is stamped with it.
local now = (#names > 0 or version ~= known) and now_ms() or 0
local groups = {}
for _, g in ipairs(names) do
  local view = group_view(groupPrefix .. g .. '}', sessionId, now, rem)
  if view then groups[#groups + 1] = {g, view} else redis.call('SREM', homeGroups, g) end
end
if version == known then return {'live', rem, version, groups} end
local leases, pruned = held_leases(homeLeases, sessionId, leasePrefix, now + rem)
if pruned > 0 then version = tostring(redis.call('INCR', home)) end
return {'live', rem, version, groups, leases}
`)

/** Releases every lease of the session (handing each off), leaves its groups, deletes it. */
export const close = define("close", {
  keys: ["home", "homeLeases", "homeGroups", "marker"],
  args: ["sessionId", "leasePrefix", "groupPrefix", "sessionPrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
release_all(homeLeases, sessionId, leasePrefix, holders_in('node', sessionPrefix, idleMs, marker, delayMs))
for _, g in ipairs(redis.call('SMEMBERS', homeGroups)) do remove_member(groupPrefix .. g .. '}', sessionId) end
redis.call('DEL', home, homeLeases, homeGroups)
return 1
`)

/** Adds the session to the group. */
export const join = define("join", {
  keys: ["home", "homeGroups", "group"],
  args: ["sessionId", "groupName"],
  reply: Replies.Joined
}, `
local own = home_join(home, homeGroups, groupName)
if not own then return 'expired' end
return add_member(group, sessionId, own)
`)

/** Removes the session from the group. */
export const leave = define("leave", {
  keys: ["homeGroups", "group"],
  args: ["sessionId", "groupName"],
  reply: Replies.Count
}, `
redis.call('SREM', homeGroups, groupName)
remove_member(group, sessionId)
return 1
`)

// -------------------------------------------------------------------------------------------------
// Mode `cluster`: the home's half and the lease's or group's half, each in its own slot
// -------------------------------------------------------------------------------------------------

/** Registers the slot of `tag` in the home: its time left and the registration's number. */
export const register = define("register", {
  keys: ["home", "homeSlots"],
  args: ["tag"],
  reply: Replies.Registered
}, `
local own = redis.call('PTTL', home)
if own == -2 then return {'expired'} end
local seq = redis.call('INCR', home)
redis.call('HSET', homeSlots, tag, seq)
-- The slots expire with the home (its renewals extend both).
redis.call('PEXPIRE', homeSlots, own)
return {'ok', own, seq}
`)

/** Renews the home; lists its registered slots and its groups. */
export const renewHome = define("renewHome", {
  keys: ["home", "homeSlots", "homeGroups"],
  args: ["ttl"],
  reply: Replies.HomeRenewed
}, `
local rem = renew(tonumber(ttl), home, homeSlots, homeGroups)
if not rem then return {'expired'} end
return {'live', rem, redis.call('HGETALL', homeSlots), redis.call('SMEMBERS', homeGroups)}
`)

/**
 * Renews the session's shadow in one slot (when `registration` is not `""`) and its memberships of
 * the groups of that slot (`groups`, named `groupNames`) for `remaining` ms; answers the version of
 * its lease set there and, unless that is still `known` (`""`: none known), what it holds there (`0`:
 * still `known`, no lease read). A shadow left with no lease is closed at its last registration,
 * answered for the home to forget (`forgetSlots`).
 */
export const renewSlot = define("renewSlot", {
  keys: ["shadow", "shadowLeases"],
  restKeys: "groups",
  args: ["sessionId", "remaining", "leasePrefix", "registration", "known"],
  restArgs: "groupNames",
  reply: Replies.SlotRenewed
}, `
local rem = tonumber(remaining)
local now = #groups > 0 and now_ms() or 0
local leases, prune, version = {}, '', ''
if registration ~= '' then
  if redis.call('EXISTS', shadow) == 1 then
    extend(shadow, rem)
    extend(shadowLeases, rem)
    version = redis.call('HGET', shadow, 'ver') or ''
    if known ~= '' and version == known and redis.call('SCARD', shadowLeases) > 0 then
      leases = 0
    else
      if now == 0 then now = now_ms() end
      local pruned
      leases, pruned = held_leases(shadowLeases, sessionId, leasePrefix, now + rem)
      if pruned > 0 or version == '' then version = bump_shadow(shadow) end
      if #leases == 0 then
        prune = redis.call('HGET', shadow, 'gen') or '0'
        redis.call('HSET', shadow, 'closed', prune)
      end
    end
  else
    -- Lost, or its first grant is still on the way: close it at the registration we know of.
    redis.call('HSET', shadow, 'closed', registration)
    redis.call('PEXPIRE', shadow, rem)
    prune = registration
  end
end
local views = {}
for i, gk in ipairs(groups) do
  local view = group_view(gk, sessionId, now, rem)
  if view then views[#views + 1] = {groupNames[i], view} end
end
return {leases, views, prune, version}
`)

/** Forgets the slots whose registration is still the one a renewal closed: `tag, registration, ...`. */
export const forgetSlots = define("forgetSlots", {
  keys: ["homeSlots"],
  args: [],
  restArgs: "registrations",
  reply: Replies.Count
}, `
local n = 0
for i = 1, #registrations, 2 do
  if redis.call('HGET', homeSlots, registrations[i]) == registrations[i + 1] then
    redis.call('HDEL', homeSlots, registrations[i])
    n = n + 1
  end
end
return n
`)

/** Deletes the home (from then on every call answers `Expired`); returns its time left, slots and groups. */
export const closeHome = define("closeHome", {
  keys: ["home", "homeSlots", "homeGroups"],
  args: [],
  reply: Replies.HomeClosed
}, `
local left = redis.call('PTTL', home)
local slots = redis.call('HKEYS', homeSlots)
local groups = redis.call('SMEMBERS', homeGroups)
redis.call('DEL', home, homeSlots, homeGroups)
return {left, slots, groups}
`)

/**
 * Closes the session in one slot: releases its leases there (handing each off) when `holdsLeases` is
 * not `""`, leaving the shadow as a closed marker so a grant still on the way cannot recreate it;
 * leaves the `groups` of that slot.
 */
export const closeSlot = define("closeSlot", {
  keys: ["shadow", "shadowLeases", "marker"],
  restKeys: "groups",
  args: ["sessionId", "leasePrefix", "holdsLeases", "homeRemaining", "shadowPrefix", "idleMs", "delayMs"],
  reply: Replies.Count
}, `
if holdsLeases ~= '' then
  release_all(shadowLeases, sessionId, leasePrefix, holders_in('cluster', shadowPrefix, idleMs, marker, delayMs))
  redis.call('DEL', shadowLeases)
  redis.call('HSET', shadow, 'closed', closed_marker)
  extend(shadow, math.max(tonumber(homeRemaining), 1))
end
for _, gk in ipairs(groups) do remove_member(gk, sessionId) end
return 1
`)

/** Makes the session a member of the group for `own` ms (the home's time left). */
export const addMember = define("addMember", {
  keys: ["group"],
  args: ["sessionId", "own"],
  reply: Replies.Joined
}, `
return add_member(group, sessionId, tonumber(own))
`)

/** Lists the group among the home's groups: the home's time left. */
export const joinHome = define("joinHome", {
  keys: ["home", "homeGroups"],
  args: ["groupName"],
  reply: Replies.HomeJoined
}, `
local own = home_join(home, homeGroups, groupName)
if not own then return {'expired'} end
return {'ok', own}
`)

/** Removes the session from the group's members. */
export const removeMember = define("removeMember", {
  keys: ["group"],
  args: ["sessionId"],
  reply: Replies.Count
}, `
remove_member(group, sessionId)
return 1
`)

/** Drops the group from the home's groups. */
export const forgetGroup = define("forgetGroup", {
  keys: ["homeGroups"],
  args: ["groupName"],
  reply: Replies.Count
}, `
return redis.call('SREM', homeGroups, groupName)
`)

/**
 * Creates the boot marker (of the store, or of one slot) unless it exists, with grants resuming at
 * `resumeAt` (server ms; set by the first marker of the same node in one pass, so the whole node
 * resumes at once) or, when `resumeAt` is `""`, after a full `delayMs`. Answers 1 when it created it,
 * and the marker's value.
 */
export const bootMarker = define("bootMarker", {
  keys: ["marker"],
  args: ["delayMs", "resumeAt"],
  reply: Replies.Marked
}, `
local resume = redis.call('GET', marker)
if resume then return {0, resume} end
if resumeAt ~= '' then resume = resumeAt else resume = tostring(now_ms() + tonumber(delayMs)) end
redis.call('SET', marker, resume)
return {1, resume}
`)

/** Every script with its parameter names, for tests. */
export const all: ReadonlyArray<{ readonly script: Script; readonly params: ReadonlyArray<string> }> = [
  open,
  acquire,
  release,
  withdraw,
  members,
  renew,
  close,
  join,
  leave,
  register,
  renewHome,
  renewSlot,
  forgetSlots,
  closeHome,
  closeSlot,
  addMember,
  joinHome,
  removeMember,
  forgetGroup,
  bootMarker
]

/**
 * The Lua the scripts share: the functions (server time, expiry, group membership, the mode, tokens,
 * lock-delay, the FIFO hand-off and the acquire itself) written once, of which each script starts
 * with the part it calls (`preludeFor`), so its SHA1 covers what it runs; the two limits it
 * interpolates are exported beside it for the scripts' callers and tests.
 */
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

/** The shared Lua. Its function names are never parameter names (checked by a test). */
import { poolLua } from "./poolLua.js"

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
-- The lease hash of name: lease_prefix .. name .. '}'. In a cluster (cluster: true) a hold's hash
-- (name 'pool~...') is tagged by its pool's name instead, lease_prefix .. pool .. '}~...', so that
-- it lies in its pool's slot and the pool rule runs in one script (one node keeps the plain layout).
local function lease_key(lease_prefix, name, cluster)
  if cluster then
    local at = string.find(name, '~', 1, true)
    if at then return lease_prefix .. string.sub(name, 1, at - 1) .. '}' .. string.sub(name, at) end
  end
  return lease_prefix .. name .. '}'
end
-- {name, token} of the leases in set whose hash still names sid (or, lost, whose holder record
-- does: restored), and how many others left the set. cluster: as in lease_key.
local function held_leases(set, sid, lease_prefix, expires, cluster)
  local held, pruned = {}, 0
  for _, name in ipairs(redis.call('SMEMBERS', set)) do
    local lk = lease_key(lease_prefix, name, cluster)
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
-- Mode 'cluster': the ms a pulse key has left (-2: gone), or nil when there is none (a shadow written
-- by a client before pulses) or this node cannot read it (resharding moved its slot away: the access
-- is an error redis.pcall returns). A pulse is a session's liveness on one node (docs/design.md,
-- "Redis Cluster: per-slot shadows and pulses"): its shadows there name it, and a renewal extends it once per node.
local function pulse_left(pulse)
  if not pulse then return nil end
  local left = redis.pcall('PTTL', pulse)
  if type(left) ~= 'number' then return nil end
  return left
end
-- The ms session sid has left as the scripts of this slot see it; -2 when it is gone. Mode 'node':
-- its session key. Mode 'cluster': its shadow here, dead once closed; then the pulse the shadow
-- names, or the shadow's own time to live when there is none or it cannot be read here (a shadow
-- outlives the client's deadline by the renewal's margin, so that fallback can only be later).
local function holder_left(holders, sid)
  local key = holder_key(holders, sid)
  if holders.mode == 'node' then return redis.call('PTTL', key) end
  local s = redis.call('HMGET', key, 'closed', 'pulse')
  if s[1] == closed_marker then return -2 end
  local own = redis.call('PTTL', key)
  if own == -2 then return -2 end
  return pulse_left(s[2]) or own
end
local function alive(holders, sid)
  return holder_left(holders, sid) ~= -2
end
-- Mode 'cluster': the pulse key carries the session's liveness from now on, for at least own ms. It
-- is a hash: 'b', when it was made (the server's TIME in microseconds: a pulse made anew, after its
-- node lost its state, is never mistaken for the one a client knew, while the clock does not step
-- back), and 'n', the changes of the lease sets relying on it since. False, and nothing written, when
-- this node cannot read it (the client's slot table is behind a resharding).
local function beat(pulse, own)
  local left = redis.pcall('PTTL', pulse)
  if type(left) ~= 'number' then return false end
  if left == -2 then
    local _, us = server_time()
    redis.call('HSET', pulse, 'b', string.format('%.0f', us), 'n', 0)
    redis.call('PEXPIRE', pulse, own)
  elseif left < own then
    redis.call('PEXPIRE', pulse, own)
  end
  return true
end
-- Mode 'cluster': the shadow relies on pulse from now on (made or extended to own ms, see beat);
-- false, and nothing written, when this node cannot read the pulse. A shadow holding leases that
-- moves to another pulse counts as a change there: a client that does not know that pulse yet lists
-- the set again (it takes a pulse it has not seen with no change counted as relying on nothing).
local function rely_on(shadow, pulse, own)
  if not beat(pulse, own) then return false end
  if redis.call('HGET', shadow, 'pulse') == pulse then return true end
  redis.call('HSET', shadow, 'pulse', pulse)
  if redis.call('SCARD', shadow .. ':leases') > 0 then redis.call('HINCRBY', pulse, 'n', 1) end
  return true
end
-- A new version of the session's lease set in this slot (mode 'cluster'): the shadow's 'ver', which
-- renewals compare with the client's, and, unless a renewal makes the change (it lists the set
-- itself: quiet), one more change counted by the pulse the shadow names (when this node can read
-- it), which renewals read once per node. A shadow without a version starts at the server's TIME in
-- microseconds, so a shadow lost and made again never repeats a version a client saw (while the
-- clock does not step back, as for tokens).
local function bump_shadow(shadow, quiet)
  local pulse = not quiet and redis.call('HGET', shadow, 'pulse')
  if pulse and redis.pcall('EXISTS', pulse) == 1 then redis.call('HINCRBY', pulse, 'n', 1) end
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
-- are strings here and bigints on the client. extra: the tokens reserved above it (a grant's block,
-- see acquire), so the answer is the block's last and every later grant is above the whole block.
local function next_token(stored, us, extra)
  return string.format('%.0f', math.max(tonumber(stored or '0') + 1, us) + extra)
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
  redis.call('HDEL', lk, 'session', 'expires', 'cached')
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
-- sid (whose session has own ms left) holds lk (name, listed in its set) with token from now
-- on. expiring: lk may carry an expiry (a free hash that exists), which the grant removes. The
-- holder record lk .. ':holder' ('sid:token', in lk's slot) outlives a hash deleted by hand: an
-- acquire that finds the hash gone and the record naming a live session restores the hash instead
-- of granting (see acquire). The set expires with its liveness key (keep ms: the session key, or the
-- shadow; renewals extend both). cached: sid's client may cache the lease (a grant with a block of
-- tokens): the hash carries 'cached' until the lease is freed or handed on, and an acquire that
-- queues behind it tells sid ('wanted', see acquire). nil leaves the field as it is.
local function hold(lk, set, name, sid, token, now, own, keep, expiring, cached)
  if cached then
    redis.call('HSET', lk, 'session', sid, 'token', token, 'expires', now + own, 'cached', '1')
  else
    redis.call('HSET', lk, 'session', sid, 'token', token, 'expires', now + own)
  end
  if expiring then redis.call('PERSIST', lk) end
  redis.call('SET', lk .. ':holder', sid .. ':' .. token)
  redis.call('SADD', set, name)
  redis.call('PEXPIRE', set, keep)
end
${poolLua}
-- Mode 'node': grant the lease lk (name, last token stored) to the live waiter head, as its
-- acquire would, and tell it on its session's channel ('granted:<token>:<name>', heard by head's
-- client alone), so it holds the lease without another round trip. expiring: as in hold.
local function grant_to(lk, q, name, head, holders, stored, expiring)
  local home = holder_key(holders, head)
  local now, us = server_time()
  local token = next_token(stored, us, 0)
  local own = redis.call('PTTL', home)
  if not expiring then redis.call('HDEL', lk, 'cached') end
  hold(lk, home .. ':leases', name, head, token, now, own, own, expiring, nil)
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
local function hand_off(lk, q, name, holders, stored, queued, held, gone_sid)
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
    -- A read-write lock's writer is gone: its readers (or the next writer) waiting in the pool go on.
    if redis.call('EXISTS', lk .. ':pool') == 1 then pool_serve(lk, name, prefix_of(lk, name), holders, gone_sid) end
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
    local lk = lease_key(lease_prefix, name, holders.mode == 'cluster')
    local h = redis.call('HMGET', lk, 'session', 'token', 'queued')
    if h[1] == sid then
      if string.find(name, '~', 1, true) then end_hold(lk, name, lease_prefix, holders, sid)
      else hand_off(lk, lk .. ':queue', name, holders, h[2], h[3], true, sid) end
    end
  end
end
-- Where the session of an acquire is found alive in this slot (holder: its session key, or its
-- shadow here; see the acquire script): the ms it has left (own) and how long its lease set lives
-- (keep); or nil and the reply: 'expired' (gone), 'stale' (mode 'cluster': a renewal already closed
-- the registration the call carries) or 'moved' (the pulse the client renews for this slot's node is
-- unreadable here: its slot table is behind a resharding, it refreshes it and tries again).
local function session_here(holders, holder, registration, home_remaining, pulse, margin)
  if holders.mode == 'node' then
    local own = redis.call('PTTL', holder)
    if own == -2 then return nil, 'expired' end
    return own, own
  end
  local seq = tonumber(registration)
  local st = redis.call('HMGET', holder, 'gen', 'closed')
  if st[2] and tonumber(st[2]) >= seq then return nil, 'stale' end
  local own = tonumber(home_remaining)
  if not rely_on(holder, pulse, own) then return nil, 'moved' end
  if not st[1] or tonumber(st[1]) < seq then redis.call('HSET', holder, 'gen', seq) end
  -- The shadow outlives the home by the margin: the fallback where its pulse cannot be read.
  return own, extend(holder, own + tonumber(margin))
end
-- Grant lease lk to sid (whose session has own ms left, its set keep ms) unless a live session holds
-- it or it is reserved for another live waiter; a refused sid joins the queue q. Answers as the reply
-- of the acquire script; a 'granted' or 'held' answer carries a 3rd element 1 when it restored a
-- lease hash deleted by hand from its holder record. A new grant reserves a block of tokens
-- (its token is the block's last; the 4th element of the answer says how many). In mode 'node' a
-- refused sid tells a holder that caches the lease, on its channel ('wanted:<name>').
local function acquire(lk, q, set, sid, name, own, keep, holders, block)
  local h = redis.call('HMGET', lk, 'session', 'token', 'reserved', 'reservedUntil', 'queued', 'cached')
  local now, us = server_time()
  if h[1] == sid then
    hold(lk, set, name, sid, h[2], now, own, keep, false, nil)
    return {'granted', h[2]}
  end
  -- A read-write lock with readers or waiters: the writer takes its turn in the pool's queue.
  if redis.call('EXISTS', lk .. ':pool') == 1 then
    local write = acquire_write(lk, name, sid, own, keep, holders, block)
    if write then return write end
  end
  -- A free hash that exists has an expiry (freed, or made by wait_in), which a grant removes.
  local exists = h[2] or h[3] or h[5]
  local stored = h[2]
  if h[1] then
    local left = holder_left(holders, h[1])
    if left ~= -2 then
      wait_in(lk, q, sid, now, own, h[5], true, holders)
      if h[6] and holders.mode == 'node' then
        redis.call('PUBLISH', holder_key(holders, h[1]), 'wanted:' .. name)
      end
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
      hold(lk, set, name, sid, rtok, now, own, keep, exists, nil)
      return {'granted', rtok, 1}
    end
    local left = rsid and holder_left(holders, rsid) or -2
    if left ~= -2 then
      -- The hash was deleted by hand while rsid holds the lease: it still does.
      local key = holder_key(holders, rsid)
      restore(lk, rsid, rtok, now + left)
      redis.call('SADD', key .. ':leases', name)
      extend(key .. ':leases', redis.call('PTTL', key))
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
  local token = next_token(stored, us, block - 1)
  if head then
    redis.call('ZREM', q, sid)
    if h[3] then redis.call('HDEL', lk, 'reserved', 'reservedUntil') end
  end
  hold(lk, set, name, sid, token, now, own, keep, exists, block > 1)
  bump(holders, holder_key(holders, sid))
  if block > 1 then return {'granted', token, 0, block} end
  return {'granted', token}
end
-- The items of a comma-separated list (a renewal's slots travel as one argument: one string to write
-- instead of two per slot).
local function split_list(list)
  local items = {}
  for item in string.gmatch(list, '[^,]+') do items[#items + 1] = item end
  return items
end
-- The unchanged case of a renewal, for many slots of the node this script runs on (mode 'cluster',
-- scripts flagged allow-cross-slot-keys): for each 'tag, known' pair of slots, when sid's shadow
-- there is on this node with lease-set version known (the same non-empty set the client read: every
-- change bumps it) relying on pulse (the one this call renews), extends the shadow and its set to at
-- least keep ms (the home's time left and the margin, see renewSlots). A shadow relying on another
-- pulse (its slot moved here from another node) is answered back: its renewSlot points it at this one. Answers the (1-based) pairs
-- it did not renew: a shadow missing or changed, or on a slot this node does not serve (resharding:
-- the access is an error redis.pcall returns, and nothing of that slot is written).
local function renew_unchanged(slots, sid, shadow_base, keep, pulse)
  local others = {}
  local function lasts(key)
    return redis.call('PEXPIRE', key, keep, 'GT') == 1 or redis.call('EXISTS', key) == 1
  end
  for i = 1, #slots, 2 do
    local shadow = shadow_base .. slots[i] .. '}:' .. sid
    local s = redis.pcall('HMGET', shadow, 'ver', 'pulse')
    if not (s[1] == slots[i + 1] and s[2] == pulse and lasts(shadow) and lasts(shadow .. ':leases')) then
      others[#others + 1] = (i + 1) / 2
    end
  end
  return others
end
-- A renewal of sid's shadow in one slot (mode 'cluster') registered as registration there: extends
-- it and its lease set to at least keep ms, pointed at pulse (extended for rem ms), and answers its
-- leases (0: still at version known, which '' never is), the registration to forget ('': none) and
-- the version of its set. A shadow left with no lease and no wait is closed at its last
-- registration; a missing one (lost, or its first grant still on the way) at the one the client
-- knows. now: the server ms, or 0 to read it when needed. Nil, and nothing read or written, when this
-- node does not serve the shadow's slot (scripts flagged allow-cross-slot-keys reaching another slot:
-- the access is an error redis.pcall returns).
local function renew_shadow(shadow, sid, rem, keep, pulse, lease_prefix, registration, known, now)
  local shadow_leases = shadow .. ':leases'
  local exists = redis.pcall('EXISTS', shadow)
  if type(exists) ~= 'number' then return nil end
  if exists == 0 then
    redis.call('HSET', shadow, 'closed', registration)
    redis.call('PEXPIRE', shadow, rem)
    return {}, registration, ''
  end
  rely_on(shadow, pulse, rem)
  extend(shadow, keep)
  extend(shadow_leases, keep)
  local version = redis.call('HGET', shadow, 'ver') or ''
  if known ~= '' and version == known and redis.call('SCARD', shadow_leases) > 0 then return 0, '', version end
  if now == 0 then now = now_ms() end
  local leases, pruned = held_leases(shadow_leases, sid, lease_prefix, now + rem, true)
  if pruned > 0 or version == '' then version = bump_shadow(shadow, true) end
  local prune = ''
  -- A shadow waiting in a pool's queue ('waits', see pool_wait) stays open: a hand-off grants into it.
  if #leases == 0 and tonumber(redis.call('HGET', shadow, 'waits') or '0') <= 0 then
    prune = redis.call('HGET', shadow, 'gen') or '0'
    redis.call('HSET', shadow, 'closed', prune)
  end
  return leases, prune, version
end
-- Renews sid's membership of the groups named in group_names (comma-separated; names have no comma)
-- on the node this script runs on, for rem ms (mode 'cluster', scripts flagged
-- allow-cross-slot-keys): the {group, members} views of those it is still a member of.
local function renew_groups(group_names, sid, group_prefix, rem)
  local views = {}
  if group_names == '' then return views end
  local now = now_ms()
  for g in string.gmatch(group_names, '[^,]+') do
    local view = group_view(group_prefix .. g .. '}', sid, now, rem)
    if view then views[#views + 1] = {g, view} end
  end
  return views
end
-- Mode 'cluster': extends the session's pulse (a key the call declares, so this node serves it) to at
-- least rem ms, or makes it (the session's home lives: this call comes after its renewal), and
-- answers its count of lease-set changes ('b:n', see beat): a pulse made anew (the node lost its
-- state) has another 'b', so the client sees a changed count and lists the session's leases again.
local function renew_pulse(pulse, rem)
  beat(pulse, rem)
  local c = redis.call('HMGET', pulse, 'b', 'n')
  return c[1] .. ':' .. c[2]
end
-- Renews the home of a session (mode 'cluster') for ttl ms: {'live', its ms left, its value (the
-- number of its last slot registration), its registered slots unless that number is still known_seq
-- (0: unchanged), its groups}; nil when the session is gone.
local function renew_home(ttl, known_seq, home, home_slots, home_groups)
  local rem = renew(tonumber(ttl), home, home_slots, home_groups)
  if not rem then return nil end
  local seq = redis.call('GET', home)
  local listed = 0
  if seq ~= known_seq then listed = redis.call('HGETALL', home_slots) end
  return {'live', rem, seq, listed, redis.call('SMEMBERS', home_groups)}
end
`

/**
 * One top-level statement of the prelude: what it defines (a function or a constant; `undefined` for a
 * statement every script runs) and its text, with the comment lines just above it.
 */
interface Definition {
  readonly name: string | undefined
  readonly text: string
  /** The prelude names its code (comments left out) mentions. */
  readonly mentions: ReadonlySet<string>
}

const identifiers = (lua: string): Set<string> =>
  // No string literal of the prelude holds "--" (a test checks), so a comment is "--" to the line's end.
  new Set(lua.replace(/--.*$/gm, "").match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? [])

/** The prelude as its top-level statements, in order (a statement starts at column 0; `end` closes one). */
const definitions: ReadonlyArray<Definition> = (() => {
  const blocks: Array<{ name: string | undefined; lines: Array<string> }> = []
  let comments: Array<string> = []
  for (const line of prelude.split("\n")) {
    if (line.startsWith("--")) comments.push(line)
    else if (/^[a-z]/.test(line) && line !== "end") {
      const name = /^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)/.exec(line)?.[1]
      blocks.push({ name, lines: [...comments, line] })
      comments = []
    } else if (line.trim() !== "" || blocks.length > 0) blocks[blocks.length - 1]?.lines.push(line)
  }
  const names = new Set(blocks.flatMap((block) => block.name === undefined ? [] : [block.name]))
  return blocks.map(({ lines, name }) => {
    const text = lines.join("\n")
    const mentions = new Set([...identifiers(text)].filter((id) => names.has(id) && id !== name))
    return { name, text, mentions }
  })
})()

/**
 * The part of the prelude a script whose own code is `code` runs: the definitions it mentions, and
 * theirs, in the prelude's order. Running a definition costs the server time on every call (the whole
 * prelude is ~20 µs a call), so a script defines only what it can call.
 */
export const preludeFor = (code: string): string => {
  const needed = new Set<string>()
  const visit = (names: Iterable<string>): void => {
    for (const name of names) {
      if (needed.has(name)) continue
      const definition = definitions.find((d) => d.name === name)
      if (definition === undefined) continue
      needed.add(name)
      visit(definition.mentions)
    }
  }
  visit(identifiers(code))
  return definitions.filter((d) => d.name === undefined || needed.has(d.name)).map((d) => d.text).join("\n")
}

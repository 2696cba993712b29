/**
 * The session's own scripts in mode `node` (every key on one server): renewing or closing a session
 * reads and writes its key, its lease set, its groups and their leases in one script. `open` serves
 * both modes (in mode `cluster` it creates the home).
 */
import * as Replies from "../replies.js"
import { define } from "./define.js"

/**
 * Creates the session key (never an existing one) with `ttl` ms to live. Its value counts: in mode
 * `node` the versions of the session's lease set, in mode `cluster` the slot registrations.
 */
export const open = define("open", { keys: ["home"], args: ["ttl"], reply: Replies.Opened }, `
if not redis.call('SET', home, '0', 'PX', ttl, 'NX') then return {'exists'} end
return {'ok', redis.call('PTTL', home)}
`)

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
local leases, pruned = held_leases(homeLeases, sessionId, leasePrefix, now + rem, false)
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

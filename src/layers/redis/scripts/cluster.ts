/**
 * The session's scripts in mode `cluster`: the home (session key, registered slots, groups) lives in
 * one slot and each lease slot holds a shadow of the session, so a renewal or a close is one script
 * on the home and one per registered slot, each touching one slot only.
 */
import * as Replies from "../replies.js"
import { define } from "./define.js"

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

/**
 * Renews the home; answers the number of its last slot registration (the home's value, counting
 * every change of its slots), its registered slots unless that number is still `knownSeq` (`0`:
 * unchanged), and its groups.
 */
export const renewHome = define("renewHome", {
  keys: ["home", "homeSlots", "homeGroups"],
  args: ["ttl", "knownSeq"],
  reply: Replies.HomeRenewed
}, `
return renew_home(ttl, knownSeq, home, homeSlots, homeGroups) or {'expired'}
`)

/**
 * `renewHome`, then `renewSlots` for the home's own pulse (`homePulse`, in the home's slot) with the
 * home's time left, in one call: a renewal's call to the node of the session's home. Answers what
 * `renewHome` answers, then what `renewSlots` answers after its pulse count.
 */
export const renewHomeSlots = define("renewHomeSlots", {
  keys: ["home", "homeSlots", "homeGroups", "homePulse"],
  args: ["ttl", "knownSeq", "sessionId", "margin", "shadowBase", "groupPrefix", "groupNames", "slotList"],
  reply: Replies.HomeSlotsRenewed,
  flags: ["allow-cross-slot-keys"]
}, `
local reply = renew_home(ttl, knownSeq, home, homeSlots, homeGroups)
if not reply then return {'expired'} end
local rem = reply[2]
reply[6] = renew_unchanged(split_list(slotList), sessionId, shadowBase, rem + tonumber(margin), homePulse)
reply[7] = renew_groups(groupNames, sessionId, groupPrefix, rem)
reply[8] = renew_pulse(homePulse, rem)
return reply
`)

/**
 * Renews the session's shadow in one slot (when `registration` is not `""`) for `remaining` ms and
 * the `margin` (it names `pulse` from then on, which it extends for `remaining` ms or makes, when
 * this node serves it) and its memberships of the groups of that slot (`groups`, named `groupNames`)
 * for `remaining` ms; answers the version of its lease set there and, unless that is still `known`
 * (`""`: none known), what it holds there (`0`: still `known`, no lease read). A shadow left with no
 * lease is closed at its last registration, answered for the home to forget (`forgetSlots`).
 */
export const renewSlot = define("renewSlot", {
  keys: ["shadow", "shadowLeases"],
  restKeys: "groups",
  args: ["sessionId", "remaining", "margin", "pulse", "leasePrefix", "registration", "known"],
  restArgs: "groupNames",
  reply: Replies.SlotRenewed,
  flags: ["allow-cross-slot-keys"]
}, `
local rem = tonumber(remaining)
local now = #groups > 0 and now_ms() or 0
local leases, prune, version = {}, '', ''
if registration ~= '' then
  leases, prune, version = renew_shadow(shadow, sessionId, rem, rem + tonumber(margin), pulse, leasePrefix, registration, known, now)
end
local views = {}
for i, gk in ipairs(groups) do
  local view = group_view(gk, sessionId, now, rem)
  if view then views[#views + 1] = {groupNames[i], view} end
end
return {leases, views, prune, version}
`)

/**
 * A renewal's call to one node other than the home's: extends the session's `pulse` there for
 * `remaining` ms (or makes it) and answers its count of lease-set changes; for each `tag,known` pair of
 * `slotList` (comma-separated, one argument: a slice of the slots that rely on it, see docs/design.md), when the session's shadow there
 * is on this node with lease-set version `known` and relies on `pulse`, extends the shadow and its set to `remaining` +
 * `margin` ms (never shortening either); and renews the session's memberships of the groups
 * `groupNames` (comma-separated) of this node. Answers the count, the (1-based) pairs it did not
 * renew, for `renewSlot` to handle one by one (see `renew_unchanged` in the prelude), and the views of
 * the groups. The pulse routes the call to its node; a group key this node does not serve fails it.
 */
export const renewSlots = define("renewSlots", {
  keys: ["pulse"],
  args: ["sessionId", "remaining", "margin", "shadowBase", "groupPrefix", "groupNames", "slotList"],
  reply: Replies.SlotsRenewed,
  flags: ["allow-cross-slot-keys"]
}, `
local rem = tonumber(remaining)
local count = renew_pulse(pulse, rem)
return {count, renew_unchanged(split_list(slotList), sessionId, shadowBase, rem + tonumber(margin), pulse), renew_groups(groupNames, sessionId, groupPrefix, rem)}
`)

/**
 * `renewSlot` for many slots of the node `pulse` is on, their groups left out: for each
 * `tag,registration,known` triple of `slotList` (comma-separated, one argument; `known` may be empty),
 * renews the session's shadow in that slot pointed at `pulse` and answers what `renewSlot` answers
 * for it without the groups (`{leases, prune, version}`), or `moved` for a slot this node does not
 * serve (resharding: nothing of that slot is read or written), which the client sends as a
 * `renewSlot` of its own. A renewal's slots whose lease sets it lists (its first one, or one that
 * found a change) go by node in a few such calls, not one call per slot.
 */
export const renewShadows = define("renewShadows", {
  keys: ["pulse"],
  args: ["sessionId", "remaining", "margin", "shadowBase", "leasePrefix", "slotList"],
  reply: Replies.ShadowsRenewed,
  flags: ["allow-cross-slot-keys"]
}, `
local rem = tonumber(remaining)
local keep = rem + tonumber(margin)
local answers = {}
for tag, registration, known in string.gmatch(slotList .. ',', '([^,]*),([^,]*),([^,]*),') do
  local shadow = shadowBase .. tag .. '}:' .. sessionId
  local leases, prune, version = renew_shadow(shadow, sessionId, rem, keep, pulse, leasePrefix, registration, known, 0)
  answers[#answers + 1] = leases == nil and 'moved' or {leases, prune, version}
end
return answers
`)

/**
 * Forgets the slots whose registration is still the one a renewal closed: `tag, registration, ...`;
 * counts the change in the home's value, as a registration does.
 */
export const forgetSlots = define("forgetSlots", {
  keys: ["home", "homeSlots"],
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
if n > 0 then redis.call('INCR', home) end
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
  reply: Replies.Count,
  flags: ["allow-cross-slot-keys"]
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

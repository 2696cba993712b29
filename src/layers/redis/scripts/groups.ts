/**
 * Group membership. In mode `node` joining and leaving are one script each (session keys and group
 * on one server); in mode `cluster` they are split into the home's half (`joinHome`, `forgetGroup`)
 * and the group's half (`addMember`, `removeMember`), each in its own slot.
 */
import * as Replies from "../replies.js"
import { define } from "./define.js"

/** The live members of a group. */
export const members = define("members", { keys: ["group"], args: [], reply: Replies.Members }, `
return live_members(group, now_ms())
`)

// -------------------------------------------------------------------------------------------------
// Mode `node`
// -------------------------------------------------------------------------------------------------

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
// Mode `cluster`
// -------------------------------------------------------------------------------------------------

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

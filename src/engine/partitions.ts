// Partition groups: joining, the members' view, the partitions this client owns (each an election of
// `elections.ts`, started or stopped as the view changes) and leaving. A group's leave is finished by
// `maybeFinishLeave` (`finish.ts`) once its elections are gone.
import { partitionName } from "../LeaseName.js"
import * as PartitionAssignment from "../PartitionAssignment.js"
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import {
  addGroup,
  arm,
  call,
  complete,
  disarm,
  edit,
  failed,
  joinKey,
  nextId,
  ok,
  publish,
  random,
  type Mutable,
  type Step
} from "./context.js"
import { beginStop, newElection, sessionLost, tryAcquire } from "./elections.js"
import { maybeFinishLeave } from "./finish.js"
import type { Event, GroupState, Request, Response } from "./types.js"

export const join = (s: Step, ev: Extract<Event, { _tag: "Join" }>): void => {
  if (s.closing !== undefined) return complete(s, ev.completion, { _tag: "Closed" })
  if (Array.from(s.groups.values()).some((g) => g.group === ev.group)) {
    return complete(s, ev.completion, { _tag: "AlreadyStarted", name: ev.group })
  }
  const g: Mutable<GroupState> = {
    handle: ev.handle,
    group: ev.group,
    partitions: ev.partitions,
    joined: false,
    joining: undefined,
    listing: undefined,
    members: [],
    owned: [],
    ownedBy: undefined,
    leaving: false,
    waiters: []
  }
  addGroup(s, g)
  complete(s, ev.completion, ok)
  joinGroup(s, g)
}

export const joinGroup = (s: Step, g: Mutable<GroupState>): void => {
  if (g.joining !== undefined || g.leaving || s.session.status !== "LIVE" || s.session.id === undefined) return
  disarm(s, joinKey(g.handle))
  g.joining = call(s, { _tag: "Join", sessionId: s.session.id, group: g.group })
}

export const listMembers = (s: Step, g: Mutable<GroupState>): void => {
  if (g.listing !== undefined || !g.joined || g.leaving) return
  g.listing = call(s, { _tag: "Members", group: g.group })
}

export const onJoined = (s: Step, requestId: number, request: Extract<Request, { _tag: "Join" }>, response: Response): void => {
  const g = Array.from(s.groups.values()).find((x) => x.joining === requestId)
  if (g === undefined) return
  g.joining = undefined
  if (response._tag === "Joined") {
    g.joined = true
    return listMembers(s, g)
  }
  if (response._tag === "Expired") {
    if (request.sessionId === s.session.id) sessionLost(s, "SESSION_EXPIRED")
    return
  }
  failed(s, "join", response._tag === "Failed" ? response.error : response._tag)
  arm(s, joinKey(g.handle), s.now + Session.candidateRetry(s.timing, random(s)))
}

export const onMembers = (s: Step, requestId: number, response: Response): void => {
  const g = Array.from(s.groups.values()).find((x) => x.listing === requestId)
  if (g === undefined) return
  g.listing = undefined
  if (response._tag === "MemberList") return applyView(s, g, response.members)
  failed(s, "members", response._tag === "Failed" ? response.error : response._tag)
}

export const reconcileGroups = (
  s: Step,
  views: ReadonlyArray<{ readonly group: string; readonly members: ReadonlyArray<string> }>
): void => {
  const byGroup = new Map(views.map((v) => [v.group, v.members]))
  for (const g of s.groups.values()) {
    if (g.leaving || !g.joined) continue
    const members = byGroup.get(g.group)
    if (members === undefined) {
      // The backend no longer lists us as a member: join again.
      g.joined = false
      joinGroup(s, g)
    } else {
      applyView(s, g, members)
    }
  }
}

export const sameList = <A>(a: ReadonlyArray<A>, b: ReadonlyArray<A>): boolean =>
  a.length === b.length && a.every((x, i) => x === b[i])

/** A new view of the group: lead the partitions we win, hand over the ones we lose. */
export const applyView = (s: Step, g: Mutable<GroupState>, view: ReadonlyArray<string>): void => {
  const me = s.session.id
  if (me === undefined || g.leaving) return
  const members = [...new Set(view.includes(me) ? view : [...view, me])].sort()
  const membersChanged = !sameList(members, g.members)
  // The assignment is a function of the members and of us: every renewal reply carries the view, and
  // recomputing 10,000 partitions' owners for an unchanged one cost more than the renewal.
  const owned = !membersChanged && g.ownedBy === me ? g.owned : PartitionAssignment.owned(g.partitions, members, me)
  const ownedChanged = !sameList(owned, g.owned)
  g.members = members
  g.owned = owned
  g.ownedBy = me
  if (membersChanged) publish(s, SimbaEvent.GroupView({ group: g.group, members }))
  if (!membersChanged && !ownedChanged) return
  if (ownedChanged) publish(s, SimbaEvent.PartitionsAssigned({ group: g.group, partitions: owned }))
  s.commands.push({ _tag: "Members", handle: g.handle, group: g.group, members, owned })
  const mine = new Set(owned)
  // The handle of the group's election of each partition (the first in election order, as a search finds it).
  const elected = new Map<number, number>()
  for (const e of Array.from(s.elections.values())) {
    if (e.group !== g.group || e.partition === undefined) continue
    if (!mine.has(e.partition)) beginStop(s, edit(s, e), "stop", "STOPPED")
    if (!elected.has(e.partition)) elected.set(e.partition, e.handle)
  }
  for (const partition of owned) {
    const handle = elected.get(partition)
    const existing = handle === undefined ? undefined : s.elections.get(handle)
    if (existing !== undefined) {
      // Regained while handing it over: once the handover ends, compete again instead of stopping.
      if (existing.status === "HANDOVER") edit(s, existing).afterHandover = "cooldown"
      continue
    }
    const e = newElection(s, {
      // Shell handles are positive; the engine numbers the partition elections it creates negatively.
      handle: -nextId(s),
      name: partitionName(g.group, partition),
      kind: "partition",
      group: g.group,
      partition,
      hasWork: true,
      tryCompletion: undefined,
      refusal: undefined
    })
    publish(s, SimbaEvent.StatusChanged({ name: e.name, status: "CANDIDATE" }))
    tryAcquire(s, e)
  }
}

export const leave = (s: Step, handle: number, completion: number | undefined): void => {
  const g = s.groups.get(handle)
  if (g === undefined) return completion === undefined ? undefined : complete(s, completion, ok)
  if (completion !== undefined) g.waiters = [...g.waiters, completion]
  if (g.leaving) return
  g.leaving = true
  disarm(s, joinKey(g.handle))
  for (const e of Array.from(s.elections.values())) {
    if (e.group === g.group) beginStop(s, edit(s, e), "stop", "STOPPED")
  }
  maybeFinishLeave(s, g)
}

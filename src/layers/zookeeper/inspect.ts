/**
 * `inspect` for the ZooKeeper backend: what the store holds, read on the backend's watcher session in
 * two round trips (the children of `{root}/leases` and `{root}/groups`, then each lease node's `Stat`
 * and each group's children), without watches, so it changes nothing and fires no hints.
 *
 * What ZooKeeper can tell: a lease's holder is its ephemeral node's owner and its token the node's
 * `czxid` (as `acquire` answers); a group's members are its member nodes, named by session id. A free
 * lease has no node (deleted on release), so it is not listed. There is no queue of waiters (a waiting
 * session only watches the node), so `waiters` is always empty. Sessions are those this backend opened
 * and still has, plus every session owning a lease or member node (an ephemeral node lives exactly as
 * long as its session); a session that owns no node and was opened by another process is not seen.
 * Their `remaining` is `undefined`: no read of ZooKeeper's tells a session's expiry.
 */
import * as Effect from "effect/Effect"
import { BackendError, type GroupView, type Inventory, type LeaseStatus, type SessionStatus } from "../../LeaseBackend.js"
import { Rc, type Stat } from "./driver.js"
import type { Settings } from "./options.js"
import { type Paths, pipeline, type Reply, type Session, tokenOf } from "./session.js"

type Children = ReadonlyArray<string> | null

const operation = "inspect"

const failure = (reply: Reply<unknown>): BackendError =>
  new BackendError({ backend: "zookeeper", operation, cause: new Error(`${reply.rc} ${reply.message}`) })

/** The names a children read lists: none when the parent is missing (nothing created under it yet). */
const childrenOf = (read: Reply<Children>): Effect.Effect<ReadonlyArray<string>, BackendError> =>
  read.rc === Rc.noNode
    ? Effect.succeed([])
    : read.rc === Rc.ok && Array.isArray(read.value)
    ? Effect.succeed(read.value)
    : Effect.fail(failure(read))

const isStat = (value: Stat | Children | undefined): value is Stat =>
  value !== undefined && value !== null && "czxid" in value

/**
 * The store's `inspect`: `watcher` is the backend's own session (as for `members`), `sessions` the
 * sessions this backend opened. Any order: `LeaseBackend.make` sorts.
 */
export const makeInspect = (
  settings: Settings,
  paths: Paths,
  watcher: Effect.Effect<Session, BackendError>,
  sessions: ReadonlyMap<string, Session>
): Effect.Effect<Inventory, BackendError> =>
  Effect.gen(function*() {
    const session = yield* watcher
    if (!session.connected) {
      return yield* Effect.fail(new BackendError({ backend: "zookeeper", operation, cause: "connection to ZooKeeper lost (reconnecting)" }))
    }
    const children = (path: string) => (done: (rc: number, message: string, value: Children) => void) =>
      session.handle.a_get_children(path, false, done)
    const [leaseList, groupList] = yield* pipeline<Children>([children(settings.leasesPath), children(settings.groupsPath)])
    const names = yield* childrenOf(leaseList!)
    const groupNames = yield* childrenOf(groupList!)
    // The lease nodes' stats, then the groups' children, in one pipeline: one round trip.
    const reads = yield* pipeline<Stat | Children>([
      ...names.map((name) => (done: (rc: number, message: string, value: Stat | null) => void) =>
        session.handle.a_exists(paths.lease(name), false, done)
      ),
      ...groupNames.map((group) => children(paths.group(group)))
    ])

    const seen = new Set<string>()
    for (const own of sessions.values()) if (!own.ended) seen.add(own.id)
    const leases: Array<LeaseStatus> = []
    for (const [i, name] of names.entries()) {
      const read = reads[i]!
      // Released between the two reads: free, so not listed.
      if (read.rc === Rc.noNode) continue
      const stat = read.value
      if (read.rc !== Rc.ok || !isStat(stat)) return yield* Effect.fail(failure(read))
      const token = tokenOf(operation, stat)
      if (typeof token !== "bigint") return yield* Effect.fail(token)
      // Owner "0": a persistent node, not made by this backend (its lease nodes are ephemeral), so no
      // session holds it; listed, so an operator sees what blocks the name.
      const owner = stat.ephemeralOwner
      const holder = owner === "0" ? undefined : owner
      if (holder !== undefined) seen.add(holder)
      leases.push({ name, holder, token, waiters: [] })
    }
    const groups: Array<GroupView> = []
    for (const [i, group] of groupNames.entries()) {
      // A group node outlives its members: only groups with live members are listed.
      const read = reads[names.length + i]!
      const members = yield* childrenOf({ ...read, value: isStat(read.value) ? undefined : read.value })
      if (members.length === 0) continue
      for (const member of members) seen.add(member)
      groups.push({ group, members })
    }
    const listed: Array<SessionStatus> = Array.from(seen, (sessionId) => ({ sessionId, remaining: undefined }))
    return { sessions: listed, leases, groups }
  })

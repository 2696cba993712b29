/**
 * The model backend of the simulation: the LeaseBackend SPI semantics (SPEC section 7) reduced to a
 * few maps, deciding with the simulation's *true* time (the backend's clock runs at rate 1).
 *
 * - sessions expire `granted` ms after their last renewal, lazily, silently (like a Redis key);
 * - an expired or closed session is gone for good (`Expired` to keepAlive, acquire and join);
 * - session ids are never reused; tokens of a name only rise, forever (release keeps the counter);
 * - acquire by the holder is idempotent (same token), `HeldBy` says how long the holder has left;
 * - releases with a stale token or by another session are no-ops;
 * - an acquire that asks to `reserve` tokens gets a block of at most `maxBlock` (its token the last),
 *   and a session refused while the holder's grant has a block tells the holder (`Wanted`);
 * - `Withdraw` takes the session out of the name's waiter queue (a no-op when it does not wait);
 * - `Released` / `Granted` / `GroupChanged` hints are returned to the caller (the scheduler decides
 *   delivery); with `handOff`, a release or close grants the lease to the first live waiter.
 *
 * - semaphores and read-write locks (the pool rule of `src/layers/memory/pools.ts`, reduced): a hold
 *   name (`LeaseName.holdName`) is a lease of its own whose grant follows its pool's strict FIFO queue,
 *   with tokens from the pool name's counter; a plain acquire of a name whose pool lives is its
 *   writer; another kind or limit is answered `Conflict`; every change of a pool grants its queue's
 *   head while it fits, with a `Granted` hint (also after a silent expiry: delivered with the next
 *   reply, as a store's next call that looks would push it).
 *
 * Two backend-side faults exist only here: `forceExpire` (the server ends a session early, e.g. an
 * operator or a ZooKeeper session killed) and `loseLease` (a lease disappears from a live session, e.g.
 * a failover losing a write). Neither can be made safe by any client; the checker exempts their
 * victims from the overlap check and instead checks that the victim reacts on its next reply.
 */
import type * as Engine from "../../src/Engine.js"
import * as LeaseName from "../../src/LeaseName.js"

export interface ModelOptions {
  /** The longest ttl the backend grants (ZooKeeper caps session timeouts); `Infinity` for none. */
  readonly maxTtl: number
  /** Whether `HeldBy` carries the holder's remaining time. */
  readonly heldByRemaining: boolean
  /**
   * FIFO hand-off as the Redis backend does on one node: a refused acquire queues the session, and a
   * release (or close) grants the lease straight to the first live waiter with a `Granted` hint.
   */
  readonly handOff: boolean
}

interface ModelSession {
  readonly id: string
  expiresAt: number
  readonly leases: Set<string>
  /** Bumped on every change of `leases`; a renewal naming it is answered without the list. */
  version: number
  readonly groups: Set<string>
}

interface ModelLease {
  holder: string | undefined
  token: bigint
  /** The holder's grant reserved a block (its client may cache the lease). */
  cached: boolean
}

/** The largest block the model grants: small, so that caching clients use blocks up and ask again. */
export const maxBlock = 3

interface PoolWaiter {
  readonly name: string
  readonly session: string
  readonly mode: "permits" | "read" | "write"
  readonly weight: number
}

interface ModelPool {
  readonly kind: "semaphore" | "rw"
  readonly limit: number
  /** Hold name -> weight. */
  readonly holds: Map<string, number>
  readonly queue: Array<PoolWaiter>
}

const describePool = (kind: ModelPool["kind"], limit: number): string =>
  kind === "semaphore" ? `semaphore of ${limit} permits` : "read-write lock"

export interface ApplyResult {
  readonly response: Engine.Response
  readonly hints: ReadonlyArray<Engine.HintEvent>
}

export class ModelBackend {
  private readonly sessions = new Map<string, ModelSession>()
  private readonly leases = new Map<string, ModelLease>()
  private readonly groups = new Map<string, Set<string>>()
  /** Waiters per lease name, in order of their first refusal (`handOff` only). */
  private readonly waiters = new Map<string, Array<string>>()
  private issued = 0
  private readonly pools = new Map<string, ModelPool>()
  /** Pool grants made while sessions expired silently: pushed with the next reply. */
  private deferred: Array<Engine.HintEvent> = []

  constructor(readonly options: ModelOptions) {}

  /** Drops every session whose expiry is at or before `now` (silently, as the memory backend does). */
  expire(now: number): ReadonlyArray<string> {
    const gone: Array<string> = []
    for (const session of Array.from(this.sessions.values())) {
      if (session.expiresAt <= now) {
        for (const hint of this.drop(session)) if (hint._tag === "Granted") this.deferred.push(hint)
        gone.push(session.id)
      }
    }
    return gone
  }

  private drop(session: ModelSession, handOff = false): Array<Engine.HintEvent> {
    const hints: Array<Engine.HintEvent> = []
    this.sessions.delete(session.id)
    for (const name of session.leases) {
      const lease = this.leases.get(name)
      const pool = this.poolOfHeld(name)
      if (lease !== undefined && lease.holder === session.id && pool !== undefined) {
        hints.push(...this.endHeld(name, lease, pool))
      } else if (lease !== undefined && lease.holder === session.id) {
        lease.holder = undefined
        hints.push(handOff ? this.handOff(name, lease) : { _tag: "Released", name })
      } else {
        hints.push({ _tag: "Released", name })
      }
    }
    for (const [poolName, pool] of this.pools) {
      if (pool.queue.some((w) => w.session === session.id)) {
        pool.queue.splice(0, pool.queue.length, ...pool.queue.filter((w) => w.session !== session.id))
        hints.push(...this.serve(poolName))
      }
    }
    for (const group of session.groups) {
      const members = this.groups.get(group)
      members?.delete(session.id)
      if (members !== undefined && members.size === 0) this.groups.delete(group)
      hints.push({ _tag: "GroupChanged", group })
    }
    return hints
  }

  /** The free lease goes to its first live waiter (`Granted`), or is announced `Released`. */
  private handOff(name: string, lease: ModelLease): Engine.HintEvent {
    const queue = this.waiters.get(name) ?? []
    while (queue.length > 0 && !this.sessions.has(queue[0]!)) queue.shift()
    const head = queue.shift()
    if (!this.options.handOff || head === undefined) return { _tag: "Released", name }
    lease.holder = head
    lease.token += 1n
    lease.cached = false
    this.holds(head, name, true)
    return { _tag: "Granted", name, to: head, token: lease.token }
  }

  /** Adds (or removes) `name` to the leases of `sessionId`, bumping its version. */
  private holds(sessionId: string, name: string, held: boolean): void {
    const session = this.sessions.get(sessionId)
    if (session === undefined) return
    if (held) session.leases.add(name)
    else session.leases.delete(name)
    session.version += 1
  }

  private wait(name: string, sessionId: string): void {
    if (!this.options.handOff) return
    const queue = this.waiters.get(name) ?? []
    if (!queue.includes(sessionId)) queue.push(sessionId)
    this.waiters.set(name, queue)
  }

  private stopWaiting(name: string, sessionId: string): void {
    const queue = this.waiters.get(name)
    if (queue === undefined) return
    const at = queue.indexOf(sessionId)
    if (at !== -1) queue.splice(at, 1)
  }

  // -------------------------------------------------------------------------------------------------
  // Pools
  // -------------------------------------------------------------------------------------------------

  /** The pool a held lease `name` belongs to: a hold's, or a writer's (a plain name whose pool lives). */
  private poolOfHeld(name: string): string | undefined {
    const hold = LeaseName.parseHold(name)
    if (hold !== undefined) return hold.pool
    return this.pools.has(name) ? name : undefined
  }

  private writerHolds(poolName: string): boolean {
    return this.leases.get(poolName)?.holder !== undefined
  }

  private fits(poolName: string, pool: ModelPool, waiter: Pick<PoolWaiter, "mode" | "weight">): boolean {
    let used = 0
    for (const weight of pool.holds.values()) used += weight
    switch (waiter.mode) {
      case "permits":
        return used + waiter.weight <= pool.limit
      case "read":
        return !this.writerHolds(poolName)
      case "write":
        return pool.holds.size === 0 && !this.writerHolds(poolName)
    }
  }

  private savePool(poolName: string, pool: ModelPool): void {
    if (pool.holds.size === 0 && pool.queue.length === 0) this.pools.delete(poolName)
    else this.pools.set(poolName, pool)
  }

  /** Grants `waiter` the pool name's next token: a hold, or (a writer) the plain lease itself. */
  private grantPool(poolName: string, pool: ModelPool, waiter: PoolWaiter): bigint {
    const counter = this.leases.get(poolName)
    const token = (counter?.token ?? 0n) + 1n
    if (waiter.mode === "write") {
      this.leases.set(poolName, { holder: waiter.session, token, cached: false })
    } else {
      this.leases.set(poolName, { holder: counter?.holder, token, cached: false })
      this.leases.set(waiter.name, { holder: waiter.session, token, cached: false })
      pool.holds.set(waiter.name, waiter.weight)
    }
    this.holds(waiter.session, waiter.name, true)
    this.stopWaiting(waiter.name, waiter.session)
    return token
  }

  /** Grants the queue's head while it fits, dropping waiters whose session is gone. */
  private serve(poolName: string): Array<Engine.HintEvent> {
    const pool = this.pools.get(poolName)
    if (pool === undefined) return []
    const live = pool.queue.filter((w) => this.sessions.has(w.session))
    pool.queue.splice(0, pool.queue.length, ...live)
    const hints: Array<Engine.HintEvent> = []
    while (pool.queue.length > 0 && this.fits(poolName, pool, pool.queue[0]!)) {
      const head = pool.queue.shift()!
      // A hold name granted meanwhile to another session of its client (see `Acquire`): taken.
      if (head.mode !== "write" && this.leases.get(head.name)?.holder !== undefined) continue
      hints.push({ _tag: "Granted", name: head.name, to: head.session, token: this.grantPool(poolName, pool, head) })
    }
    this.savePool(poolName, pool)
    return hints
  }

  /** A held hold or writer lease ends (released, its session gone, lost): free it, serve its pool. */
  private endHeld(name: string, lease: ModelLease, poolName: string): Array<Engine.HintEvent> {
    lease.holder = undefined
    if (name !== poolName) {
      this.leases.delete(name)
      this.pools.get(poolName)?.holds.delete(name)
    }
    return this.serve(poolName)
  }

  /** A request of a hold, or of a writer: granted when nobody waits before it and it fits, else queued. */
  private enterPool(poolName: string, waiter: PoolWaiter, kind: ModelPool["kind"], limit: number): Engine.Response {
    const existing = this.pools.get(poolName)
    const asked = waiter.mode === "write" ? "lock" : describePool(kind, limit)
    if (existing !== undefined && (waiter.mode === "write" ? existing.kind !== "rw" : existing.kind !== kind || existing.limit !== limit)) {
      return { _tag: "Conflict", held: describePool(existing.kind, existing.limit), asked }
    }
    if (existing === undefined && kind === "semaphore" && this.writerHolds(poolName)) return { _tag: "Conflict", held: "lock", asked }
    const pool: ModelPool = existing ?? { kind, limit, holds: new Map(), queue: [] }
    const at = pool.queue.findIndex((w) => w.name === waiter.name && w.session === waiter.session)
    if ((pool.queue.length === 0 || at === 0) && this.fits(poolName, pool, waiter)) {
      if (at === 0) pool.queue.shift()
      const token = this.grantPool(poolName, pool, waiter)
      this.savePool(poolName, pool)
      return { _tag: "Granted", token }
    }
    if (at < 0) pool.queue.push(waiter)
    this.savePool(poolName, pool)
    return { _tag: "HeldBy", token: this.leases.get(poolName)?.token, remaining: undefined }
  }

  private grant(ttl: number): number {
    return Math.min(ttl, this.options.maxTtl)
  }

  private membersOf(group: string): Array<string> {
    return Array.from(this.groups.get(group) ?? []).sort()
  }

  /** Performs one request at true time `now`, as one atomic step after lazy expiry. */
  apply(request: Engine.Request, now: number): ApplyResult {
    this.expire(now)
    const result = this.applyLive(request, now)
    if (this.deferred.length === 0) return result
    const hints = [...this.deferred, ...result.hints]
    this.deferred = []
    return { response: result.response, hints }
  }

  private applyLive(request: Engine.Request, now: number): ApplyResult {
    switch (request._tag) {
      case "OpenSession": {
        const id = `s${++this.issued}`
        const granted = this.grant(request.ttl)
        this.sessions.set(id, { id, expiresAt: now + granted, leases: new Set(), version: 0, groups: new Set() })
        return { response: { _tag: "Opened", sessionId: id, remaining: granted }, hints: [] }
      }
      case "KeepAlive": {
        const session = this.sessions.get(request.sessionId)
        if (session === undefined) return { response: { _tag: "Expired" }, hints: [] }
        const granted = this.grant(request.ttl)
        session.expiresAt = now + granted
        const version = String(session.version)
        const leases = request.known === version ? undefined : Array.from(session.leases).sort().map((name) => ({
          name,
          token: this.leases.get(name)!.token
        }))
        const groups = Array.from(session.groups).sort().map((group) => ({ group, members: this.membersOf(group) }))
        return { response: { _tag: "Live", remaining: granted, version, leases, groups }, hints: [] }
      }
      case "CloseSession": {
        const session = this.sessions.get(request.sessionId)
        return { response: { _tag: "Done" }, hints: session === undefined ? [] : this.drop(session, true) }
      }
      case "Acquire": {
        const session = this.sessions.get(request.sessionId)
        if (session === undefined) return { response: { _tag: "Expired" }, hints: [] }
        const lease = this.leases.get(request.name)
        const hold = LeaseName.parseHold(request.name)
        if (hold !== undefined && lease?.holder !== undefined && lease.holder !== session.id) {
          // The same request again from a new session of its client, while the session it abandoned
          // still holds it: the name is taken, as any lease's (never two holders of one name).
          const holder = this.sessions.get(lease.holder)!
          return {
            response: { _tag: "HeldBy", token: lease.token, remaining: this.options.heldByRemaining ? holder.expiresAt - now : undefined },
            hints: []
          }
        }
        if (hold !== undefined && lease?.holder !== session.id) {
          const hints = this.serve(hold.pool)
          const waiter: PoolWaiter = { name: request.name, session: session.id, mode: hold.mode, weight: hold.weight }
          return { response: this.enterPool(hold.pool, waiter, hold.mode === "read" ? "rw" : "semaphore", hold.limit), hints }
        }
        if (this.pools.has(request.name) && lease?.holder !== session.id) {
          const hints = this.serve(request.name)
          if (this.pools.has(request.name)) {
            const waiter: PoolWaiter = { name: request.name, session: session.id, mode: "write", weight: 1 }
            return { response: this.enterPool(request.name, waiter, "rw", 0), hints }
          }
          const after = this.applyLive(request, now)
          return { response: after.response, hints: [...hints, ...after.hints] }
        }
        if (lease !== undefined && lease.holder !== undefined) {
          if (lease.holder === session.id) {
            this.stopWaiting(request.name, session.id)
            return { response: { _tag: "Granted", token: lease.token }, hints: [] }
          }
          const holder = this.sessions.get(lease.holder)!
          this.wait(request.name, session.id)
          return {
            response: {
              _tag: "HeldBy",
              token: lease.token,
              remaining: this.options.heldByRemaining ? holder.expiresAt - now : undefined
            },
            hints: lease.cached ? [{ _tag: "Wanted", name: request.name, holder: holder.id }] : []
          }
        }
        const reserved = Math.min(request.reserve ?? 1, maxBlock)
        const token = (lease?.token ?? 0n) + BigInt(reserved)
        this.leases.set(request.name, { holder: session.id, token, cached: reserved > 1 })
        this.holds(session.id, request.name, true)
        this.stopWaiting(request.name, session.id)
        return { response: reserved > 1 ? { _tag: "Granted", token, reserved } : { _tag: "Granted", token }, hints: [] }
      }
      case "Release": {
        const lease = this.leases.get(request.name)
        if (lease === undefined || lease.holder !== request.sessionId || lease.token !== request.token) {
          return { response: { _tag: "Done" }, hints: [] }
        }
        this.holds(request.sessionId, request.name, false)
        const pool = this.poolOfHeld(request.name)
        if (pool !== undefined) return { response: { _tag: "Done" }, hints: this.endHeld(request.name, lease, pool) }
        lease.holder = undefined
        return { response: { _tag: "Done" }, hints: [this.handOff(request.name, lease)] }
      }
      case "Withdraw": {
        this.stopWaiting(request.name, request.sessionId)
        const poolName = LeaseName.poolOf(request.name)
        const pool = this.pools.get(poolName)
        const at = pool?.queue.findIndex((w) => w.name === request.name && w.session === request.sessionId) ?? -1
        if (pool === undefined || at < 0) return { response: { _tag: "Done" }, hints: [] }
        pool.queue.splice(at, 1)
        return { response: { _tag: "Done" }, hints: this.serve(poolName) }
      }
      case "Join": {
        const session = this.sessions.get(request.sessionId)
        if (session === undefined) return { response: { _tag: "Expired" }, hints: [] }
        if (session.groups.has(request.group)) return { response: { _tag: "Joined" }, hints: [] }
        session.groups.add(request.group)
        const members = this.groups.get(request.group) ?? new Set<string>()
        members.add(session.id)
        this.groups.set(request.group, members)
        return { response: { _tag: "Joined" }, hints: [{ _tag: "GroupChanged", group: request.group }] }
      }
      case "Leave": {
        const session = this.sessions.get(request.sessionId)
        if (session === undefined || !session.groups.has(request.group)) return { response: { _tag: "Done" }, hints: [] }
        session.groups.delete(request.group)
        const members = this.groups.get(request.group)
        members?.delete(session.id)
        if (members !== undefined && members.size === 0) this.groups.delete(request.group)
        return { response: { _tag: "Done" }, hints: [{ _tag: "GroupChanged", group: request.group }] }
      }
      case "Members":
        return { response: { _tag: "MemberList", members: this.membersOf(request.group) }, hints: [] }
    }
  }

  // -------------------------------------------------------------------------------------------------
  // Backend-side faults and views for the checker
  // -------------------------------------------------------------------------------------------------

  /** Live session ids at `now` (after lazy expiry). */
  liveSessions(now: number): ReadonlyArray<string> {
    this.expire(now)
    return Array.from(this.sessions.keys())
  }

  /** The server ends a live session early. Returns the hints and what the session held. */
  forceExpire(sessionId: string, now: number): { hints: ReadonlyArray<Engine.HintEvent>; leases: Array<{ name: string; token: bigint }> } {
    this.expire(now)
    const session = this.sessions.get(sessionId)
    if (session === undefined) return { hints: [], leases: [] }
    const leases = Array.from(session.leases, (name) => ({ name, token: this.leases.get(name)!.token }))
    return { hints: this.drop(session), leases }
  }

  /** Held leases at `now`: name → holder session and token. */
  heldLeases(now: number): ReadonlyArray<{ name: string; holder: string; token: bigint }> {
    this.expire(now)
    const out: Array<{ name: string; holder: string; token: bigint }> = []
    for (const [name, lease] of this.leases) {
      if (lease.holder !== undefined) out.push({ name, holder: lease.holder, token: lease.token })
    }
    return out
  }

  /** A lease vanishes from its live holder (failover lost the write). */
  loseLease(name: string, now: number): { holder: string; token: bigint; hints: ReadonlyArray<Engine.HintEvent> } | undefined {
    this.expire(now)
    const lease = this.leases.get(name)
    if (lease === undefined || lease.holder === undefined) return undefined
    const holder = lease.holder
    const token = lease.token
    this.holds(holder, name, false)
    const pool = this.poolOfHeld(name)
    if (pool !== undefined) return { holder, token, hints: this.endHeld(name, lease, pool) }
    lease.holder = undefined
    return { holder, token, hints: [{ _tag: "Released", name }] }
  }
}

/** The in-memory store's state: one immutable value, replaced by each call (`../Memory.ts`). */
import type * as Duration from "effect/Duration"
import * as DurationValue from "effect/Duration"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import type { Hint } from "../../LeaseBackend.js"

export interface Session {
  /** Backend-clock instant (milliseconds) at which the session expires unless renewed. */
  readonly expiresAt: number
  readonly leases: HashSet.HashSet<string>
  /** Bumped on every change of `leases`: a renewal that names it gets no lease list back. */
  readonly version: number
  readonly groups: HashSet.HashSet<string>
}

export interface Lease {
  /** The live session holding the lease, or `undefined` when it is free. */
  readonly holder: string | undefined
  /** The last token granted for this name: the holder's token, and the floor for the next grant. */
  readonly token: bigint
  /** The holder's grant reserved a block of tokens (its client may cache the lease): tell it when wanted. */
  readonly cached?: boolean | undefined
}

/** A session waiting in a pool's queue for `name` (a hold's name, or the pool's own for a writer). */
export interface Waiter {
  readonly name: string
  readonly session: string
  readonly mode: "write" | "read" | "permits"
  readonly weight: number
}

/**
 * A semaphore, or a read-write lock with readers or a queue, while it has holders or waiters: its
 * kind and limit, the holds granted (each also a lease in `leases`), and the FIFO queue.
 */
export interface Pool {
  readonly kind: "rw" | "semaphore"
  /** A semaphore's permits in all (0 for a read-write lock). */
  readonly limit: number
  /** Hold name -> its weight. */
  readonly holds: HashMap.HashMap<string, number>
  readonly queue: ReadonlyArray<Waiter>
}

export interface State {
  /** Every session id ever issued: checked so no id is ever handed out twice. */
  readonly issued: HashSet.HashSet<string>
  readonly sessions: HashMap.HashMap<string, Session>
  /** Never shrinks (holds excepted): a free lease keeps its token so the next grant is larger. */
  readonly leases: HashMap.HashMap<string, Lease>
  /** Live members per group; a group with no members is removed. */
  readonly groups: HashMap.HashMap<string, HashSet.HashSet<string>>
  /** Pools by name (the semaphore's or the read-write lock's). */
  readonly pools: HashMap.HashMap<string, Pool>
}

/** One call's outcome: the reply, the new state, and the hints to push. */
export type Step<A> = readonly [reply: A, state: State, hints: ReadonlyArray<Hint>]

export const empty: State = {
  issued: HashSet.empty(),
  sessions: HashMap.empty(),
  leases: HashMap.empty(),
  groups: HashMap.empty(),
  pools: HashMap.empty()
}

export const remainingOf = (session: Session, now: number): Duration.Duration =>
  DurationValue.millis(session.expiresAt - now)

export const updateSession = (state: State, sessionId: string, session: Session): State => ({
  ...state,
  sessions: HashMap.set(state.sessions, sessionId, session)
})

/** `sessionId` (live) now holds `name` with `token`. */
export const grantLease = (state: State, sessionId: string, session: Session, name: string, token: bigint, cached = false): State => ({
  ...updateSession(state, sessionId, {
    ...session,
    leases: HashSet.add(session.leases, name),
    version: session.version + 1
  }),
  leases: HashMap.set(state.leases, name, cached ? { holder: sessionId, token, cached } : { holder: sessionId, token })
})

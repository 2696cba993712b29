/**
 * The in-memory `LeaseBackend`: the whole SPI in process, for tests, demos and users' own tests.
 *
 * It behaves like a real server, so the client cannot tell the difference:
 * - all state lives in one `SynchronizedRef` and every call is one atomic, uninterruptible step, so
 *   concurrent fibers see the same serialised history a database would give them;
 * - time is the backend's own clock, `Clock.currentTimeMillis` read at each call, so `TestClock` drives
 *   expiry and every duration in a reply is measured on that clock. Milliseconds, not
 *   `currentTimeNanos`: `TestClock` turns a fractional-millisecond instant (reached by sleeps of
 *   `10 s / 7`) into nanoseconds with `BigInt(instant * 1e6)`, which throws when the product is not an
 *   integer. A wall
 *   clock is also what real servers decide with (Redis `TIME`, SQL `now()`);
 * - expiry is lazy: each call first drops every session whose last renewal is `ttl` or more in the
 *   past (no background fiber, nothing to schedule under `TestClock`). Like a Redis key running out,
 *   expiry is silent: it pushes no hint; candidates learn of it from `HeldBy.remaining` or their poll;
 * - an expired or closed session is gone for good: `keepAlive`, `acquire` and `join` answer `Expired`;
 * - session ids are random 128-bit values (32 lowercase hex) drawn from Effect's `Random`, checked
 *   against every id this backend ever issued (kept for the backend's lifetime, a few dozen bytes per
 *   session ever opened), so they never repeat even under a seeded or fixed `Random`;
 * - the token counter of a name survives release and expiry, so tokens only rise, forever.
 *
 * Several clients share one backend by providing the value `make` returns:
 * `Effect.provideService(LeaseBackend, backend)`.
 */
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import type * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Order from "effect/Order"
import * as SynchronizedRef from "effect/SynchronizedRef"
import type { SimbaConfigError } from "../Errors.js"
import { check, type DurationOption } from "../internal/options.js"
import { isSessionId, randomSessionId } from "../internal/sessionId.js"
import * as LeaseName from "../LeaseName.js"
import {
  AcquireReply,
  type HeldLease,
  Hint,
  type Inventory,
  type JoinReply,
  KeepAliveReply,
  LeaseBackend,
  type LeaseBackendService,
  make as makeBackend,
  makeHintHub,
  type OpenedSession
} from "../LeaseBackend.js"
import * as Pools from "./memory/pools.js"
import { empty, grantLease, type Lease, remainingOf, type Session, type State, type Step, updateSession } from "./memory/state.js"

/** The backend name used in errors, metrics and spans. */
export const backend = "memory"

/** Options of `make` / `layer`. */
export interface Options {
  /**
   * The longest session ttl the backend grants; a longer request is cut to it, as ZooKeeper caps
   * session timeouts. Lets a test exercise a backend that grants less than asked. Default: no cap.
   */
  readonly maxTtl?: DurationOption | undefined
}

const sortStrings = Arr.sort(Order.string)

/**
 * Removes `sessionId` and everything it holds; the hints say which leases were freed and groups
 * changed, and which waiters of its pools were granted what it held.
 */
const dropSession = (state: State, sessionId: string, session: Session): readonly [State, Array<Hint>] => {
  const hints: Array<Hint> = []
  let leases = state.leases
  const holds: Array<readonly [string, LeaseName.Hold]> = []
  for (const name of session.leases) {
    const hold = LeaseName.parseHold(name)
    if (hold !== undefined) {
      holds.push([name, hold])
      continue
    }
    leases = HashMap.modify(leases, name, (lease): Lease => ({ holder: undefined, token: lease.token }))
    hints.push(Hint.Released({ name }))
  }
  let groups = state.groups
  for (const group of session.groups) {
    groups = HashMap.modifyAt(groups, group, (members) =>
      Option.filter(Option.map(members, HashSet.remove(sessionId)), (set) => HashSet.size(set) > 0))
    hints.push(Hint.GroupChanged({ group }))
  }
  let next: State = { ...state, sessions: HashMap.remove(state.sessions, sessionId), leases, groups }
  for (const [name, hold] of holds) {
    const [ended, granted] = Pools.endHold(next, name, hold)
    next = ended
    hints.push(...granted)
  }
  for (const name of session.leases) {
    if (!HashMap.has(next.pools, name)) continue
    const [served, granted] = Pools.serve(next, name)
    next = served
    hints.push(...granted)
  }
  return [next, hints]
}

/** Drops every session that has expired by `now`, silently. */
const expire = (state: State, now: number): State => {
  let next = state
  for (const [sessionId, session] of state.sessions) {
    if (session.expiresAt <= now) next = dropSession(next, sessionId, session)[0]
  }
  return next
}

/** How many draws may collide with issued ids before the `Random` service is deemed broken. */
const maxIdDraws = 16

/**
 * Makes a backend. Each call makes an independent store; share the returned value between clients to
 * put them on the same store. Without options every ttl is granted as asked and nothing can fail.
 */
export function make(): Effect.Effect<LeaseBackendService>
export function make(options: Options): Effect.Effect<LeaseBackendService, SimbaConfigError>
export function make(options: Options = {}): Effect.Effect<LeaseBackendService, SimbaConfigError> {
  return Effect.flatMap(maxTtlOf(options), makeStore)
}

/** The `maxTtl` option in milliseconds (`Infinity` when absent), or the rule it breaks. */
const maxTtlOf = (options: Options): Effect.Effect<number, SimbaConfigError> =>
  Effect.flatMap(
    check(backend, options),
    (checks) => checks.duration("maxTtl", options.maxTtl, Infinity, { least: 0, strict: true })
  )

const makeStore = (maxTtl: number): Effect.Effect<LeaseBackendService> =>
  Effect.gen(function*() {
    const ref = yield* SynchronizedRef.make(empty)
    const hub = yield* makeHintHub()

    /** The ttl granted for a request of `ttl` milliseconds: as asked, cut to `maxTtl`. */
    const grant = (ttl: number): number => Math.min(ttl, maxTtl)

    /**
     * Runs one call as a single atomic step on the state, after dropping expired sessions, and pushes
     * its hints before the next call can start, so subscribers see hints in the order of the calls.
     */
    const transactEffect = <A, E>(
      f: (state: State, now: number) => Effect.Effect<Step<A>, E>
    ): Effect.Effect<A, E> =>
      SynchronizedRef.modifyEffect(ref, (state) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => f(expire(state, now), now)).pipe(
          Effect.tap(([, , hints]) => hints.length === 0 ? Effect.void : Effect.sync(() => hints.forEach(hub.emit))),
          Effect.map(([reply, next]) => [reply, next] as const)
        )).pipe(Effect.uninterruptible)

    const transact = <A>(f: (state: State, now: number) => Step<A>): Effect.Effect<A> =>
      transactEffect((state, now) => Effect.succeed(f(state, now)))

    const freshId = (state: State): Effect.Effect<string, string> =>
      Effect.gen(function*() {
        for (let draw = 0; draw < maxIdDraws; draw++) {
          const id = yield* randomSessionId
          if (!HashSet.has(state.issued, id)) return id
        }
        return yield* Effect.fail(`Random gave ${maxIdDraws} already issued session ids in a row`)
      })

    const openSession = (ttl: number): Effect.Effect<OpenedSession, string> => {
      const granted = grant(ttl)
      return transactEffect((state, now) =>
        Effect.map(freshId(state), (sessionId): Step<OpenedSession> => [
          { sessionId, remaining: Duration.millis(granted) },
          {
            ...updateSession(state, sessionId, {
              expiresAt: now + granted,
              leases: HashSet.empty(),
              version: 0,
              groups: HashSet.empty()
            }),
            issued: HashSet.add(state.issued, sessionId)
          },
          []
        ])
      )
    }

    const keepAlive = (sessionId: string, ttl: number, known: string | undefined): Effect.Effect<KeepAliveReply> => {
      const granted = grant(ttl)
      return transact((state, now): Step<KeepAliveReply> => {
        const session = HashMap.get(state.sessions, sessionId)
        if (Option.isNone(session)) return [KeepAliveReply.Expired(), state, []]
        const renewed: Session = { ...session.value, expiresAt: now + granted }
        const version = String(renewed.version)
        const leases = known === version ? undefined : sortStrings(renewed.leases).map((name): HeldLease => ({
          name,
          token: Option.getOrThrow(HashMap.get(state.leases, name)).token
        }))
        const groups = sortStrings(renewed.groups).map((group) => ({
          group,
          members: sortStrings(Option.getOrElse(HashMap.get(state.groups, group), HashSet.empty<string>))
        }))
        return [
          KeepAliveReply.Live({ remaining: Duration.millis(granted), version, leases, groups }),
          updateSession(state, sessionId, renewed),
          []
        ]
      })
    }

    const closeSession = (sessionId: string): Effect.Effect<void> =>
      transact((state): Step<void> => {
        const session = HashMap.get(state.sessions, sessionId)
        if (Option.isNone(session)) return [undefined, state, []]
        const [next, hints] = dropSession(state, sessionId, session.value)
        return [undefined, next, hints]
      })

    /**
     * A session asking again for a lease it already holds gets `Granted` with the same token: the
     * request is idempotent, so a retried acquire (lost reply, timeout) never forks a second token.
     * A new grant with `reserve` above one reserves that block (its token the block's last), and an
     * acquire refused while such a grant holds tells the holder (`Wanted`).
     */
    const acquire = (sessionId: string, name: string, reserve: number): Effect.Effect<AcquireReply> =>
      transact((state, now): Step<AcquireReply> => {
        const session = HashMap.get(state.sessions, sessionId)
        if (Option.isNone(session)) return [AcquireReply.Expired(), state, []]
        const hold = LeaseName.parseHold(name)
        if (hold !== undefined) return Pools.acquireHold(state, sessionId, session.value, name, hold, now)
        const lease = HashMap.get(state.leases, name)
        if (Option.isSome(lease) && lease.value.holder === sessionId) {
          return [AcquireReply.Granted({ token: lease.value.token }), state, []]
        }
        // A read-write lock with readers or waiters: the writer takes its turn in the pool's queue.
        const write = Pools.acquireWrite(state, sessionId, session.value, name)
        if (write !== undefined) return write
        if (Option.isSome(lease) && lease.value.holder !== undefined) {
          const { cached, holder, token } = lease.value
          const remaining = Option.map(HashMap.get(state.sessions, holder), (s) => remainingOf(s, now))
          const held = AcquireReply.HeldBy({ token, remaining: Option.getOrUndefined(remaining) })
          return [held, state, cached === true ? [Hint.Wanted({ name, holder })] : []]
        }
        const first = Option.match(lease, { onNone: () => 1n, onSome: (free) => free.token + 1n })
        const token = first + BigInt(reserve - 1)
        return [
          reserve > 1 ? AcquireReply.Granted({ token, reserved: reserve }) : AcquireReply.Granted({ token }),
          grantLease(state, sessionId, session.value, name, token, reserve > 1),
          []
        ]
      })

    const release = (sessionId: string, name: string, token: bigint): Effect.Effect<void> =>
      transact((state): Step<void> => {
        const lease = HashMap.get(state.leases, name)
        const session = HashMap.get(state.sessions, sessionId)
        if (
          Option.isNone(lease) || Option.isNone(session) ||
          lease.value.holder !== sessionId || lease.value.token !== token
        ) return [undefined, state, []]
        const dropped = updateSession(state, sessionId, {
          ...session.value,
          leases: HashSet.remove(session.value.leases, name),
          version: session.value.version + 1
        })
        const hold = LeaseName.parseHold(name)
        if (hold !== undefined) {
          const [ended, granted] = Pools.endHold(dropped, name, hold)
          return [undefined, ended, granted]
        }
        const freed: State = { ...dropped, leases: HashMap.set(state.leases, name, { holder: undefined, token }) }
        const [served, granted] = Pools.serve(freed, name)
        return [undefined, served, [Hint.Released({ name }), ...granted]]
      })

    /** Only a pool keeps a queue here: the session leaves it (a hold's, or a writer's place). */
    const withdraw = (sessionId: string, name: string): Effect.Effect<void> =>
      transact((state): Step<void> => {
        const [next, granted] = Pools.withdraw(state, sessionId, LeaseName.poolOf(name), name)
        return [undefined, next, granted]
      })

    const join = (sessionId: string, group: string): Effect.Effect<JoinReply> =>
      transact((state): Step<JoinReply> => {
        const session = HashMap.get(state.sessions, sessionId)
        if (Option.isNone(session)) return ["Expired", state, []]
        if (HashSet.has(session.value.groups, group)) return ["Joined", state, []]
        const members = Option.getOrElse(HashMap.get(state.groups, group), HashSet.empty<string>)
        return [
          "Joined",
          {
            ...updateSession(state, sessionId, { ...session.value, groups: HashSet.add(session.value.groups, group) }),
            groups: HashMap.set(state.groups, group, HashSet.add(members, sessionId))
          },
          [Hint.GroupChanged({ group })]
        ]
      })

    const leave = (sessionId: string, group: string): Effect.Effect<void> =>
      transact((state): Step<void> => {
        const session = HashMap.get(state.sessions, sessionId)
        if (Option.isNone(session) || !HashSet.has(session.value.groups, group)) return [undefined, state, []]
        return [
          undefined,
          {
            ...updateSession(state, sessionId, {
              ...session.value,
              groups: HashSet.remove(session.value.groups, group)
            }),
            groups: HashMap.modifyAt(state.groups, group, (members) =>
              Option.filter(Option.map(members, HashSet.remove(sessionId)), (set) => HashSet.size(set) > 0))
          },
          [Hint.GroupChanged({ group })]
        ]
      })

    const members = (group: string): Effect.Effect<ReadonlyArray<string>> =>
      transact((state): Step<ReadonlyArray<string>> => [
        sortStrings(Option.getOrElse(HashMap.get(state.groups, group), HashSet.empty<string>)),
        state,
        []
      ])

    const inspect: Effect.Effect<Inventory> = transact((state, now): Step<Inventory> => [
      {
        sessions: Array.from(state.sessions, ([sessionId, session]) => ({ sessionId, remaining: remainingOf(session, now) })),
        leases: Array.from(state.leases, ([name, lease]) => ({ name, holder: lease.holder, token: lease.token, waiters: [] })),
        groups: Array.from(state.groups, ([group, members]) => ({ group, members: Array.from(members) }))
      },
      state,
      []
    ])

    return makeBackend({
      backend,
      holds: true,
      isSessionId,
      openSession,
      keepAlive,
      closeSession,
      acquire,
      release,
      withdraw,
      join,
      leave,
      members,
      hints: hub.hints,
      inspect
    })
  })

/** Provides a fresh in-memory `LeaseBackend` made with `options` (by default: every ttl granted as asked). */
export const layer = (options: Options = {}): Layer.Layer<LeaseBackend, SimbaConfigError> =>
  Layer.effect(LeaseBackend, make(options))

/** Provides a fresh in-memory `LeaseBackend` with options read from `config`. */
export const layerConfig = (
  config: Config.Config<Options>
): Layer.Layer<LeaseBackend, ConfigError.ConfigError | SimbaConfigError> =>
  Layer.effect(LeaseBackend, Effect.flatMap(config, (options) => make(options)))

// The working copy of one step, the helpers every part of the engine emits commands with (a backend
// call, a timer, a publication, a completion), and the one way a step changes an election (`edit`,
// `addElection`, `deleteElection`: copied once, so a step costs what it touches). It knows no rule,
// only how a step records what it does, so every other module builds on it.
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import type { ElectionStatus } from "../SimbaEvent.js"
import type {
  CachedLease,
  Command,
  ElectionKind,
  ElectionState,
  GroupState,
  Outcome,
  Request,
  SessionState,
  State,
  TokenMemory
} from "./types.js"
import type { OrderedMap } from "./orderedMap.js"

export type Mutable<T> = { -readonly [K in keyof T]: T[K] }

declare const writable: unique symbol
/** An election this step may change: its own copy, made by `edit` (the type keeps a state's copy out). */
export type Writable<T> = Mutable<T> & { readonly [writable]: true }

/**
 * The working copy of one step: the input state is never mutated. The per-name and per-handle tables
 * are persistent maps, replaced (sharing structure) when a step changes them; an election a step
 * changes is copied once into `edited` (see `edit`), so a step costs what it touches.
 */
export interface Step {
  readonly now: number
  readonly timing: Session.Timing
  session: Mutable<SessionState>
  released: OrderedMap<string, bigint>
  tokens: OrderedMap<string, TokenMemory>
  idleNames: OrderedMap<string, true>
  elections: OrderedMap<number, ElectionState>
  /**
   * This step's copies of the elections it changed, by handle (removed ones included); made by the
   * first change (most steps of a busy client change one election or none).
   */
  edited: Map<number, Writable<ElectionState>> | undefined
  electionsByName: OrderedMap<string, ReadonlyArray<number>>
  groups: Map<number, Mutable<GroupState>>
  cached: OrderedMap<string, CachedLease>
  timers: OrderedMap<string, number>
  nextId: number
  rng: number
  closing: Array<number> | undefined
  closed: boolean
  readonly commands: Array<Command>
}

/** A map of shallow copies of the values (the step mutates its copies, never the input state). */
const copyEntries = <K, V extends object>(source: ReadonlyMap<K, V>): Map<K, Mutable<V>> => {
  const copy = new Map<K, Mutable<V>>()
  for (const [key, value] of source) copy.set(key, { ...value })
  return copy
}

/**
 * The groups of a state without any: shared by every step that starts with none, never written (a
 * step adds its first group through `addGroup`), so a client without partition groups copies no map.
 */
const noGroups: Map<number, Mutable<GroupState>> = new Map()

/** A step's working copy of the state's groups (`noGroups` when it has none). */
export const copyGroups = (groups: ReadonlyMap<number, GroupState>): Map<number, Mutable<GroupState>> =>
  groups.size === 0 ? noGroups : copyEntries(groups)

/** Adds a group to the step's copy (its own map from the first group on). */
export const addGroup = (s: Step, g: Mutable<GroupState>): void => {
  if (s.groups === noGroups) s.groups = new Map()
  s.groups.set(g.handle, g)
}

/** A copy of `e` with the shape `newElection` gives (a spread would make its own object shape). */
const copyElection = (e: ElectionState): Writable<ElectionState> => {
  // Typed as the state itself, so a field added to `ElectionState` and forgotten here does not compile.
  const copy: ElectionState = {
    handle: e.handle,
    name: e.name,
    kind: e.kind,
    group: e.group,
    partition: e.partition,
    hasWork: e.hasWork,
    status: e.status,
    attempt: e.attempt,
    hinted: e.hinted,
    seenToken: e.seenToken,
    queuedAs: e.queuedAs,
    term: e.term,
    cooldownUntil: e.cooldownUntil,
    afterHandover: e.afterHandover,
    waiters: e.waiters,
    tryCompletion: e.tryCompletion,
    refusal: e.refusal,
    keep: e.keep,
    wantedElsewhere: e.wantedElsewhere
  }
  return copy as Writable<ElectionState>
}

/**
 * The step's own copy of `e`, made on first use and put in `s.elections` (unless the step removed the
 * election: then the copy stays out). Every change to an election goes through it.
 */
export const edit = (s: Step, e: ElectionState): Writable<ElectionState> => {
  touch(s, e.name)
  const mine = s.edited?.get(e.handle)
  if (mine !== undefined) return mine
  const copy = copyElection(e)
  ;(s.edited ??= new Map()).set(e.handle, copy)
  s.elections = s.elections.set(e.handle, copy)
  return copy
}

/**
 * `name`'s elections or token memory (may) change: a renewal reply saying "unchanged" reconciles the
 * name again (see `LeaseView.unsettled`). Without a view there is nothing to record: the next reply
 * lists every lease, and all are reconciled.
 */
export const touch = (s: Step, name: string): void => {
  const view = s.session.leaseView
  if (view === undefined || view.unsettled.has(name)) return
  s.session.leaseView = { ...view, unsettled: view.unsettled.set(name, true) }
}

/** The newest version of `e` in this step (its copy if the step changed it, removed or not). */
export const latest = (s: Step, e: ElectionState): ElectionState => s.edited?.get(e.handle) ?? e

/**
 * The elections, as iterating a `Map` while the loop changes it would give them: each at its newest,
 * skipping those removed meanwhile (a loop never adds one).
 */
export function* liveElections(s: Step): Generator<ElectionState, undefined> {
  // Lazily, not a copy: a `find` over 10,000 elections stops at its match.
  for (const handle of s.elections.liveKeys()) {
    const e = s.elections.get(handle)
    if (e !== undefined) yield e
  }
  return undefined
}

/** The elections of `name` (of a step: each at its newest, skipping removed ones), in the order they started. */
export function* electionsNamed(
  tables: Pick<State, "elections" | "electionsByName">,
  name: string
): Generator<ElectionState, undefined> {
  for (const handle of tables.electionsByName.get(name) ?? []) {
    const e = tables.elections.get(handle)
    if (e !== undefined) yield e
  }
  return undefined
}

/** The first of `items` that satisfies `predicate`. */
export const find = <A>(items: Iterable<A>, predicate: (item: A) => boolean): A | undefined => {
  for (const item of items) if (predicate(item)) return item
  return undefined
}

/** Adds a new election (its own copy from the start). */
export const addElection = (s: Step, e: Writable<ElectionState>): void => {
  touch(s, e.name)
  ;(s.edited ??= new Map()).set(e.handle, e)
  s.elections = s.elections.set(e.handle, e)
  s.electionsByName = s.electionsByName.set(e.name, [...(s.electionsByName.get(e.name) ?? []), e.handle])
}

/**
 * Removes `e`. Its name's entry in `electionsByName` stays, empty, while the name keeps its token
 * memory (forgetting the memory deletes it, see `tokens.ts`): V8 chains a dead entry into a key's
 * bucket each time the key is deleted from a large `Map` and set again, until the table next grows,
 * so a lock name taken 1,000 times a second by a client of 10,000 elections made every lookup of it
 * walk thousands of them (engine bench: 5 µs per lookup). A hot name's entry now changes in place.
 */
export const deleteElection = (s: Step, e: ElectionState): void => {
  touch(s, e.name)
  s.elections = s.elections.delete(e.handle)
  const rest = (s.electionsByName.get(e.name) ?? []).filter((handle) => handle !== e.handle)
  s.electionsByName = rest.length === 0 && !s.tokens.has(e.name)
    ? s.electionsByName.delete(e.name)
    : s.electionsByName.set(e.name, rest)
}

export const nextId = (s: Step): number => s.nextId++

/** mulberry32: a tiny seeded generator, so jitter is data and replays are exact. */
export const random = (s: Step): number => {
  s.rng = (s.rng + 0x6d2b79f5) >>> 0
  let t = s.rng
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

export const call = (s: Step, request: Request): number => {
  const requestId = nextId(s)
  s.commands.push({ _tag: "Call", requestId, sentAt: s.now, timeout: s.session.every, request })
  return requestId
}

export const arm = (s: Step, key: string, at: number): void => {
  const id = nextId(s)
  s.timers = s.timers.set(key, id)
  s.commands.push({ _tag: "Arm", key, id, at: Math.max(at, s.now) })
}

export const disarm = (s: Step, key: string): void => {
  if (!s.timers.has(key)) return
  s.timers = s.timers.delete(key)
  s.commands.push({ _tag: "Disarm", key })
}

export const publish = (s: Step, event: SimbaEvent, kind?: ElectionKind): void => {
  s.commands.push(kind === undefined ? { _tag: "Publish", event } : { _tag: "Publish", event, kind })
}

export const complete = (s: Step, completion: number, outcome: Outcome): void => {
  s.commands.push({ _tag: "Complete", completion, outcome })
}

export const ok: Outcome = { _tag: "Ok" }
export const notAcquired: Outcome = { _tag: "NotAcquired" }

export const failed = (s: Step, operation: string, error: string): void =>
  publish(s, SimbaEvent.BackendFailed({ operation, error }))

export const setStatus = (s: Step, e: Writable<ElectionState>, status: ElectionStatus): void => {
  if (e.status === status) return
  e.status = status
  publish(s, SimbaEvent.StatusChanged({ name: e.name, status }))
}

export const retryKey = (handle: number) => `retry:${handle}`
export const cooldownKey = (handle: number) => `cooldown:${handle}`
export const handoverKey = (handle: number) => `handover:${handle}`
export const joinKey = (handle: number) => `join:${handle}`

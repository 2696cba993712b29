// The working copy of one step, and the helpers every part of the engine emits effects with.
import * as Session from "../Session.js"
import { SimbaEvent } from "../SimbaEvent.js"
import type { ElectionStatus } from "../SimbaEvent.js"
import type {
  Effect,
  ElectionKind,
  ElectionState,
  GroupState,
  Outcome,
  Request,
  SessionState,
  TokenMemory
} from "./types.js"

export type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/** The working copy of one step: the input state is never mutated. */
export interface Step {
  readonly now: number
  readonly timing: Session.Timing
  session: Mutable<SessionState>
  released: ReadonlyMap<string, bigint>
  releasedCopied: boolean
  tokens: ReadonlyMap<string, TokenMemory>
  idleNames: ReadonlyMap<string, true>
  /** Copy-on-write of `tokens` and `idleNames`: most steps touch neither. */
  tokensCopied: boolean
  elections: Map<number, Mutable<ElectionState>>
  groups: Map<number, Mutable<GroupState>>
  timers: Map<string, number>
  nextId: number
  rng: number
  closing: Array<number> | undefined
  closed: boolean
  readonly effects: Array<Effect>
}

/** A map of shallow copies of the values (the step mutates its copies, never the input state). */
export const copyEntries = <K, V extends object>(source: ReadonlyMap<K, V>): Map<K, Mutable<V>> => {
  const copy = new Map<K, Mutable<V>>()
  for (const [key, value] of source) copy.set(key, { ...value })
  return copy
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
  s.effects.push({ _tag: "Call", requestId, sentAt: s.now, timeout: s.session.every, request })
  return requestId
}

export const arm = (s: Step, key: string, at: number): void => {
  const id = nextId(s)
  s.timers.set(key, id)
  s.effects.push({ _tag: "Arm", key, id, at: Math.max(at, s.now) })
}

export const disarm = (s: Step, key: string): void => {
  if (s.timers.delete(key)) s.effects.push({ _tag: "Disarm", key })
}

export const publish = (s: Step, event: SimbaEvent, kind?: ElectionKind): void => {
  s.effects.push(kind === undefined ? { _tag: "Publish", event } : { _tag: "Publish", event, kind })
}

export const complete = (s: Step, completion: number, outcome: Outcome): void => {
  s.effects.push({ _tag: "Complete", completion, outcome })
}

export const ok: Outcome = { _tag: "Ok" }
export const notAcquired: Outcome = { _tag: "NotAcquired" }

export const failed = (s: Step, operation: string, error: string): void =>
  publish(s, SimbaEvent.BackendFailed({ operation, error }))

export const setStatus = (s: Step, e: Mutable<ElectionState>, status: ElectionStatus): void => {
  if (e.status === status) return
  e.status = status
  publish(s, SimbaEvent.StatusChanged({ name: e.name, status }))
}

export const retryKey = (handle: number) => `retry:${handle}`
export const cooldownKey = (handle: number) => `cooldown:${handle}`
export const handoverKey = (handle: number) => `handover:${handle}`
export const joinKey = (handle: number) => `join:${handle}`

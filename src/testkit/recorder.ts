/**
 * The leadership recorder: intervals of leadership per client and name, recorded from leader-only
 * work (`track`) or from a client's events (`watch`), and `checkNoOverlap`, which checks that no two
 * terms of a name overlapped in time (read holds excepted, and a semaphore's holds within its limit)
 * and that tokens rose. The check is a plain function, so it also
 * serves intervals a test gathered itself.
 */
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { SimbaClient } from "../Simba.js"
import type { SimbaEvent } from "../SimbaEvent.js"
import type { Term } from "../Term.js"

/** One period during which `client` acted as leader of `name` under the term with `token`. */
export interface LeaderInterval {
  readonly client: string
  readonly name: string
  readonly token: bigint
  /** `Clock` milliseconds. */
  readonly start: number
  /** `Clock` milliseconds; `undefined` while it lasts. */
  readonly end: number | undefined
  /**
   * A shared hold rather than a lock or a leadership: `permits` of a semaphore of `limit` (holds of
   * one name may overlap while they weigh at most `limit` together), or a read hold (`"read"`: read
   * holds may overlap one another, never an interval without `hold`, which is the write lock).
   */
  readonly hold?: SharedHold | undefined
}

/** What a recorded interval held, when not the name alone (see `LeaderInterval.hold`). */
export type SharedHold = { readonly permits: number; readonly limit: number } | "read"

/** A breach of single leadership found by `checkNoOverlap`. */
export type Violation = Data.TaggedEnum<{
  /** Two different terms of one name were both leading at some instant. */
  Overlap: { readonly name: string; readonly first: LeaderInterval; readonly second: LeaderInterval }
  /**
   * A later term of a name carried a token not above an earlier one's (one that ended before it
   * began), or two holds that overlapped carried the same token.
   */
  TokenNotIncreasing: { readonly name: string; readonly first: LeaderInterval; readonly second: LeaderInterval }
  /** The permits of a semaphore's holds that overlapped at `at` weighed more than its limit. */
  OverLimit: { readonly name: string; readonly at: number; readonly limit: number; readonly holds: ReadonlyArray<LeaderInterval> }
}>
export const Violation = Data.taggedEnum<Violation>()

const describeInterval = (i: LeaderInterval): string =>
  `${i.client}${
    i.hold === undefined ? "" : i.hold === "read" ? " (read)" : ` (${i.hold.permits} of ${i.hold.limit} permits)`
  } token ${i.token} [${i.start} ms, ${i.end === undefined ? "…" : `${i.end} ms`})`

/** A readable line per violation. */
export const formatViolation = (violation: Violation): string => {
  switch (violation._tag) {
    case "Overlap":
      return `${violation.name}: ${describeInterval(violation.first)} overlaps ${describeInterval(violation.second)}`
    case "TokenNotIncreasing":
      return `${violation.name}: ${describeInterval(violation.second)} follows ${
        describeInterval(violation.first)
      } without a higher token`
    case "OverLimit":
      return `${violation.name}: more than ${violation.limit} permits held at ${violation.at} ms: ${
        violation.holds.map(describeInterval).join(", ")
      }`
  }
}

const permitsOf = (interval: LeaderInterval): number | undefined =>
  interval.hold !== undefined && interval.hold !== "read" ? interval.hold.permits : undefined

/** Whether two intervals of one name may overlap: both read holds, or both a semaphore's permits. */
const mayShare = (a: LeaderInterval, b: LeaderInterval): boolean =>
  (a.hold === "read" && b.hold === "read") || (permitsOf(a) !== undefined && permitsOf(b) !== undefined)

/** Sweeps a semaphore's intervals: at each start, the permits of those open then against the limit. */
const overLimit = (name: string, list: ReadonlyArray<LeaderInterval>): Array<Violation> => {
  const shared = list.filter((i) => i.hold !== undefined && i.hold !== "read")
  const violations: Array<Violation> = []
  for (const at of new Set(shared.map((i) => i.start))) {
    const open = shared.filter((i) => i.start <= at && (i.end === undefined || i.end > at))
    const limit = Math.min(...open.map((i) => i.hold !== undefined && i.hold !== "read" ? i.hold.limit : Infinity))
    const held = open.reduce((sum, i) => sum + (permitsOf(i) ?? 0), 0)
    if (held > limit) violations.push(Violation.OverLimit({ name, at, limit, holds: open }))
  }
  return violations
}

/** Single leadership was breached. */
export class LeadershipViolation extends Data.TaggedError("LeadershipViolation")<{
  readonly violations: ReadonlyArray<Violation>
}> {
  override get message() {
    return `leadership violated:\n${this.violations.map(formatViolation).join("\n")}`
  }
}

/**
 * Checks intervals of leadership (yours, or a `recorder`'s): for each name, no two different terms
 * overlap in time (touching is fine: one may start at the instant the other ended), and in order of
 * start each new term carries a higher token. Intervals with the same name and token are one term
 * (a scheduled task runs many times per term). Holds (`LeaderInterval.hold`) relax the first rule as
 * they share: read holds may overlap one another, a semaphore's holds may overlap while their permits
 * stay within its limit; holds that overlap need only different tokens (two holders' bodies may start
 * in either order), and any term that began after another ended still needs a higher token.
 * Returns the violations, empty when all is well.
 */
export const checkNoOverlap = (intervals: Iterable<LeaderInterval>): ReadonlyArray<Violation> => {
  const byName = new Map<string, Array<LeaderInterval>>()
  for (const interval of intervals) {
    const list = byName.get(interval.name)
    if (list === undefined) byName.set(interval.name, [interval])
    else list.push(interval)
  }
  const violations: Array<Violation> = []
  for (const [name, list] of byName) {
    const sorted = [...list].sort((a, b) => a.start - b.start || (a.token < b.token ? -1 : a.token > b.token ? 1 : 0))
    for (let i = 0; i < sorted.length; i++) {
      const first = sorted[i]!
      for (let j = i + 1; j < sorted.length; j++) {
        const second = sorted[j]!
        const sameTerm = first.token === second.token && first.client === second.client
        if (sameTerm) continue
        const overlapping = first.end === undefined || first.end > second.start
        const shared = overlapping && mayShare(first, second)
        if (shared ? second.token === first.token : second.token <= first.token) {
          violations.push(Violation.TokenNotIncreasing({ name, first, second }))
        }
        if (overlapping && !shared) violations.push(Violation.Overlap({ name, first, second }))
      }
    }
    violations.push(...overLimit(name, list))
  }
  return violations
}

/** Records leadership per client, from terms, for `checkNoOverlap`. */
export interface LeaderRecorder {
  /**
   * Wraps leader-only work: each run is recorded from when it starts until it exits or its term is
   * revoked, whichever comes first. `client.runWhileLeader(name, recorder.track("a", work))`. A
   * semaphore's or read lock's body says what it holds: `client.withPermits(name, 2, recorder.track("a",
   * work, { permits: 2, limit: 3 }), { limit: 3 })`, `recorder.track("a", work, "read")`.
   */
  readonly track: <A, E, R>(
    client: string,
    work: (term: Term) => Effect.Effect<A, E, R>,
    hold?: SharedHold
  ) => (term: Term) => Effect.Effect<A, E, R>
  /**
   * Records every term a client wins, from its `Elected` event to its `Revoked` event, for as long as
   * the scope lasts. Call it before the client starts competing.
   */
  readonly watch: (client: string, simba: SimbaClient) => Effect.Effect<void, never, Scope.Scope>
  readonly intervals: Effect.Effect<ReadonlyArray<LeaderInterval>>
  /** The intervals of `name` still open (its current leader, if all is well). */
  readonly current: (name: string) => Effect.Effect<ReadonlyArray<LeaderInterval>>
  /** `checkNoOverlap` over everything recorded. */
  readonly violations: Effect.Effect<ReadonlyArray<Violation>>
  /** Fails with `LeadershipViolation` if `violations` is not empty. */
  readonly assertNoOverlap: Effect.Effect<void, LeadershipViolation>
}

/** A fresh recorder. Times come from `Clock`, so all clients must share one clock (one process, or `TestClock`). */
export const recorder: Effect.Effect<LeaderRecorder> = Effect.gen(function*() {
  const state = yield* Ref.make<ReadonlyArray<LeaderInterval>>([])
  const open = (client: string, name: string, token: bigint, hold?: SharedHold) =>
    Effect.flatMap(Clock.currentTimeMillis, (start) =>
      Ref.modify(state, (list) => [list.length, [...list, { client, name, token, start, end: undefined, hold }]]))
  const close = (index: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (end) =>
      Ref.update(state, (list) =>
        list.map((interval, i) => i === index && interval.end === undefined ? { ...interval, end } : interval)))
  const intervals = Ref.get(state)
  const violations = Effect.map(intervals, checkNoOverlap)

  const track = <A, E, R>(client: string, work: (term: Term) => Effect.Effect<A, E, R>, hold?: SharedHold) => (term: Term) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const index = yield* open(client, term.name, term.token, hold)
        const watcher = yield* Effect.forkDaemon(Effect.interruptible(Effect.flatMap(term.revoked, () => close(index))))
        return yield* restore(work(term)).pipe(
          Effect.ensuring(Effect.zipRight(close(index), Fiber.interrupt(watcher)))
        )
      })
    )

  const watch = (client: string, simba: SimbaClient): Effect.Effect<void, never, Scope.Scope> =>
    Effect.gen(function*() {
      const terms = new Map<string, number>()
      const onEvent = (event: SimbaEvent): Effect.Effect<void> => {
        switch (event._tag) {
          case "Elected":
            return Effect.map(open(client, event.name, event.token), (index) => {
              terms.set(`${event.name}\u0000${event.token}`, index)
            })
          case "Revoked": {
            const key = `${event.name}\u0000${event.token}`
            const index = terms.get(key)
            terms.delete(key)
            return index === undefined ? Effect.void : close(index)
          }
          default:
            return Effect.void
        }
      }
      yield* Effect.forkScoped(Stream.runForEach(simba.events, onEvent))
      // Let the subscriber fiber subscribe before the caller goes on.
      yield* Effect.repeatN(Effect.yieldNow(), 4)
    })

  return {
    track,
    watch,
    intervals,
    current: (name) => Effect.map(intervals, Arr.filter((i) => i.name === name && i.end === undefined)),
    violations,
    assertNoOverlap: Effect.flatMap(violations, (found) =>
      found.length === 0 ? Effect.void : Effect.fail(new LeadershipViolation({ violations: found })))
  }
})

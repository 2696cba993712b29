/**
 * The leadership recorder: intervals of leadership per client and name, recorded from leader-only
 * work (`track`) or from a client's events (`watch`), and `checkNoOverlap`, which checks that no two
 * terms of a name overlapped in time and that tokens rose. The check is a plain function, so it also
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
}

/** A breach of single leadership found by `checkNoOverlap`. */
export type Violation = Data.TaggedEnum<{
  /** Two different terms of one name were both leading at some instant. */
  Overlap: { readonly name: string; readonly first: LeaderInterval; readonly second: LeaderInterval }
  /** A later term of a name carried a token not above an earlier one's. */
  TokenNotIncreasing: { readonly name: string; readonly first: LeaderInterval; readonly second: LeaderInterval }
}>
export const Violation = Data.taggedEnum<Violation>()

const describeInterval = (i: LeaderInterval): string =>
  `${i.client} token ${i.token} [${i.start} ms, ${i.end === undefined ? "…" : `${i.end} ms`})`

/** A readable line per violation. */
export const formatViolation = (violation: Violation): string =>
  violation._tag === "Overlap"
    ? `${violation.name}: ${describeInterval(violation.first)} overlaps ${describeInterval(violation.second)}`
    : `${violation.name}: ${describeInterval(violation.second)} follows ${
      describeInterval(violation.first)
    } without a higher token`

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
 * (a scheduled task runs many times per term). Returns the violations, empty when all is well.
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
        if (second.token <= first.token) violations.push(Violation.TokenNotIncreasing({ name, first, second }))
        if (first.end === undefined || first.end > second.start) {
          violations.push(Violation.Overlap({ name, first, second }))
        }
      }
    }
  }
  return violations
}

/** Records leadership per client, from terms, for `checkNoOverlap`. */
export interface LeaderRecorder {
  /**
   * Wraps leader-only work: each run is recorded from when it starts until it exits or its term is
   * revoked, whichever comes first. `client.runWhileLeader(name, recorder.track("a", work))`.
   */
  readonly track: <A, E, R>(
    client: string,
    work: (term: Term) => Effect.Effect<A, E, R>
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
  const open = (client: string, name: string, token: bigint) =>
    Effect.flatMap(Clock.currentTimeMillis, (start) =>
      Ref.modify(state, (list) => [list.length, [...list, { client, name, token, start, end: undefined }]]))
  const close = (index: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (end) =>
      Ref.update(state, (list) =>
        list.map((interval, i) => i === index && interval.end === undefined ? { ...interval, end } : interval)))
  const intervals = Ref.get(state)
  const violations = Effect.map(intervals, checkNoOverlap)

  const track = <A, E, R>(client: string, work: (term: Term) => Effect.Effect<A, E, R>) => (term: Term) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const index = yield* open(client, term.name, term.token)
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

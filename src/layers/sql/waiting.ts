/**
 * The names a local candidate may be waiting on: every name an acquire through this backend was
 * refused, until it is granted, found free, or not asked for again within `forgetAfter` (a
 * candidate that gave up). Used to re-hint after the PostgreSQL `LISTEN` connection reconnects, and
 * as the list the MySQL poll checks.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"

export interface Waiting {
  /** An acquire of `name` was refused just now. */
  readonly refused: (name: string) => Effect.Effect<void>
  /** `name` was granted, or found free and hinted. */
  readonly forget: (name: string) => Effect.Effect<void>
  /** The names refused within `forgetAfter`, at most `max` of them; older ones are dropped. */
  readonly current: Effect.Effect<ReadonlyArray<string>>
  /** `current`, then forgets them all (they are hinted; a candidate still refused adds its name again). */
  readonly drain: Effect.Effect<ReadonlyArray<string>>
}

/** At most this many names are remembered (the others wait for their retry). */
export const max = 1_000

export const make = (forgetAfter: Duration.DurationInput = "1 minute"): Effect.Effect<Waiting> =>
  Effect.map(Ref.make<ReadonlyMap<string, number>>(new Map()), (ref) => {
    const horizon = Duration.toMillis(Duration.decode(forgetAfter))
    const current = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Ref.modify(ref, (names) => {
        const fresh = new Map([...names].filter(([, at]) => now - at < horizon))
        return [[...fresh.keys()], fresh.size === names.size ? names : fresh] as const
      }))
    return {
      refused: (name) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Ref.update(ref, (names) => names.size >= max && !names.has(name) ? names : new Map(names).set(name, now))),
      forget: (name) =>
        Ref.update(ref, (names) => {
          if (!names.has(name)) return names
          const next = new Map(names)
          next.delete(name)
          return next
        }),
      current,
      drain: Effect.zipLeft(current, Ref.set(ref, new Map()))
    }
  })

/**
 * `FencedStore`: a reference storage service guarded by fencing tokens, the other half of a fencing
 * test. It remembers every write, accepted or not, so a test can show that a stale leader's late
 * write was refused.
 */
import * as Arr from "effect/Array"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"

/** A write rejected by a `FencedStore`: its token is below one the store has already accepted. */
export class StaleTokenError extends Data.TaggedError("StaleTokenError")<{
  readonly token: bigint
  readonly highest: bigint
}> {
  override get message() {
    return `stale fencing token ${this.token}: the store has seen ${this.highest}`
  }
}

/** One write a `FencedStore` received. */
export interface FencedWrite<A> {
  readonly token: bigint
  readonly value: A
  readonly writer: string | undefined
  readonly accepted: boolean
  /** The highest token the store had accepted before this write. */
  readonly highestBefore: bigint
  /** When, in `Clock` milliseconds. */
  readonly at: number
}

/** A token, or anything carrying one (a `Term`). */
export type Fence = bigint | { readonly token: bigint }

/**
 * A reference storage service guarded by fencing tokens, as a database or object store would keep
 * it: a write is accepted only with a token at least as high as the highest it has accepted.
 */
export interface FencedStore<A> {
  /** Writes `value` if the token is not stale; answers whether it was accepted. */
  readonly write: (fence: Fence, value: A, writer?: string) => Effect.Effect<boolean>
  /** Like `write`, failing with `StaleTokenError` when rejected. */
  readonly writeOrFail: (fence: Fence, value: A, writer?: string) => Effect.Effect<void, StaleTokenError>
  /** The last accepted value. */
  readonly value: Effect.Effect<Option.Option<A>>
  /** The highest token accepted so far (0 before any write). */
  readonly highest: Effect.Effect<bigint>
  /** Every write, in order. */
  readonly writes: Effect.Effect<ReadonlyArray<FencedWrite<A>>>
  readonly accepted: Effect.Effect<ReadonlyArray<FencedWrite<A>>>
  readonly rejected: Effect.Effect<ReadonlyArray<FencedWrite<A>>>
}

const tokenOf = (fence: Fence): bigint => typeof fence === "bigint" ? fence : fence.token

const makeFencedStore = <A>(): Effect.Effect<FencedStore<A>> =>
  Effect.gen(function*() {
    const state = yield* Ref.make<{
      readonly highest: bigint
      readonly value: Option.Option<A>
      readonly writes: ReadonlyArray<FencedWrite<A>>
    }>({ highest: 0n, value: Option.none(), writes: [] })
    const write = (fence: Fence, value: A, writer?: string): Effect.Effect<FencedWrite<A>> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        Ref.modify(state, (s) => {
          const token = tokenOf(fence)
          const accepted = token >= s.highest
          const record: FencedWrite<A> = { token, value, writer, accepted, highestBefore: s.highest, at }
          return [record, {
            highest: accepted ? token : s.highest,
            value: accepted ? Option.some(value) : s.value,
            writes: [...s.writes, record]
          }]
        }))
    const writes = Effect.map(Ref.get(state), (s) => s.writes)
    return {
      write: (fence, value, writer) => Effect.map(write(fence, value, writer), (record) => record.accepted),
      writeOrFail: (fence, value, writer) =>
        Effect.flatMap(write(fence, value, writer), (record) =>
          record.accepted
            ? Effect.void
            : Effect.fail(new StaleTokenError({ token: record.token, highest: record.highestBefore }))),
      value: Effect.map(Ref.get(state), (s) => s.value),
      highest: Effect.map(Ref.get(state), (s) => s.highest),
      writes,
      accepted: Effect.map(writes, Arr.filter((w) => w.accepted)),
      rejected: Effect.map(writes, Arr.filter((w) => !w.accepted))
    }
  })

/** `SimbaTest.FencedStore.make<A>()` makes an empty store. */
export const FencedStore = { make: makeFencedStore }

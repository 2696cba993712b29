/**
 * Fencing, the driver-free core (docs/fencing.md). A term's token protects only a resource that checks
 * it: the resource remembers the highest token it has seen and refuses a write carrying a lower one, so
 * a holder paused past its lease (who cannot know it was paused) cannot overwrite a newer holder's work.
 *
 * This module holds what the resource helpers share: the `Fence` a caller passes (a token or a `Term`),
 * the errors, input validation, and `FenceStore`, the one-resource-at-a-time guard the HTTP middleware
 * runs requests through (`memoryStore` here; `FencedSql.store` keeps the fence in a database). The
 * helpers themselves are separate entry points, so importing one never loads another's driver:
 * `simba/fencing/sql` (`@effect/sql`), `simba/fencing/redis` (ioredis), `simba/fencing/http`
 * (`@effect/platform`).
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as SynchronizedRef from "effect/SynchronizedRef"

/** A fencing token, or anything carrying one (a `Term`). */
export type Fence = bigint | { readonly token: bigint }

/** The token of a fence. */
export const tokenOf = (fence: Fence): bigint => typeof fence === "bigint" ? fence : fence.token

/** The largest token the helpers accept: SQL `BIGINT` is a signed 64-bit integer. */
export const maxToken = 9_223_372_036_854_775_807n

/** A write refused by a fenced resource: a token higher than `token` has already been seen there. */
export class FencedWriteRejectedError extends Data.TaggedError("FencedWriteRejectedError")<{
  readonly resource: string
  readonly token: bigint
  readonly highest: bigint
}> {
  override get message() {
    return `fenced write to ${JSON.stringify(this.resource)} refused: token ${this.token} is below ${this.highest}, ` +
      `the highest this resource has seen (a newer term has written since)`
  }
}

/** A resource or token the helpers refuse before anything reaches the resource. */
export class InvalidFenceError extends Data.TaggedError("InvalidFenceError")<{
  readonly resource: string
  readonly token: bigint
  readonly rule: string
}> {
  override get message() {
    return `invalid fence ${JSON.stringify(this.resource)} = ${this.token}: ${this.rule}`
  }
}

/** A fenced store (Redis) failed or answered something unexpected; the write may or may not have applied. */
export class FencedStoreError extends Data.TaggedError("FencedStoreError")<{
  readonly resource: string
  readonly operation: string
  readonly cause: unknown
}> {
  override get message() {
    return `fenced ${this.operation} on ${JSON.stringify(this.resource)} failed: ${String(this.cause)}`
  }
}

/** The rule a token breaks, or `undefined`. */
export const brokenTokenRule = (token: bigint): string | undefined =>
  typeof token !== "bigint"
    ? "the token must be a bigint"
    : token <= 0n
    ? "the token must be positive"
    : token > maxToken
    ? `the token must be at most ${maxToken}`
    : undefined

/**
 * Checks `token` (positive, at most `maxToken`) and `resource` (1 to `maxLength` characters, each
 * matching `allowed` when given), answering the token.
 */
export const validate = (
  resource: string,
  fence: Fence,
  options?: { readonly maxLength?: number; readonly allowed?: RegExp; readonly allowedText?: string }
): Effect.Effect<bigint, InvalidFenceError> => {
  const token = tokenOf(fence)
  const maxLength = options?.maxLength ?? 255
  const rule = typeof resource !== "string" || resource.length === 0
    ? "the resource must be a non-empty string"
    : resource.length > maxLength
    ? `the resource must be at most ${maxLength} characters (got ${resource.length})`
    : options?.allowed !== undefined && !options.allowed.test(resource)
    ? `the resource may contain only ${options.allowedText ?? String(options.allowed)}`
    : brokenTokenRule(token)
  return rule === undefined
    ? Effect.succeed(token)
    : Effect.fail(new InvalidFenceError({ resource: String(resource), token, rule }))
}

/**
 * Where a service keeps the highest token seen per resource, and how it runs a fenced operation: the
 * check, the raise and the operation happen while no other fenced operation on that resource runs, so
 * two writers racing apply in token order or the older one is refused. `E`/`R`: the store's own errors
 * and needs (a database, say).
 */
export interface FenceStore<E = never, R = never> {
  readonly fenced: <A, E1, R1>(
    resource: string,
    token: bigint,
    operation: Effect.Effect<A, E1, R1>
  ) => Effect.Effect<A, E1 | E | FencedWriteRejectedError, R1 | R>
  /** The highest token accepted for `resource`, if any. */
  readonly highest: (resource: string) => Effect.Effect<Option.Option<bigint>, E, R>
}

interface MemoryEntry {
  readonly highest: Ref.Ref<bigint>
  readonly lock: Effect.Semaphore
}

/**
 * A `FenceStore` in this process's memory (one per call: give each server its own, or share one between
 * routes that guard the same resources). It remembers every resource it has seen, like a fence table;
 * it is lost on restart, which is safe only while tokens keep rising (they do: every new term's token is
 * above every earlier one).
 */
export const memoryStore: Effect.Effect<FenceStore> = Effect.map(
  SynchronizedRef.make(HashMap.empty<string, MemoryEntry>()),
  (entries): FenceStore => {
    const entry = (resource: string): Effect.Effect<MemoryEntry> =>
      SynchronizedRef.modifyEffect(entries, (map) =>
        Option.match(HashMap.get(map, resource), {
          onSome: (found) => Effect.succeed([found, map] as const),
          onNone: () =>
            Effect.map(
              Effect.all({ highest: Ref.make(0n), lock: Effect.makeSemaphore(1) }),
              (created) => [created, HashMap.set(map, resource, created)] as const
            )
        }))
    return {
      fenced: <A, E1, R1>(resource: string, token: bigint, operation: Effect.Effect<A, E1, R1>) =>
        Effect.flatMap(entry(resource), ({ highest, lock }) =>
          lock.withPermits(1)(
            Effect.flatMap(Ref.get(highest), (seen): Effect.Effect<A, E1 | FencedWriteRejectedError, R1> =>
              token < seen
                ? Effect.fail(new FencedWriteRejectedError({ resource, token, highest: seen }))
                : Effect.zipRight(Ref.set(highest, token), operation))
          )),
      highest: (resource) =>
        Effect.flatMap(SynchronizedRef.get(entries), (map) =>
          Option.match(HashMap.get(map, resource), {
            onNone: () => Effect.succeedNone,
            onSome: ({ highest }) => Effect.map(Ref.get(highest), Option.some)
          }))
    }
  }
)

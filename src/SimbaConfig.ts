/**
 * Timing settings (SPEC section 6), validated with `Schema`, with defaults derived from
 * `leaseDuration`, readable from the environment (`SIMBA_*`).
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { SimbaConfigError } from "./Errors.js"

/** What a user may pass: any subset, durations as `"3 seconds"`, millis or `Duration`. */
export interface SimbaConfigInput {
  /** The backend expires a session this long after its last renewal. Default 15 s. */
  readonly leaseDuration?: Duration.DurationInput | undefined
  /** Renewal period, also every backend call's timeout. Default leaseDuration / 3. */
  readonly renewInterval?: Duration.DurationInput | undefined
  /** Bound on the rate difference between client and backend clocks, in [0, 0.5). Default 0.01. */
  readonly drift?: number | undefined
  /** Fixed safety margin taken off every deadline. Default 50 ms. */
  readonly margin?: Duration.DurationInput | undefined
  /** Candidates retry after renewInterval / 2 + random [0, retryJitter). Default renewInterval / 2. */
  readonly retryJitter?: Duration.DurationInput | undefined
  /** Lower bound of the backoff after a failed renewal. Default 100 ms. */
  readonly minBackoff?: Duration.DurationInput | undefined
}

/** A validated configuration, all durations in milliseconds. */
export class SimbaConfig extends Schema.Class<SimbaConfig>("SimbaConfig")({
  leaseDuration: Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "must be positive" })),
  renewInterval: Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "must be positive" })),
  drift: Schema.Number.pipe(
    Schema.finite({ message: () => "must be a finite number" }),
    Schema.greaterThanOrEqualTo(0, { message: () => "must be in [0, 0.5)" }),
    Schema.lessThan(0.5, { message: () => "must be in [0, 0.5)" })
  ),
  margin: Schema.Number.pipe(Schema.finite(), Schema.nonNegative({ message: () => "must not be negative" })),
  retryJitter: Schema.Number.pipe(Schema.finite(), Schema.nonNegative({ message: () => "must not be negative" })),
  minBackoff: Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "must be positive" }))
}) {}

const decodeFields = Schema.decodeUnknownEither(SimbaConfig)

const durationField = (
  field: keyof SimbaConfigInput,
  input: Duration.DurationInput | undefined,
  fallback: number
): Either.Either<number, SimbaConfigError> => {
  if (input === undefined) return Either.right(fallback)
  // Duration.decode clamps negative millis to zero: refuse them before it does.
  if (typeof input === "number" && !(input >= 0)) {
    return Either.left(new SimbaConfigError({ field, rule: "must be a non-negative number of millis" }))
  }
  return Option.match(Duration.decodeUnknown(input), {
    onNone: () =>
      Either.left(
        new SimbaConfigError({ field, rule: `must be a duration such as "3 seconds" or a number of millis` })
      ),
    onSome: (duration) =>
      Duration.isFinite(duration)
        ? Either.right(Duration.toMillis(duration))
        : Either.left(new SimbaConfigError({ field, rule: "must be finite" }))
  })
}

/** Validates `input`, filling in defaults, and checks the two timing rules of SPEC section 6. */
export const make = (input: SimbaConfigInput = {}): Effect.Effect<SimbaConfig, SimbaConfigError> =>
  Effect.gen(function*() {
    const leaseDuration = yield* durationField("leaseDuration", input.leaseDuration, 15_000)
    const renewInterval = yield* durationField("renewInterval", input.renewInterval, leaseDuration / 3)
    const margin = yield* durationField("margin", input.margin, 50)
    const retryJitter = yield* durationField("retryJitter", input.retryJitter, renewInterval / 2)
    const minBackoff = yield* durationField("minBackoff", input.minBackoff, 100)
    const drift = input.drift ?? 0.01
    const config = yield* Either.mapLeft(
      decodeFields({ leaseDuration, renewInterval, drift, margin, retryJitter, minBackoff }),
      (error) => {
        const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
        return new SimbaConfigError({ field: String(issue?.path[0] ?? "config"), rule: issue?.message ?? "invalid" })
      }
    )
    if (config.renewInterval * 2 > config.leaseDuration) {
      return yield* new SimbaConfigError({
        field: "renewInterval",
        rule: `renewInterval × 2 must be at most leaseDuration (${config.renewInterval} ms × 2 > ${config.leaseDuration} ms)`
      })
    }
    if (config.leaseDuration * (1 - config.drift) - config.margin <= config.renewInterval) {
      return yield* new SimbaConfigError({
        field: "margin",
        rule: "leaseDuration × (1 − drift) − margin must exceed renewInterval"
      })
    }
    return config
  })

/** The defaults (15 s lease). */
export const defaults: SimbaConfig = Effect.runSync(make())

const durationEnv = (name: string) =>
  Config.option(Config.string(name)).pipe(
    Config.map(Option.map((raw): Duration.DurationInput => {
      const trimmed = raw.trim()
      return /^\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : (trimmed as Duration.DurationInput)
    })),
    Config.map(Option.getOrUndefined)
  )

/**
 * Reads `SIMBA_LEASE_DURATION`, `SIMBA_RENEW_INTERVAL`, `SIMBA_DRIFT`, `SIMBA_MARGIN`,
 * `SIMBA_RETRY_JITTER`, `SIMBA_MIN_BACKOFF` (durations as "3 seconds" or millis); unset ones keep
 * their defaults.
 */
export const config: Config.Config<SimbaConfigInput> = Config.all({
  leaseDuration: durationEnv("SIMBA_LEASE_DURATION"),
  renewInterval: durationEnv("SIMBA_RENEW_INTERVAL"),
  drift: Config.option(Config.number("SIMBA_DRIFT")).pipe(Config.map(Option.getOrUndefined)),
  margin: durationEnv("SIMBA_MARGIN"),
  retryJitter: durationEnv("SIMBA_RETRY_JITTER"),
  minBackoff: durationEnv("SIMBA_MIN_BACKOFF")
})

/** The configuration from the environment, validated; a malformed variable is a `SimbaConfigError`. */
export const fromEnv: Effect.Effect<SimbaConfig, SimbaConfigError> = Effect.flatMap(
  Effect.mapError(config, (error) => new SimbaConfigError({ field: "environment", rule: String(error) })),
  make
)

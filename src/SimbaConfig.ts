/**
 * Timing settings (docs/design.md, "Local deadlines"), validated with `Schema`, with defaults derived from
 * `leaseDuration`, readable from the environment (`SIMBA_*`).
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
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
  /** The lowest level of the client's lifecycle logs (docs/operations.md, "Logs"); "None" silences them. Default "Info". */
  readonly logLevel?: LogLevelName | undefined
}

/** The log levels `logLevel` accepts (`LogLevel.Literal`). */
export const logLevels = ["All", "Trace", "Debug", "Info", "Warning", "Error", "Fatal", "None"] as const
export type LogLevelName = typeof logLevels[number]

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
  minBackoff: Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "must be positive" })),
  logLevel: Schema.Literal(...logLevels).annotations({ message: () => `must be one of ${logLevels.join(", ")}` })
}) {}

const decodeFields = Schema.decodeUnknownEither(SimbaConfig)

const millisPer: Readonly<Record<string, number>> = {
  ns: 1e-6, nano: 1e-6, nanos: 1e-6, nanosecond: 1e-6, nanoseconds: 1e-6,
  us: 1e-3, micro: 1e-3, micros: 1e-3, microsecond: 1e-3, microseconds: 1e-3,
  ms: 1, milli: 1, millis: 1, millisecond: 1, milliseconds: 1,
  s: 1_000, sec: 1_000, secs: 1_000, second: 1_000, seconds: 1_000,
  m: 60_000, min: 60_000, mins: 60_000, minute: 60_000, minutes: 60_000,
  h: 3_600_000, hour: 3_600_000, hours: 3_600_000,
  d: 86_400_000, day: 86_400_000, days: 86_400_000
}

/** The forms a duration may take as text, for messages. */
export const durationForms = `"8s", "500ms", "2m", "1.5s" or "15 seconds"`

/**
 * Reads a duration written as text: a non-negative number and a unit (`8s`, `500ms`, `2m`, `1.5s`,
 * `15 seconds`; ns, us, ms, s, m, h, d and their long names). A bare number is refused (only `0`
 * needs no unit): `15` could mean 15 ms or 15 s, and reading the wrong one breaks the timing rules
 * in a way that is hard to trace back. `Right` millis, or `Left` the reason, naming the text.
 */
export const parseDuration = (text: string): Either.Either<number, string> => {
  const trimmed = text.trim()
  if (/^\d+(\.\d+)?$/.test(trimmed)) {
    return Number(trimmed) === 0
      ? Either.right(0)
      : Either.left(`${JSON.stringify(text)} has no unit: write "${trimmed}s" or "${trimmed}ms" (a bare number is refused)`)
  }
  const match = /^(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]+)$/.exec(trimmed)
  if (match === null) return Either.left(`${JSON.stringify(text)} is not a duration: expected a number and a unit, such as ${durationForms}`)
  const factor = millisPer[match[2]!.toLowerCase()]
  if (factor === undefined) {
    return Either.left(`${JSON.stringify(text)} has an unknown unit ${JSON.stringify(match[2])}: use ms, s, m or h (or their long names)`)
  }
  return Either.right(Number(match[1]) * factor)
}

const durationField = (
  field: keyof SimbaConfigInput,
  input: Duration.DurationInput | undefined,
  fallback: number
): Either.Either<number, SimbaConfigError> => {
  if (input === undefined) return Either.right(fallback)
  // Duration.decode clamps negative millis to zero: refuse them before it does.
  if (typeof input === "number" && !(input >= 0)) {
    return Either.left(new SimbaConfigError({ field, rule: `must be a non-negative number of millis (got ${input})` }))
  }
  if (typeof input === "string") {
    return Either.mapLeft(parseDuration(input), (rule) => new SimbaConfigError({ field, rule }))
  }
  return Option.match(Duration.decodeUnknown(input), {
    onNone: () =>
      Either.left(
        new SimbaConfigError({ field, rule: `must be a duration such as ${durationForms}, or a number of millis` })
      ),
    onSome: (duration) =>
      Duration.isFinite(duration)
        ? Either.right(Duration.toMillis(duration))
        : Either.left(new SimbaConfigError({ field, rule: "must be finite" }))
  })
}

const ms = (millis: number) => `${Math.round(millis * 1000) / 1000} ms`

/**
 * Validates `input`, filling in defaults, and checks the two timing rules: `renewInterval × 2 ≤
 * leaseDuration` and `leaseDuration × (1 − drift) − margin > renewInterval`.
 */
export const make = (input: SimbaConfigInput = {}): Effect.Effect<SimbaConfig, SimbaConfigError> =>
  Effect.gen(function*() {
    const leaseDuration = yield* durationField("leaseDuration", input.leaseDuration, 15_000)
    const renewInterval = yield* durationField("renewInterval", input.renewInterval, leaseDuration / 3)
    const margin = yield* durationField("margin", input.margin, 50)
    const retryJitter = yield* durationField("retryJitter", input.retryJitter, renewInterval / 2)
    const minBackoff = yield* durationField("minBackoff", input.minBackoff, 100)
    const drift = input.drift ?? 0.01
    const logLevel = input.logLevel ?? "Info"
    const config = yield* Either.mapLeft(
      decodeFields({ leaseDuration, renewInterval, drift, margin, retryJitter, minBackoff, logLevel }),
      (error) => {
        const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
        const field = String(issue?.path[0] ?? "config")
        const value = ({ leaseDuration, renewInterval, drift, margin, retryJitter, minBackoff } as Record<string, number>)[field]
        const got = field === "logLevel"
          ? ` (got ${JSON.stringify(logLevel)})`
          : value === undefined
          ? ""
          : ` (got ${field === "drift" ? value : ms(value)})`
        return new SimbaConfigError({ field, rule: `${issue?.message ?? "invalid"}${got}` })
      }
    )
    if (config.renewInterval * 2 > config.leaseDuration) {
      return yield* new SimbaConfigError({
        field: "renewInterval",
        rule: `renewInterval × 2 must be at most leaseDuration (${ms(config.renewInterval)} × 2 > ${ms(config.leaseDuration)})`
      })
    }
    if (config.leaseDuration * (1 - config.drift) - config.margin <= config.renewInterval) {
      return yield* new SimbaConfigError({
        field: "margin",
        rule: `leaseDuration × (1 − drift) − margin must exceed renewInterval (${ms(config.leaseDuration)} × (1 − ${config.drift}) − ${
          ms(config.margin)
        } = ${ms(config.leaseDuration * (1 - config.drift) - config.margin)}, not more than ${ms(config.renewInterval)})`
      })
    }
    return config
  })

/** The defaults (15 s lease). */
export const defaults: SimbaConfig = Effect.runSync(make())

const durationEnv = (name: string) =>
  Config.option(Config.string(name)).pipe(
    Config.mapOrFail(Option.match({
      onNone: () => Either.right(undefined),
      onSome: (raw) =>
        Either.match(parseDuration(raw), {
          onLeft: (reason) => Either.left(ConfigError.InvalidData([name], `${name}=${reason}`)),
          onRight: (millis): Either.Either<Duration.DurationInput | undefined, ConfigError.ConfigError> =>
            Either.right(Duration.millis(millis))
        })
    }))
  )

const driftEnv = (name: string) =>
  Config.option(Config.string(name)).pipe(
    Config.mapOrFail(Option.match({
      onNone: () => Either.right(undefined),
      onSome: (raw): Either.Either<number | undefined, ConfigError.ConfigError> =>
        /^\s*\d*\.?\d+\s*$/.test(raw)
          ? Either.right(Number(raw))
          : Either.left(ConfigError.InvalidData([name], `${name}=${JSON.stringify(raw)} is not a number: expected a fraction in [0, 0.5), such as 0.01`))
    }))
  )

/** Environment variable of each timing field. */
export const variables: Readonly<Record<string, string>> = {
  leaseDuration: "SIMBA_LEASE_DURATION",
  renewInterval: "SIMBA_RENEW_INTERVAL",
  drift: "SIMBA_DRIFT",
  margin: "SIMBA_MARGIN",
  retryJitter: "SIMBA_RETRY_JITTER",
  minBackoff: "SIMBA_MIN_BACKOFF"
}

/**
 * Reads `SIMBA_LEASE_DURATION`, `SIMBA_RENEW_INTERVAL`, `SIMBA_DRIFT`, `SIMBA_MARGIN`,
 * `SIMBA_RETRY_JITTER`, `SIMBA_MIN_BACKOFF`, `SIMBA_LOG_LEVEL`; unset ones keep their defaults. Durations need a unit
 * (`8s`, `500ms`, `2m`, `1.5s`, `15 seconds`): a bare number other than `0` is refused, naming the
 * variable and its value.
 */
export const config: Config.Config<SimbaConfigInput> = Config.all({
  leaseDuration: durationEnv("SIMBA_LEASE_DURATION"),
  renewInterval: durationEnv("SIMBA_RENEW_INTERVAL"),
  drift: driftEnv("SIMBA_DRIFT"),
  margin: durationEnv("SIMBA_MARGIN"),
  retryJitter: durationEnv("SIMBA_RETRY_JITTER"),
  minBackoff: durationEnv("SIMBA_MIN_BACKOFF"),
  logLevel: Config.option(Config.literal(...logLevels)("SIMBA_LOG_LEVEL")).pipe(Config.map(Option.getOrUndefined))
})

/** The first invalid or missing variable of a `ConfigError`. */
const firstProblem = (error: ConfigError.ConfigError): { readonly path: ReadonlyArray<string>; readonly message: string } => {
  switch (error._op) {
    case "And":
    case "Or":
      return firstProblem(error.left)
    case "InvalidData":
    case "MissingData":
    case "SourceUnavailable":
    case "Unsupported":
      return { path: error.path, message: error.message }
  }
}

/** The timing variables that are set, as `NAME="value"` (for messages about rules between fields). */
const setVariables = Config.all(
  Object.values(variables).map((name) =>
    Config.option(Config.string(name)).pipe(Config.map(Option.map((raw) => `${name}=${JSON.stringify(raw)}`)))
  )
).pipe(Config.map((all) => all.flatMap(Option.toArray)))

/**
 * The configuration from the environment, validated. A malformed variable is a `SimbaConfigError`
 * whose rule names the variable and its value; a timing rule broken by valid values names the
 * variables that are set (`source`) and the numbers.
 */
export const fromEnv: Effect.Effect<SimbaConfig, SimbaConfigError> = Effect.gen(function*() {
  const input = yield* Effect.mapError(config, (error) => {
    const { message, path } = firstProblem(error)
    const name = path[0] ?? "environment"
    const field = Object.keys(variables).find((key) => variables[key] === name) ?? name
    return new SimbaConfigError({ field, rule: message })
  })
  return yield* Effect.catchAll(make(input), (error) =>
    Effect.flatMap(Effect.orElseSucceed(setVariables, () => []), (set) =>
      Effect.fail(
        set.length === 0 || error.source !== undefined
          ? error
          : new SimbaConfigError({ field: error.field, rule: error.rule, source: `from ${set.join(", ")}` })
      )))
})

/**
 * Timing settings (docs/design.md, "Local deadlines"), validated with `Schema`, with defaults derived from
 * `leaseDuration`, readable from the environment (`SIMBA_*`).
 */
import type * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { SimbaConfigError } from "./Errors.js"
import * as Options from "./internal/options.js"

/**
 * What a user may pass: any subset, durations as text with a unit (`"8s"`, `"500ms"`, `"2m"`,
 * `"1.5s"`, `"15 seconds"`), a number of millis or any `Duration.DurationInput`.
 */
export interface SimbaConfigInput {
  /** The backend expires a session this long after its last renewal. Default 15 s. */
  readonly leaseDuration?: Options.DurationOption | undefined
  /** Renewal period, also every backend call's timeout. Default leaseDuration / 3. */
  readonly renewInterval?: Options.DurationOption | undefined
  /** Bound on the rate difference between client and backend clocks, in [0, 0.5). Default 0.01. */
  readonly drift?: number | undefined
  /** Fixed safety margin taken off every deadline. Default 50 ms. */
  readonly margin?: Options.DurationOption | undefined
  /** Candidates retry after renewInterval / 2 + random [0, retryJitter). Default renewInterval / 2. */
  readonly retryJitter?: Options.DurationOption | undefined
  /** Lower bound of the backoff after a failed renewal. Default 100 ms. */
  readonly minBackoff?: Options.DurationOption | undefined
  /** The lowest level of the client's lifecycle logs (docs/operations.md, "Logs"); "None" silences them. Default "Info". */
  readonly logLevel?: LogLevelName | undefined
  /**
   * The `keep` of every lock of this client that does not set its own (docs/locks.md, "Lock caching"):
   * how long a lock's lease stays cached after its body. Default 0: off.
   */
  readonly lockKeep?: Options.DurationOption | undefined
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
  logLevel: Schema.Literal(...logLevels).annotations({ message: () => `must be one of ${logLevels.join(", ")}` }),
  lockKeep: Schema.Number.pipe(Schema.finite(), Schema.nonNegative({ message: () => "must not be negative" }))
}) {}

const decodeFields = Schema.decodeUnknownEither(SimbaConfig)

/** What a duration setting takes in code: text with a unit (`"8s"`), or any `Duration.DurationInput` (a number is millis). */
export type { DurationOption, DurationText } from "./internal/options.js"

/** The forms a duration may take as text, for messages. */
export const durationForms = Options.durationForms

/**
 * Reads a duration written as text: a non-negative number and a unit (`8s`, `500ms`, `2m`, `1.5s`,
 * `15 seconds`; ns, us, ms, s, m, h, d, w and their long names). A bare number is refused (only `0`
 * needs no unit): `15` could mean 15 ms or 15 s, and reading the wrong one breaks the timing rules
 * in a way that is hard to trace back. `Right` millis, or `Left` the rule the text breaks. Every
 * duration option of the client and of the backends reads text this way.
 */
export const parseDuration: (text: string) => Either.Either<number, string> = Options.parseDuration

/** Environment variable of each timing field. */
export const variables: Readonly<Record<string, string>> = {
  leaseDuration: "SIMBA_LEASE_DURATION",
  renewInterval: "SIMBA_RENEW_INTERVAL",
  drift: "SIMBA_DRIFT",
  margin: "SIMBA_MARGIN",
  retryJitter: "SIMBA_RETRY_JITTER",
  minBackoff: "SIMBA_MIN_BACKOFF",
  lockKeep: "SIMBA_LOCK_KEEP"
}

const positive = { least: 0, strict: true } as const
const nonNegative = { least: 0 } as const

const ms = (millis: number) => `${Math.round(millis * 1000) / 1000} ms`

/**
 * Validates `input`, filling in defaults, and checks the two timing rules: `renewInterval × 2 ≤
 * leaseDuration` and `leaseDuration × (1 − drift) − margin > renewInterval`.
 */
export const make = (input: SimbaConfigInput = {}): Effect.Effect<SimbaConfig, SimbaConfigError> =>
  Effect.gen(function*() {
    const check = yield* Options.check(undefined, input)
    const leaseDuration = yield* check.duration("leaseDuration", input.leaseDuration, 15_000, positive)
    const renewInterval = yield* check.duration("renewInterval", input.renewInterval, leaseDuration / 3, positive)
    const margin = yield* check.duration("margin", input.margin, 50, nonNegative)
    const retryJitter = yield* check.duration("retryJitter", input.retryJitter, renewInterval / 2, nonNegative)
    const minBackoff = yield* check.duration("minBackoff", input.minBackoff, 100, positive)
    const drift = input.drift ?? 0.01
    const logLevel = input.logLevel ?? "Info"
    const lockKeep = yield* check.duration("lockKeep", input.lockKeep, 0, nonNegative)
    const config = yield* Either.mapLeft(
      decodeFields({ leaseDuration, renewInterval, drift, margin, retryJitter, minBackoff, logLevel, lockKeep }),
      (error) => {
        const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
        const field = String(issue?.path[0] ?? "config")
        return check.error(field, (input as Record<string, unknown>)[field], issue?.message ?? "invalid")
      }
    )
    // A rule between fields names the variables they were read from, when they were.
    const set = Object.keys(variables).flatMap((field) => check.variables[field] ?? [])
    const source = set.length === 0 ? undefined : `from ${set.join(", ")}`
    if (config.renewInterval * 2 > config.leaseDuration) {
      return yield* new SimbaConfigError({
        field: "renewInterval",
        rule: `renewInterval × 2 must be at most leaseDuration (${ms(config.renewInterval)} × 2 > ${ms(config.leaseDuration)})`,
        source
      })
    }
    if (config.leaseDuration * (1 - config.drift) - config.margin <= config.renewInterval) {
      return yield* new SimbaConfigError({
        field: "margin",
        rule: `leaseDuration × (1 − drift) − margin must exceed renewInterval (${ms(config.leaseDuration)} × (1 − ${config.drift}) − ${
          ms(config.margin)
        } = ${ms(config.leaseDuration * (1 - config.drift) - config.margin)}, not more than ${ms(config.renewInterval)})`,
        source
      })
    }
    return config
  })

/** The defaults (15 s lease). */
export const defaults: SimbaConfig = Effect.runSync(make())

const parseDrift = (text: string) =>
  Either.mapLeft(Options.parseNumber(text), () => "must be a number in [0, 0.5), such as 0.01")

/**
 * Reads `SIMBA_LEASE_DURATION`, `SIMBA_RENEW_INTERVAL`, `SIMBA_DRIFT`, `SIMBA_MARGIN`,
 * `SIMBA_RETRY_JITTER`, `SIMBA_MIN_BACKOFF`, `SIMBA_LOCK_KEEP`, `SIMBA_LOG_LEVEL`; unset ones keep their defaults.
 * Durations need a unit (`8s`, `500ms`, `2m`, `1.5s`, `15 seconds`): a bare number other than `0` is
 * refused. Reading never fails on a variable's text: `make` refuses a malformed or invalid one with a
 * `SimbaConfigError` naming the variable, its value and the rule.
 */
export const config: Config.Config<SimbaConfigInput> = Options.fromEnv({
  leaseDuration: Options.duration(variables.leaseDuration!),
  renewInterval: Options.duration(variables.renewInterval!),
  drift: Options.variable(variables.drift!, parseDrift),
  margin: Options.duration(variables.margin!),
  retryJitter: Options.duration(variables.retryJitter!),
  minBackoff: Options.duration(variables.minBackoff!),
  lockKeep: Options.duration(variables.lockKeep!),
  logLevel: Options.variable("SIMBA_LOG_LEVEL", Options.parseLiteral(logLevels))
})

/** The first problem of a `ConfigError`. */
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

/**
 * The configuration from the environment, validated. A malformed or invalid variable is a
 * `SimbaConfigError` naming the variable, its value and the rule; a timing rule broken by valid
 * values names the variables that are set (`source`) and the numbers.
 */
export const fromEnv: Effect.Effect<SimbaConfig, SimbaConfigError> = Effect.flatMap(
  Effect.mapError(config, (error) => {
    // Only the environment itself can fail (a variable's text never does).
    const { message, path } = firstProblem(error)
    return new SimbaConfigError({ field: "environment", variable: path[0], rule: message })
  }),
  make
)

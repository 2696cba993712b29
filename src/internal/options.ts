/**
 * Options, one implementation for the client's timing settings (`SimbaConfig`) and every backend:
 * how a duration, an integer, a boolean, a URL or a `host:port` list is read, from code or from the
 * environment, and how a value that breaks a rule is reported.
 *
 * - Durations take the same forms everywhere: text with a unit (`8s`, `500ms`, `2m`, `1.5s`,
 *   `15 seconds`; ns, us, ms, s, m, h, d, w and their long names), and in code any Effect
 *   `Duration.DurationInput` (a number is milliseconds). A bare number as text is refused (only `0`
 *   needs no unit): `15` could mean 15 ms or 15 s.
 * - An invalid value is a `SimbaConfigError` naming the option (`redis.lockDelay`), the environment
 *   variable it came from when it did (`SIMBA_REDIS_LOCK_DELAY`), the value as given (text quoted,
 *   a URL with its password replaced by `***`) and the rule.
 * - Options read from the environment (`fromEnv`) remember which variable gave each one: a value
 *   that cannot be read (`SIMBA_REDIS_LOCK_DELAY=8`) and one that breaks a rule when the options are
 *   checked (`SIMBA_REDIS_URL=http://...`) are both reported naming the variable, by `check`.
 *
 * Depends on nothing of the client: the backends import it.
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import { SimbaConfigError } from "../Errors.js"

// ---------------------------------------------------------------------------------------------------
// Values in messages
// ---------------------------------------------------------------------------------------------------

const secretParameter = /pass|secret|token/i

/**
 * `text` with the password of a URL's user info (`scheme://user:password@host`) replaced by `***`,
 * and the values of query parameters named like a password too; other text unchanged. Reads text
 * that is not a valid URL as well (a password is hidden even when the URL is malformed).
 */
export const redactUrl = (text: string): string => {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(text)
  const start = scheme === null ? 0 : scheme[0].length
  const authorityEnd = text.slice(start).search(/[/?#]/)
  const authority = authorityEnd < 0 ? text.slice(start) : text.slice(start, start + authorityEnd)
  // The user info ends at the authority's last `@`; a password holding `/`, `?` or `#` unescaped
  // ends the authority early, so then the last `@` of the whole text is taken (hiding more, not less).
  const at = authority.includes("@") ? start + authority.lastIndexOf("@") : text.lastIndexOf("@")
  let shown = text
  if (at >= start) {
    const userInfo = text.slice(start, at)
    const colon = userInfo.indexOf(":")
    if (colon >= 0) shown = `${text.slice(0, start)}${userInfo.slice(0, colon)}:***${text.slice(at)}`
  }
  return shown.replace(/([?&])([^=&#]*)=([^&#]*)/g, (all, separator: string, name: string) =>
    secretParameter.test(name) ? `${separator}${name}=***` : all)
}

/**
 * A value as error messages show it: text quoted (a URL's password hidden), a `Duration` formatted,
 * a `Redacted` never opened.
 */
export const show = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(redactUrl(value))
  if (Redacted.isRedacted(value)) return "<redacted>"
  if (Duration.isDuration(value)) return Duration.format(value)
  if (typeof value === "bigint") return `${value}n`
  if (typeof value !== "object" || value === null) return String(value)
  try {
    const json: string | undefined = JSON.stringify(value)
    return json === undefined ? String(value) : redactUrl(json)
  } catch {
    return String(value)
  }
}

// ---------------------------------------------------------------------------------------------------
// Parsers: text to a value, or the rule the text breaks
// ---------------------------------------------------------------------------------------------------

const millisPer: Readonly<Record<string, number>> = {
  ns: 1e-6, nano: 1e-6, nanos: 1e-6, nanosecond: 1e-6, nanoseconds: 1e-6,
  us: 1e-3, micro: 1e-3, micros: 1e-3, microsecond: 1e-3, microseconds: 1e-3,
  ms: 1, milli: 1, millis: 1, millisecond: 1, milliseconds: 1,
  s: 1_000, sec: 1_000, secs: 1_000, second: 1_000, seconds: 1_000,
  m: 60_000, min: 60_000, mins: 60_000, minute: 60_000, minutes: 60_000,
  h: 3_600_000, hour: 3_600_000, hours: 3_600_000,
  d: 86_400_000, day: 86_400_000, days: 86_400_000,
  w: 604_800_000, week: 604_800_000, weeks: 604_800_000
}

type DurationUnit =
  | "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds"
  | "us" | "micro" | "micros" | "microsecond" | "microseconds"
  | "ms" | "milli" | "millis" | "millisecond" | "milliseconds"
  | "s" | "sec" | "secs" | "second" | "seconds"
  | "m" | "min" | "mins" | "minute" | "minutes"
  | "h" | "hour" | "hours"
  | "d" | "day" | "days"
  | "w" | "week" | "weeks"

/** A duration as text with a unit, as `parseDuration` reads it: `"8s"`, `"500ms"`, `"1.5s"`, `"15 seconds"`. */
export type DurationText = `${number}${DurationUnit}` | `${number} ${DurationUnit}`

/** What a duration option takes in code: text with a unit, or any Effect `Duration.DurationInput` (a number is millis). */
export type DurationOption = Duration.DurationInput | DurationText

/** The forms a duration may take as text, for messages. */
export const durationForms = `"8s", "500ms", "2m", "1.5s" or "15 seconds"`

/** The rule every duration given as text keeps. */
const durationRule = `must be a duration with a unit, such as ${durationForms}`

/**
 * Reads a duration written as text: a non-negative number and a unit (`8s`, `500ms`, `2m`, `1.5s`,
 * `15 seconds`; ns, us, ms, s, m, h, d, w and their long names, any case, spaces around). A bare
 * number is refused (only `0` needs no unit): `15` could mean 15 ms or 15 s, and reading the wrong
 * one breaks the timing rules in a way that is hard to trace back. `Right` millis, or `Left` the rule.
 */
export const parseDuration = (text: string): Either.Either<number, string> => {
  const trimmed = text.trim()
  if (/^(\d+(\.\d*)?|\.\d+)$/.test(trimmed)) {
    return Number(trimmed) === 0
      ? Either.right(0)
      : Either.left(`${durationRule} (a bare number is refused: write "${trimmed}s" or "${trimmed}ms")`)
  }
  const match = /^(\d+(?:\.\d+)?|\.\d+)\s*([A-Za-z]+)$/.exec(trimmed)
  if (match === null) return Either.left(durationRule)
  const factor = millisPer[match[2]!.toLowerCase()]
  return factor === undefined
    ? Either.left(`${durationRule} (${JSON.stringify(match[2])} is not a unit: use ns, us, ms, s, m, h, d, w or their long names)`)
    : Either.right(Number(match[1]) * factor)
}

/**
 * The lowest value a duration or an integer may take: `least`, or above it when `strict`. Default
 * (durations): at least 1 ms.
 */
export interface Bounds {
  readonly least: number
  readonly strict?: boolean | undefined
}

const atLeastOneMilli: Bounds = { least: 1 }

const boundRule = ({ least, strict }: Bounds): string =>
  least === 0 ? (strict ? "must be positive" : "must not be negative") : `must be at least ${least} ms`

const withinBounds = (millis: number, bounds: Bounds): boolean =>
  bounds.strict === true ? millis > bounds.least : millis >= bounds.least

/**
 * A duration in milliseconds from what code or the environment gave: text (`parseDuration`), or any
 * `Duration.DurationInput` (a number is milliseconds). It must be finite and within `bounds`.
 */
export const toMillis = (input: unknown, bounds: Bounds = atLeastOneMilli): Either.Either<number, string> => {
  let millis: number
  if (typeof input === "string") {
    const parsed = parseDuration(input)
    if (Either.isLeft(parsed)) return parsed
    millis = parsed.right
  } else if (typeof input === "number") {
    // A number is milliseconds; `Duration.decode` would turn a negative one or NaN into zero.
    if (Number.isNaN(input)) return Either.left(`${durationRule}, or a number of milliseconds`)
    millis = input
  } else {
    const decoded = Duration.decodeUnknown(input)
    if (Option.isNone(decoded)) return Either.left(`${durationRule}, or an Effect Duration`)
    millis = Duration.toMillis(decoded.value)
  }
  if (millis === Infinity) return Either.left("must be finite")
  return withinBounds(millis, bounds) ? Either.right(millis) : Either.left(boundRule(bounds))
}

/** Reads `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`, any case), as Effect's `Config.boolean` does. */
const parseBoolean = (text: string): Either.Either<boolean, string> => {
  const word = text.trim().toLowerCase()
  if (["true", "yes", "on", "1"].includes(word)) return Either.right(true)
  if (["false", "no", "off", "0"].includes(word)) return Either.right(false)
  return Either.left("must be true or false (or yes/no, on/off, 1/0)")
}

/** Reads a whole number written in decimal digits. */
const parseInteger = (text: string): Either.Either<number, string> =>
  /^\s*-?\d{1,15}\s*$/.test(text) ? Either.right(Number(text)) : Either.left("must be a whole number")

/** Reads a number written in decimal (`0.01`, `.5`, `2`). */
export const parseNumber = (text: string): Either.Either<number, string> =>
  /^\s*-?(\d+(\.\d*)?|\.\d+)\s*$/.test(text) ? Either.right(Number(text)) : Either.left("must be a number")

/** Reads one of `values`, exactly. */
export const parseLiteral = <const A extends string>(values: ReadonlyArray<A>) => (text: string): Either.Either<A, string> =>
  (values as ReadonlyArray<string>).includes(text)
    ? Either.right(text as A)
    : Either.left(`must be one of ${values.join(", ")}`)

export const isPort = (port: unknown): port is number =>
  typeof port === "number" && Number.isInteger(port) && port >= 1 && port <= 65535

/** A server to connect to. */
export interface HostPort {
  readonly host: string
  readonly port: number
}

const hostPortRule = "must be host:port[,host:port...] with ports in 1..65535"

// The host a name, an IPv4 address, or an IPv6 address in brackets.
const hostPortPattern = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/

/** Reads `host:port[,host:port...]` (spaces around each server allowed), at least one. */
export const parseHostPorts = (text: string): Either.Either<ReadonlyArray<HostPort>, string> => {
  const servers: Array<HostPort> = []
  for (const part of text.split(",").map((s) => s.trim())) {
    const match = hostPortPattern.exec(part)
    const port = match === null ? NaN : Number(match[2])
    if (match === null || !isPort(port)) return Either.left(`${hostPortRule} (${JSON.stringify(part)} is not)`)
    servers.push({ host: match[1]!, port })
  }
  return Either.right(servers)
}

/** Reads a URL whose scheme is one of `schemes` (`redis:`, with the colon). */
export const parseUrl = (text: string, schemes: ReadonlyArray<string>): Either.Either<URL, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left("must be a valid URL")
  }
  return schemes.includes(url.protocol)
    ? Either.right(url)
    : Either.left(`must start with ${schemes.map((scheme) => `${scheme}//`).join(" or ")}`)
}

// ---------------------------------------------------------------------------------------------------
// The environment
// ---------------------------------------------------------------------------------------------------

/** One environment variable as set: its text and what it reads as (`Left`: the rule the text breaks). */
export interface Read<A> {
  readonly variable: string
  readonly text: string
  readonly parsed: Either.Either<A, string>
}

/** Reads the variable `name` when it is set, with `parse`; never fails on its text (see `fromEnv`). */
export const variable = <A>(
  name: string,
  parse: (text: string) => Either.Either<A, string>
): Config.Config<Option.Option<Read<A>>> =>
  Config.option(Config.string(name)).pipe(
    Config.map(Option.map((text): Read<A> => ({ variable: name, text, parsed: parse(text) })))
  )

/** A variable taken as it is. */
export const text = (name: string) => variable(name, Either.right)

/** A variable holding a secret (a URL with a password): `Redacted`. */
export const secret = (name: string) => variable(name, (text) => Either.right(Redacted.make(text)))

/** A duration variable, read with `parseDuration`: the same forms for every `SIMBA_*` duration. */
export const duration = (name: string) => variable(name, (text) => Either.map(parseDuration(text), Duration.millis))

export const boolean = (name: string) => variable(name, parseBoolean)

export const integer = (name: string) => variable(name, parseInteger)

const sourcesKey: unique symbol = Symbol.for("simba/options/sources")

/** Where an option read from the environment came from. */
interface Source {
  readonly variable: string
  /** The text as set, as messages show it (`show`: a URL's password hidden). */
  readonly shown: string
  /** The value the option got (`undefined` when the text could not be read). */
  readonly value: unknown
  /** Why the text could not be read, when it could not. */
  readonly rule: string | undefined
}

type Sources = Readonly<Record<string, Source>>

const sourcesOf = (options: object): Sources => (options as { readonly [sourcesKey]?: Sources })[sourcesKey] ?? {}

type Reads = Record<string, Config.Config<Option.Option<Read<any>>>>

/** The options `fromEnv` gives for `reads`: each variable set gives its option. */
export type FromEnv<R extends Reads> = {
  readonly [K in keyof R]?: R[K] extends Config.Config<Option.Option<Read<infer A>>> ? A : never
}

/**
 * Options read from the environment: one variable per option (`variable`, `duration`, ...); an unset
 * variable leaves its option out, for the default. The options remember their variables: `check`
 * reports a variable that could not be read (its option is left out) and any rule an option from the
 * environment breaks, naming the variable and its text. Reading never fails on a variable's text.
 */
export const fromEnv = <R extends Reads>(reads: R): Config.Config<FromEnv<R>> =>
  Config.map(Config.all(reads), (read) => {
    const options: Record<string, unknown> = {}
    const sources: Record<string, Source> = {}
    for (const [option, found] of Object.entries(read as Record<string, Option.Option<Read<unknown>>>)) {
      if (Option.isNone(found)) continue
      const { parsed, text, variable } = found.value
      const value = Either.getOrUndefined(parsed)
      if (value !== undefined) options[option] = value
      sources[option] = { variable, shown: show(text), value, rule: Either.isLeft(parsed) ? parsed.left : undefined }
    }
    return Object.assign(options, { [sourcesKey]: sources }) as FromEnv<R>
  })

// ---------------------------------------------------------------------------------------------------
// Checking options
// ---------------------------------------------------------------------------------------------------

/** The checks of one set of options, each failing with a `SimbaConfigError` that names the option. */
export interface Check {
  /**
   * The error of `option` (`cluster.nodes`: a part of `cluster`) holding `value` (`undefined`: none to
   * show), which breaks `rule`; naming the variable and its text when the option came from one.
   */
  readonly error: (option: string, value: unknown, rule: string) => SimbaConfigError
  /** Fails with `error(option, value, rule)`. */
  readonly invalid: (option: string, value: unknown, rule: string) => Effect.Effect<never, SimbaConfigError>
  /** Milliseconds of the duration `input` (`fallback` when absent), finite and within `bounds` (default: at least 1 ms). */
  readonly duration: (
    option: string,
    input: unknown,
    fallback: number,
    bounds?: Bounds
  ) => Effect.Effect<number, SimbaConfigError>
  /** The integer `input` (`fallback` when absent), at least `least` and at most `most`. */
  readonly integer: (
    option: string,
    input: unknown,
    fallback: number,
    range: { readonly least: number; readonly most?: number | undefined }
  ) => Effect.Effect<number, SimbaConfigError>
  /** The boolean `input` (`fallback` when absent). */
  readonly boolean: (option: string, input: unknown, fallback: boolean) => Effect.Effect<boolean, SimbaConfigError>
  /** Each option still as read from the environment, with its variable as `NAME="text"`. */
  readonly variables: Readonly<Record<string, string>>
}

/**
 * Starts checking `options`, whose errors name `<scope>.<option>` (the option alone without a
 * scope). Fails at once when a variable the options were read from (`fromEnv`) could not be read.
 */
export const check = (scope: string | undefined, options: object): Effect.Effect<Check, SimbaConfigError> => {
  const sources = sourcesOf(options)
  const field = (option: string) => (scope === undefined ? option : `${scope}.${option}`)
  // An option is still the variable's when the options were not changed after reading.
  const sourceOf = (option: string): Source | undefined => {
    const top = option.split(".")[0]!
    const source = sources[top]
    return source !== undefined && (options as Record<string, unknown>)[top] === source.value ? source : undefined
  }
  const error = (option: string, value: unknown, rule: string): SimbaConfigError => {
    const source = sourceOf(option)
    return new SimbaConfigError({
      field: field(option),
      rule,
      value: source !== undefined ? source.shown : value === undefined ? undefined : show(value),
      variable: source?.variable
    })
  }
  const invalid = (option: string, value: unknown, rule: string) => Effect.fail(error(option, value, rule))
  const checked: Check = {
    error,
    invalid,
    duration: (option, input, fallback, bounds = atLeastOneMilli) =>
      input === undefined
        ? Effect.succeed(fallback)
        : Either.match(toMillis(input, bounds), {
          onLeft: (rule) => invalid(option, input, rule),
          onRight: Effect.succeed
        }),
    integer: (option, input, fallback, { least, most }) => {
      const value = input ?? fallback
      return typeof value === "number" && Number.isInteger(value) && value >= least && (most === undefined || value <= most)
        ? Effect.succeed(value)
        : invalid(
          option,
          input,
          most !== undefined
            ? `must be an integer in ${least}..${most}`
            : least === 0
            ? "must be a non-negative integer"
            : least === 1
            ? "must be a positive integer"
            : `must be an integer of at least ${least}`
        )
    },
    boolean: (option, input, fallback) => {
      const value = input ?? fallback
      return Predicate.isBoolean(value) ? Effect.succeed(value) : invalid(option, input, "must be true or false")
    },
    variables: Object.fromEntries(
      Object.entries(sources).flatMap(([option, source]) =>
        sourceOf(option) === undefined ? [] : [[option, `${source.variable}=${source.shown}`]]
      )
    )
  }
  const unreadable = Object.entries(sources).find(([option, source]) => source.rule !== undefined && sourceOf(option) !== undefined)
  return unreadable === undefined
    ? Effect.succeed(checked)
    : Effect.fail(error(unreadable[0], undefined, unreadable[1].rule!))
}

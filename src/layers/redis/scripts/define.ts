/**
 * Declaring a script. Each script is declared once with the names of its keys and arguments;
 * `define` binds them to Lua locals of the same names at the top of the script and returns the
 * script's one typed caller, which takes them as named fields and builds `KEYS`/`ARGV` in that
 * order. No call site writes a positional array, and no script body indexes `KEYS` or `ARGV`.
 */
import type * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import { preludeFor } from "./prelude.js"

/**
 * A script as Redis runs it (the prelude it uses, parameter bindings, body), with its SHA1 for
 * `EVALSHA`; and its own code (bindings and body) and flags, as a function of the library (`library.ts`).
 */
export interface Script {
  readonly name: string
  readonly lua: string
  readonly sha: string
  /** The parameter bindings and the body, without the prelude. */
  readonly code: string
  readonly flags: ReadonlyArray<"allow-cross-slot-keys">
}

/** A value in `ARGV`. */
export type Arg = string | number

/** One script call, ready to send: `KEYS` and `ARGV` in the script's order, and its reply's decoder. */
export interface Call<A> {
  readonly script: Script
  readonly keys: ReadonlyArray<string>
  readonly args: ReadonlyArray<Arg>
  readonly decode: (raw: unknown) => Either.Either<A, ParseResult.ParseError>
}

/** Named values: one per name, and a list for the trailing `rest` name (if any). */
type Named<Names extends ReadonlyArray<string>, Rest extends string, V> =
  & { readonly [N in Names[number]]: V }
  & { readonly [N in Rest]: ReadonlyArray<V> }

/** The typed caller of one script; `script` is there for tests and loading. */
export interface Caller<Keys extends ReadonlyArray<string>, Args extends ReadonlyArray<string>, KR extends string, AR extends string, A> {
  (keys: Named<Keys, KR, string>, args: Named<Args, AR, Arg>): Call<A>
  readonly script: Script
  /** Every key and argument name, as bound in Lua. */
  readonly params: ReadonlyArray<string>
}

/** `local name = KEYS[i]` for each name, and a table of the rest (`KEYS[n + 1]` on) for `rest`. */
const bind = (table: "KEYS" | "ARGV", names: ReadonlyArray<string>, rest: string | undefined): string => {
  const lines = names.map((name, i) => `local ${name} = ${table}[${i + 1}]`)
  if (rest !== undefined) {
    lines.push(`local ${rest} = {}`, `for i = ${names.length + 1}, #${table} do ${rest}[#${rest} + 1] = ${table}[i] end`)
  }
  return lines.join("\n")
}

/** The values of `names` in order, then those of `rest`. */
const flatten = <V>(names: ReadonlyArray<string>, rest: string | undefined, values: object): Array<V> => {
  // `values` is a `Named<...>` of exactly these names (checked where the caller is typed).
  const byName = values as Readonly<Record<string, V | ReadonlyArray<V>>>
  const out = names.map((name) => byName[name] as V)
  if (rest !== undefined) for (const value of byName[rest] as ReadonlyArray<V>) out.push(value)
  return out
}

export const define = <
  const Keys extends ReadonlyArray<string>,
  const Args extends ReadonlyArray<string>,
  A,
  I,
  KR extends string = never,
  AR extends string = never
>(
  name: string,
  params: {
    readonly keys: Keys
    /** Further keys, any number, bound as a Lua table. */
    readonly restKeys?: KR
    readonly args: Args
    /** Further arguments, any number, bound as a Lua table. */
    readonly restArgs?: AR
    readonly reply: Schema.Schema<A, I>
    /**
     * Redis 7 script flags (`#!lua flags=...`): `allow-cross-slot-keys` lets a cluster script touch
     * keys of other slots its node serves (its declared keys still name one slot, which routes it).
     */
    readonly flags?: ReadonlyArray<"allow-cross-slot-keys">
  },
  body: string
): Caller<Keys, Args, KR, AR, A> => {
  const { args, keys, restArgs, restKeys } = params
  const shebang = params.flags === undefined ? [] : [`#!lua flags=${params.flags.join(",")}`]
  const code = [bind("KEYS", keys, restKeys), bind("ARGV", args, restArgs), body].join("\n")
  const lua = [...shebang, preludeFor(code), code].join("\n")
  const script: Script = { name, lua, sha: createHash("sha1").update(lua).digest("hex"), code, flags: params.flags ?? [] }
  const decode = Schema.decodeUnknownEither(params.reply)
  const call = (keyValues: Named<Keys, KR, string>, argValues: Named<Args, AR, Arg>): Call<A> => ({
    script,
    keys: flatten(keys, restKeys, keyValues),
    args: flatten(args, restArgs, argValues),
    decode
  })
  const names = [...keys, ...args, ...(restKeys === undefined ? [] : [restKeys]), ...(restArgs === undefined ? [] : [restArgs])]
  return Object.assign(call, { script, params: names })
}

/**
 * A lease script as both modes run it: `node` plain (one server, any Redis version), `cluster` the
 * same body flagged `allow-cross-slot-keys` (named `<name>InCluster`), since in a cluster it reads
 * sessions' pulses in other slots of its node.
 */
export const defineInModes = <
  const Keys extends ReadonlyArray<string>,
  const Args extends ReadonlyArray<string>,
  A,
  I
>(
  name: string,
  params: { readonly keys: Keys; readonly args: Args; readonly reply: Schema.Schema<A, I> },
  body: string
) => ({
  node: define(name, params, body),
  cluster: define(`${name}InCluster`, { ...params, flags: ["allow-cross-slot-keys"] }, body)
})

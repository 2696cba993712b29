/**
 * The Lua scripts as declared in `scripts.ts`: their parameters never shadow a function or constant
 * of the shared prelude, each one defines the part of the prelude it calls (and, in order, what that
 * calls), and each one compiles on the real server to the SHA the backend sends with `EVALSHA`; the
 * library holds every one of them as a function with its flags, and makes the prelude's per-call
 * state again at every call.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scripts from "../../src/layers/redis/scripts.js"
import { rawClient } from "./RedisServers.js"

describe("Redis scripts", () => {
  it("no parameter shadows a name of the prelude", () => {
    const preludeNames = new Set([...Scripts.prelude.matchAll(/^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)/gm)].map((m) => m[1]!))
    expect(preludeNames).toContain("acquire")
    expect(preludeNames).toContain("closed_marker")
    for (const { params, script } of Scripts.all) {
      for (const param of params) expect(preludeNames.has(param), `${script.name}: ${param}`).toBe(false)
      expect(new Set(params).size, script.name).toBe(params.length)
    }
  })

  it("no string literal of the prelude holds a comment's start (the selection strips comments so)", () => {
    for (const line of Scripts.prelude.split("\n")) {
      const code = line.split("--")[0]!
      expect((code.match(/'/g) ?? []).length % 2, line).toBe(0)
      expect((code.match(/"/g) ?? []).length % 2, line).toBe(0)
    }
  })

  it("each script defines every prelude name it mentions before the code that mentions it, and no more than it needs", () => {
    const preludeNames = new Set([...Scripts.prelude.matchAll(/^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)/gm)].map((m) => m[1]!))
    const mentioned = (lua: string) =>
      new Set((lua.replace(/--.*$/gm, "").match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? []).filter((id) => preludeNames.has(id)))
    for (const { script } of Scripts.all) {
      // The script's top-level statements: a prelude definition each, then the bindings and the body.
      const statements = script.lua.split(/\n(?=local |if )/)
      const defined = new Set<string>()
      for (const statement of statements) {
        const name = /^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)/.exec(statement)?.[1]
        if (name !== undefined && preludeNames.has(name)) defined.add(name)
        for (const use of mentioned(statement)) expect(defined.has(use), `${script.name}: ${use} before its definition`).toBe(true)
      }
    }
    const definedIn = (name: string) =>
      new Set([...Scripts.all.find((s) => s.script.name === name)!.script.lua.matchAll(/^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)/gm)].map((m) => m[1]!))
    expect(definedIn("acquire")).toContain("acquire")
    expect(definedIn("acquire")).not.toContain("renew_home")
    expect(definedIn("renew")).not.toContain("acquire")
    expect(definedIn("open").size).toBeLessThan(5)
  })

  it.scopedLive("every script compiles, to the SHA the backend sends", () =>
    Effect.gen(function*() {
      const raw = yield* rawClient(false)
      for (const { script } of Scripts.all) {
        expect(yield* Effect.promise(() => raw.script("LOAD", script.lua)), script.name).toBe(script.sha)
      }
    }))

  it.scopedLive("the library loads on the real server with every script a function, flagged as the script is", () =>
    Effect.gen(function*() {
      const raw = yield* rawClient(false)
      const { library } = Scripts
      // REPLACE: backends of tests running beside this one may have loaded it already (the same code).
      expect(yield* Effect.promise(() => raw.call("FUNCTION", "LOAD", "REPLACE", library.code))).toBe(library.name)
      // [["library_name", name, "engine", "LUA", "functions", [["name", n, "description", d, "flags", [...]], ...]]]
      const listed = (yield* Effect.promise(() => raw.call("FUNCTION", "LIST", "LIBRARYNAME", library.name))) as Array<Array<unknown>>
      const functions = listed[0]![5] as Array<Array<unknown>>
      const flagsOf = new Map(functions.map((f) => [String(f[1]), f[5] as Array<string>]))
      expect(flagsOf.size).toBe(Scripts.all.length)
      for (const { script } of Scripts.all) {
        const fn = library.functionOf(script)
        expect(fn, script.name).toBe(`${library.name}_${script.name}`)
        expect(flagsOf.get(fn!), script.name).toEqual([...script.flags])
      }
      // The prelude's one table of per-call state is made again at the start of every function.
      expect(library.code.match(/callback=function\(KEYS, ARGV\)\npool_alive_known = \{\}\n/g)).toHaveLength(Scripts.all.length)
      // The name is the code's: the same library from the same scripts.
      expect(library.name).toMatch(/^simba_[0-9a-f]{16}$/)
    }))

  it("a caller builds KEYS and ARGV in the declared order, the rest last", () => {
    const call = Scripts.renewSlot(
      { shadow: "s", shadowLeases: "sl", groups: ["g1", "g2"] },
      { sessionId: "id", remaining: 5, margin: 20, pulse: "q", leasePrefix: "p", registration: "3", known: "7", groupNames: ["a", "b"] }
    )
    expect(call.keys).toEqual(["s", "sl", "g1", "g2"])
    expect(call.args).toEqual(["id", 5, 20, "q", "p", "3", "7", "a", "b"])
    expect(call.script.lua).toContain("local shadow = KEYS[1]")
    expect(call.script.lua).toContain("for i = 3, #KEYS do groups[#groups + 1] = KEYS[i] end")
  })
})

/**
 * The engine's modules (`src/engine/*.ts`) import each other in one direction: the import graph is a
 * DAG, so each module can be read knowing only the ones below it, and none is half-initialised when
 * another runs. This reads the sources, lists every import edge among them (type-only imports too)
 * and fails on a cycle, naming the modules along it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/engine")

type Graph = ReadonlyMap<string, ReadonlyArray<string>>

/** Each module's imports of its siblings (`from "./x.js"`, `import("./x.js")`), by module name. */
const importGraph = (folder: string): Graph => {
  const modules = fs.readdirSync(folder).filter((f) => f.endsWith(".ts")).map((f) => f.slice(0, -3)).sort()
  return new Map(modules.map((module) => {
    const text = fs.readFileSync(path.join(folder, `${module}.ts`), "utf8")
    const targets = Array.from(text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*"\.\/([\w.-]+)\.js"/g), (m) => m[1]!)
    return [module, [...new Set(targets)].sort()]
  }))
}

/** A cycle of `graph` (its modules in import order, the first repeated last), or `undefined`. */
const findCycle = (graph: Graph): ReadonlyArray<string> | undefined => {
  const done = new Set<string>()
  const trail: Array<string> = []
  const visit = (module: string): ReadonlyArray<string> | undefined => {
    const at = trail.indexOf(module)
    if (at >= 0) return [...trail.slice(at), module]
    if (done.has(module)) return undefined
    trail.push(module)
    for (const target of graph.get(module) ?? []) {
      const cycle = visit(target)
      if (cycle !== undefined) return cycle
    }
    trail.pop()
    done.add(module)
    return undefined
  }
  for (const module of graph.keys()) {
    const cycle = visit(module)
    if (cycle !== undefined) return cycle
  }
  return undefined
}

describe("Engine modules: imports go one way", () => {
  const graph = importGraph(dir)

  it("reads the imports (every target is a module of the folder)", () => {
    expect(graph.get("step")).toContain("elections")
    expect(graph.get("context")).toContain("types")
    for (const [module, targets] of graph) {
      for (const target of targets) expect(graph.has(target), `${module} imports ./${target}.js`).toBe(true)
    }
  })

  it("has no import cycle", () => {
    const edges = Array.from(graph, ([module, targets]) => targets.map((t) => `${module} -> ${t}`)).flat()
    expect(findCycle(graph), `import edges:\n${edges.join("\n")}`).toBeUndefined()
  })

  it("finds a cycle when there is one", () => {
    const ring = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]])
    expect(findCycle(ring)).toEqual(["a", "b", "c", "a"])
    expect(findCycle(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]]))).toBeUndefined()
  })
})

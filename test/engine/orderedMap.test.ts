// OrderedMap keeps every version it ever returned intact, whatever version is read or changed next
// (the shared native Map is handed between versions): checked against copies of a native Map.
import { describe, expect, it } from "vitest"
import { OrderedMap } from "../../src/engine/orderedMap.js"

/** A small seeded generator (mulberry32), so a failure names the seed that reproduces it. */
const generator = (seed: number) => {
  let a = seed >>> 0
  return (below: number): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296 * below) | 0
  }
}

interface Version {
  readonly map: OrderedMap<string, number>
  /** What the version must hold, in iteration order. */
  readonly model: ReadonlyMap<string, number>
}

const expectSame = (version: Version, seed: number, step: number) => {
  const context = `seed ${seed}, step ${step}`
  expect(Array.from(version.map.entries()), context).toEqual(Array.from(version.model.entries()))
  expect(version.map.size, context).toBe(version.model.size)
  expect(version.map.first(), context).toBe(version.model.keys().next().value)
}

const run = (seed: number, steps: number, keys: number) => {
  const random = generator(seed)
  const versions: Array<Version> = [{ map: OrderedMap.empty(), model: new Map() }]
  for (let step = 0; step < steps; step++) {
    // Mostly the newest version (as the engine uses it), often an older one (as a test that steps one
    // state twice does).
    const base = random(3) === 0 ? versions[random(versions.length)]! : versions[versions.length - 1]!
    const key = `k${random(keys)}`
    const model = new Map(base.model)
    let map: OrderedMap<string, number>
    if (random(3) === 0) {
      map = base.map.delete(key)
      model.delete(key)
    } else {
      const value = random(4)
      map = base.map.set(key, value)
      model.set(key, value)
    }
    expect(map.get(key), `seed ${seed}, step ${step}`).toBe(model.get(key))
    expect(map.has(key), `seed ${seed}, step ${step}`).toBe(model.has(key))
    versions.push({ map, model })
    // An earlier version, read after the change: still as it was.
    expectSame(versions[random(versions.length)]!, seed, step)
  }
  for (const version of versions) expectSame(version, seed, steps)
}

describe("OrderedMap", () => {
  it("iterates in insertion order: a present key keeps its place, a deleted and set key goes last", () => {
    const a = OrderedMap.empty<string, number>().set("x", 1).set("y", 2).set("z", 3)
    const b = a.set("x", 10)
    const c = b.delete("y").set("y", 20)
    expect(Array.from(a)).toEqual([["x", 1], ["y", 2], ["z", 3]])
    expect(Array.from(b)).toEqual([["x", 10], ["y", 2], ["z", 3]])
    expect(Array.from(c)).toEqual([["x", 10], ["z", 3], ["y", 20]])
    // Back to the first version after the later ones changed the shared map, and forward again.
    expect(a.get("x")).toBe(1)
    expect(Array.from(a.keys())).toEqual(["x", "y", "z"])
    expect(Array.from(c.values())).toEqual([10, 3, 20])
    expect(b.delete("q")).toBe(b)
    expect(b.set("x", 10)).toBe(b)
  })

  it("a loop over a version sees that version while it makes newer ones", () => {
    let map = OrderedMap.empty<number, string>()
    for (let i = 0; i < 5; i++) map = map.set(i, `v${i}`)
    const seen: Array<number> = []
    for (const key of map.keys()) {
      seen.push(key)
      map = map.delete(key).set(key + 100, "new")
    }
    expect(seen).toEqual([0, 1, 2, 3, 4])
    expect(Array.from(map.keys())).toEqual([100, 101, 102, 103, 104])
  })

  it("liveKeys reads the newest version as a Map iterator would while the loop changes it", () => {
    let map = OrderedMap.empty<number, string>()
    for (let i = 0; i < 5; i++) map = map.set(i, `v${i}`)
    const native = new Map(map)
    const seen: Array<number> = []
    const nativeSeen: Array<number> = []
    for (const key of map.liveKeys()) {
      seen.push(key)
      if (key === 1) map = map.delete(3).set(0, "changed")
    }
    for (const key of native.keys()) {
      nativeSeen.push(key)
      if (key === 1) native.delete(3) && native.set(0, "changed")
    }
    expect(seen).toEqual(nativeSeen)
    expect(seen).toEqual([0, 1, 2, 4])
  })

  it("liveKeys matches a Map iterator under random deletes and sets of the newest version (300 seeds)", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const random = generator(seed)
      let map = OrderedMap.empty<number, number>()
      const native = new Map<number, number>()
      for (let i = 0; i < 8; i++) {
        map = map.set(i, i)
        native.set(i, i)
      }
      const changes: Array<readonly [number, boolean]> = Array.from({ length: 40 }, () => [random(12), random(2) === 0] as const)
      const run = (change: (key: number, remove: boolean) => void, keys: Iterable<number>) => {
        const seen: Array<number> = []
        let i = 0
        for (const key of keys) {
          seen.push(key)
          // Up to two changes per key read, the last ones all at once after the last key.
          for (let n = 0; n < 2 && i < changes.length; n++, i++) change(changes[i]![0], changes[i]![1])
          if (seen.length > 60) break
        }
        return seen
      }
      const seen = run((key, remove) => {
        map = remove ? map.delete(key) : map.set(key, key)
      }, map.liveKeys())
      const nativeSeen = run((key, remove) => {
        if (remove) native.delete(key)
        else native.set(key, key)
      }, native.keys())
      expect(seen, `seed ${seed}`).toEqual(nativeSeen)
      expect(Array.from(map.keys()), `seed ${seed}`).toEqual(Array.from(native.keys()))
    }
  })

  it("supersededBy drops the records from a version to a newer one: the newer reads as before, the older is a defect to read", () => {
    const older = OrderedMap.empty<string, number>().set("x", 1).set("y", 2)
    const between = older.set("x", 10)
    const newer = between.delete("y").set("z", 3)
    older.supersededBy(newer)
    expect(Array.from(newer)).toEqual([["x", 10], ["z", 3]])
    expect(newer.set("y", 4).get("y")).toBe(4)
    expect(() => older.get("x")).toThrow(/superseded/)
    expect(() => Array.from(between.keys())).toThrow(/superseded/)
  })

  it("supersededBy leaves both versions alone when the newer one is not reached from the older", () => {
    const base = OrderedMap.empty<string, number>().set("x", 1)
    const left = base.set("y", 2)
    const right = base.set("z", 3)
    // Making `right` moved the shared map to it: `base` leads to `right`, not to `left`. Nothing dropped.
    base.supersededBy(left)
    expect(Array.from(left)).toEqual([["x", 1], ["y", 2]])
    expect(Array.from(base)).toEqual([["x", 1]])
    expect(Array.from(right)).toEqual([["x", 1], ["z", 3]])
    base.supersededBy(base)
    expect(base.get("x")).toBe(1)
  })

  // CPU-bound (reading an old version after newer ones rebuilds it): ~14 s alone on the 2-core
  // machine, over 20 s beside another file of the suite, hence its own timeout.
  it("every version stays as it was made, read and changed in any order (500 seeds)", () => {
    for (let seed = 1; seed <= 500; seed++) run(seed, 120, 12)
  }, 120_000)
})

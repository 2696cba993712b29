import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as PartitionAssignment from "../src/PartitionAssignment.js"

/** The reference vectors every implementation of section 9 must reproduce, kept with the tests. */
const vectorsPath = fileURLToPath(new URL("./fixtures/partition-weights.json", import.meta.url))

const Vectors = Schema.Struct({
  fnv1a64_offset: Schema.String,
  fnv1a64_prime: Schema.String,
  vectors: Schema.Array(Schema.Struct({
    partition: Schema.Int,
    member: Schema.String,
    fnv1a64: Schema.BigInt,
    weight: Schema.BigInt
  })),
  assignment: Schema.Struct({
    members: Schema.Array(Schema.String),
    partitions: Schema.Int,
    owner: Schema.Record({ key: Schema.String, value: Schema.String })
  })
})

const vectors = Schema.decodeUnknownSync(Vectors)(JSON.parse(readFileSync(vectorsPath, "utf8")))

const utf8 = (text: string) => new TextEncoder().encode(text)

describe("PartitionAssignment vectors", () => {
  it("uses the FNV-1a 64 constants of the vectors", () => {
    expect(PartitionAssignment.FNV_OFFSET_BASIS).toBe(BigInt(vectors.fnv1a64_offset))
    expect(PartitionAssignment.FNV_PRIME).toBe(BigInt(vectors.fnv1a64_prime))
  })

  it("has vectors to check", () => {
    expect(vectors.vectors.length).toBeGreaterThanOrEqual(30)
    expect(vectors.assignment.members.length).toBeGreaterThan(1)
  })

  describe("fnv1a64", () => {
    for (const v of vectors.vectors) {
      it(`${v.partition}@${v.member}`, () => {
        expect(PartitionAssignment.fnv1a64(utf8(`${v.partition}@${v.member}`))).toBe(v.fnv1a64)
      })
    }
  })

  describe("weight", () => {
    for (const v of vectors.vectors) {
      it(`${v.partition}@${v.member}`, () => {
        expect(PartitionAssignment.weight(v.partition, v.member)).toBe(v.weight)
        expect(PartitionAssignment.splitmix64(v.fnv1a64)).toBe(v.weight)
      })
    }
  })

  it("assigns the vectors' partitions to the vectors' owners", () => {
    const { members, owner, partitions } = vectors.assignment
    const expected = new Map(Object.entries(owner).map(([p, m]) => [Number(p), m] as const))
    expect(expected.size).toBe(partitions)
    expect(new Map(PartitionAssignment.assign(partitions, members))).toEqual(expected)
    expect(new Map(PartitionAssignment.assign(partitions, [...members].reverse()))).toEqual(expected)
    for (const me of members) {
      const mine = [...expected].filter(([, m]) => m === me).map(([p]) => p).sort((a, b) => a - b)
      expect(PartitionAssignment.owned(partitions, members, me)).toEqual(mine)
    }
  })
})

describe("PartitionAssignment", () => {
  it("computes weights mod 2^64", () => {
    for (const v of vectors.vectors) {
      const w = PartitionAssignment.weight(v.partition, v.member)
      expect(w >= 0n && w < 1n << 64n).toBe(true)
    }
    expect(PartitionAssignment.fnv1a64(new Uint8Array())).toBe(PartitionAssignment.FNV_OFFSET_BASIS)
    expect(PartitionAssignment.splitmix64((1n << 64n) - 1n) < 1n << 64n).toBe(true)
  })

  it("hashes the member id as UTF-8", () => {
    // "é" is two UTF-8 bytes: 0xc3 0xa9
    expect(PartitionAssignment.weight(3, "é")).toBe(
      PartitionAssignment.splitmix64(PartitionAssignment.fnv1a64(Uint8Array.of(0x33, 0x40, 0xc3, 0xa9)))
    )
  })

  it("gives nothing to nobody", () => {
    expect(PartitionAssignment.assign(8, []).size).toBe(0)
    expect(PartitionAssignment.owned(8, [], "a")).toEqual([])
    expect(PartitionAssignment.owned(8, ["a", "b"], "c")).toEqual([])
    expect(PartitionAssignment.assign(0, ["a"]).size).toBe(0)
  })

  it("gives everything to a sole member", () => {
    expect(PartitionAssignment.owned(5, ["a"], "a")).toEqual([0, 1, 2, 3, 4])
  })

  it("counts a member listed twice once", () => {
    const members = ["c0ffee00c0ffee00c0ffee00c0ffee00", "0123456789abcdef0123456789abcdef"]
    expect(new Map(PartitionAssignment.assign(16, [...members, ...members]))).toEqual(
      new Map(PartitionAssignment.assign(16, members))
    )
    expect(PartitionAssignment.ownerOf(0, ["a", "a"])).toBe("a")
  })

  it.prop("fnv1a64 agrees with a plain bigint FNV-1a 64", {
    bytes: FastCheck.uint8Array({ maxLength: 64 })
  }, ({ bytes }) => {
    let reference = 0xcbf29ce484222325n
    for (const byte of bytes) reference = ((reference ^ BigInt(byte)) * 0x100000001b3n) & ((1n << 64n) - 1n)
    expect(PartitionAssignment.fnv1a64(bytes)).toBe(reference)
  })

  const member = FastCheck.stringMatching(/^[0-9a-f]{32}$/)
  const group = FastCheck.uniqueArray(member, { minLength: 1, maxLength: 8 })

  it.prop("every partition goes to the member of largest weight, whatever the order", {
    members: group,
    partitions: FastCheck.integer({ min: 1, max: 64 }),
    seed: FastCheck.integer()
  }, ({ members, partitions, seed }) => {
    const shuffled = [...members].sort((a, b) =>
      PartitionAssignment.weight(seed, a) < PartitionAssignment.weight(seed, b) ? -1 : 1
    )
    const owners = PartitionAssignment.assign(partitions, members)
    expect(new Map(PartitionAssignment.assign(partitions, shuffled))).toEqual(new Map(owners))
    expect(owners.size).toBe(partitions)
    for (const [p, owner] of owners) {
      for (const m of members) {
        expect(PartitionAssignment.weight(p, m) <= PartitionAssignment.weight(p, owner)).toBe(true)
      }
    }
    const all = members.flatMap((m) => PartitionAssignment.owned(partitions, members, m))
    expect(all.sort((a, b) => a - b)).toEqual(Array.from({ length: partitions }, (_, i) => i))
  })

  it.prop("a member joining moves only the partitions it wins", {
    members: group,
    newcomer: member,
    partitions: FastCheck.integer({ min: 1, max: 64 })
  }, ({ members, newcomer, partitions }) => {
    FastCheck.pre(!members.includes(newcomer))
    const before = PartitionAssignment.assign(partitions, members)
    const after = PartitionAssignment.assign(partitions, [...members, newcomer])
    for (let p = 0; p < partitions; p++) {
      if (after.get(p) !== before.get(p)) expect(after.get(p)).toBe(newcomer)
    }
    expect(PartitionAssignment.owned(partitions, [...members, newcomer], newcomer)).toEqual(
      [...after].filter(([, m]) => m === newcomer).map(([p]) => p)
    )
  })

  it.prop("a member leaving moves only its own partitions", {
    members: FastCheck.uniqueArray(member, { minLength: 2, maxLength: 8 }),
    leaver: FastCheck.nat(),
    partitions: FastCheck.integer({ min: 1, max: 64 })
  }, ({ leaver, members, partitions }) => {
    const gone = members[leaver % members.length]!
    const before = PartitionAssignment.assign(partitions, members)
    const after = PartitionAssignment.assign(partitions, members.filter((m) => m !== gone))
    for (let p = 0; p < partitions; p++) {
      if (before.get(p) === gone) expect(after.get(p)).not.toBe(gone)
      else expect(after.get(p)).toBe(before.get(p))
    }
  })
})

import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Ref } from "effect"
import { PartitionAssignment } from "simba"
import { advance, makeClient, type TestClient } from "./helpers.js"
import { MemoryBackend } from "simba"

const owners = (clients: ReadonlyArray<TestClient>) =>
  Effect.gen(function*() {
    const owner = new Map<number, string>()
    for (const { client } of clients) {
      const snapshot = yield* client.snapshot
      for (const e of snapshot.elections) {
        if (e.kind === "partition" && e.status === "LEADER") {
          const partition = Number(e.name.split(".").pop())
          expect(owner.has(partition)).toBe(false)
          owner.set(partition, snapshot.session.id!)
        }
      }
    }
    return owner
  })

describe("partition groups", () => {
  it.scoped("partitions follow the rendezvous assignment; a joining or leaving member moves only its own", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.make()
      const partitions = 12
      const working = yield* Ref.make<ReadonlyMap<number, number>>(new Map())
      const work = (id: number) => (partition: number) =>
        Effect.acquireRelease(
          Ref.update(working, (m) => {
            expect(m.has(partition)).toBe(false) // never two workers on one partition
            return new Map(m).set(partition, id)
          }),
          () => Ref.update(working, (m) => {
            const next = new Map(m)
            next.delete(partition)
            return next
          })
        ).pipe(Effect.zipRight(Effect.never), Effect.scoped)
      const a = yield* makeClient(backend)
      const b = yield* makeClient(backend)
      yield* Effect.fork(a.client.partitionGroup("jobs", partitions, work(1)))
      yield* Effect.fork(b.client.partitionGroup("jobs", partitions, work(2)))
      yield* advance("3 seconds")
      const ids = async (cs: ReadonlyArray<TestClient>) => cs
      void ids
      const idOf = (c: TestClient) => Effect.map(c.client.snapshot, (s) => s.session.id!)
      const expected = (members: ReadonlyArray<string>) => PartitionAssignment.assign(partitions, members)
      const two = [yield* idOf(a), yield* idOf(b)]
      const before = yield* owners([a, b])
      expect(before).toEqual(new Map(expected(two)))
      expect((yield* Ref.get(working)).size).toBe(partitions)

      // A third member joins: only the partitions it wins move, and they move to it.
      const c = yield* makeClient(backend)
      const runC = yield* Effect.fork(c.client.partitionGroup("jobs", partitions, work(3)))
      yield* advance("6 seconds")
      const three = [...two, yield* idOf(c)]
      const during = yield* owners([a, b, c])
      expect(during).toEqual(new Map(expected(three)))
      for (const [partition, owner] of during) {
        if (owner !== before.get(partition)) expect(owner).toBe(three[2])
      }
      const snapshotC = yield* c.client.snapshot
      expect(snapshotC.groups[0]!.members).toEqual([...three].sort())

      // It leaves again: only its partitions move, back to where the assignment puts them.
      yield* Fiber.interrupt(runC)
      yield* advance("6 seconds")
      const after = yield* owners([a, b])
      expect(after).toEqual(new Map(expected(two)))
      for (const [partition, owner] of after) {
        if (owner !== during.get(partition)) expect(during.get(partition)).toBe(three[2])
      }
      expect((yield* Ref.get(working)).size).toBe(partitions)
    }))
})

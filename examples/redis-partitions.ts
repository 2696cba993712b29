/**
 * A partition group on Redis: three members share eight partitions of `example-jobs`.
 *
 *   npx tsx examples/redis-partitions.ts
 *
 * Partitions are spread by rendezvous hashing over the live members; each member works on the
 * partitions it leads. After a few seconds one member leaves: only its partitions move, each handed
 * over (the old worker is interrupted before the new one starts).
 */
import { Effect, Fiber, Stream } from "effect"
import { formatEvent, Simba } from "simba"
import { RedisBackend } from "simba/redis"

const member = (id: string) =>
  Effect.gen(function*() {
    const simba = yield* Simba.make({ leaseDuration: "3 seconds" })
    yield* simba.events.pipe(
      Stream.filter((e) => e._tag === "PartitionsAssigned"),
      Stream.runForEach((e) => Effect.sync(() => console.log(`${id}: ${formatEvent(e)}`))),
      Effect.forkScoped
    )
    return yield* simba.partitionGroup("example-jobs", 8, (partition, term) =>
      Effect.sync(() => console.log(`${id}: working on example-jobs.${partition} (token ${term.token})`)).pipe(
        Effect.zipRight(Effect.never),
        Effect.onInterrupt(() => Effect.sync(() => console.log(`${id}: handing example-jobs.${partition} over`)))
      ))
  }).pipe(Effect.scoped, Effect.provide(RedisBackend.layer({ url: process.env.SIMBA_REDIS_URL ?? "redis://127.0.0.1:6379" })))

const program = Effect.gen(function*() {
  const a = yield* Effect.fork(member("a"))
  const b = yield* Effect.fork(member("b"))
  const c = yield* Effect.fork(member("c"))
  yield* Effect.sleep("3 seconds")
  console.log("--- c leaves ---")
  yield* Fiber.interrupt(c)
  yield* Effect.sleep("2 seconds")
  yield* Fiber.interrupt(a)
  yield* Fiber.interrupt(b)
})

Effect.runPromise(program).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})

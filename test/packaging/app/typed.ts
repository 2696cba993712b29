// A user's TypeScript program, compiled by `tsc --strict` with NodeNext resolution and
// `skipLibCheck: false` against the installed package's `.d.ts` files (no driver installed), then
// run with plain `node`. It imports the root and every subpath that needs no driver.
import { Console, Effect, Option } from "effect"
import { type Election, Simba, SimbaMemoryLive, type Term } from "simba"
import * as Fencing from "simba/fencing"
import * as FencedHttp from "simba/fencing/http"
import { MemoryBackend } from "simba/memory"
import { SimbaTest } from "simba/test"

const fencedWrite = (term: Term.Term): Effect.Effect<bigint> => Effect.succeed(term.token)

const program: Effect.Effect<{ readonly lockToken: bigint; readonly leaderToken: bigint }, unknown, Simba.Simba> =
  Effect.scoped(Effect.gen(function*() {
    const lockToken = yield* Simba.withLock("orders", fencedWrite)
    const election: Election = yield* Simba.election("reporter")
    const term = yield* election.awaitLeader
    const current = yield* election.term
    yield* election.stop
    return { lockToken, leaderToken: Option.getOrElse(Option.map(current, (t) => t.token), () => term.token) }
  }))

// The driver-free subpaths are usable values, not only types.
const subpaths = [typeof Fencing.memoryStore, typeof FencedHttp.headerValue, typeof MemoryBackend.make, typeof SimbaTest.network]

// An unhandled rejection ends `node` with a non-zero exit code, which the test asserts against.
await Effect.runPromise(program.pipe(
  Effect.provide(SimbaMemoryLive),
  Effect.flatMap(({ leaderToken, lockToken }) =>
    Console.log(`subpaths ${subpaths.join(",")}`).pipe(Effect.zipRight(Console.log(`typed lock=${lockToken} leader=${leaderToken}`)))
  )
))

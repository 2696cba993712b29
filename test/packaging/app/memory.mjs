// A user's plain `node` ESM program on the installed package: one fenced critical section and one
// election on the in-memory backend. Prints one JSON line the packaging test reads.
import { Effect } from "effect"
import { Simba, SimbaMemoryLive } from "simba"

const program = Effect.gen(function*() {
  const locked = yield* Simba.withLock("orders", (term) => Effect.succeed({ lease: term.name, token: String(term.token) }))
  const election = yield* Simba.election("reporter")
  const term = yield* election.awaitLeader
  const status = yield* election.status
  yield* election.stop
  return { locked, elected: { lease: term.name, token: String(term.token), status } }
})

const result = await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(SimbaMemoryLive)))
console.log(JSON.stringify(result))

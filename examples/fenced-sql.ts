/**
 * A fenced SQL write on PostgreSQL: a lock holder that stalled past its lease wakes up and writes with
 * the term it still holds; the database refuses it, because a newer term has written since.
 *
 *   npx tsx examples/fenced-sql.ts
 *   node --conditions=simba-source --import tsx examples/fenced-sql.ts
 *
 * PostgreSQL on 127.0.0.1:5432, database `test`, user `postgres` (trust auth), or `SIMBA_PG_URL`.
 * The locks come from the in-memory backend (one process here); with a shared backend (Redis,
 * PostgreSQL) the tokens rise across every process the same way.
 *
 * `FencedSql.write(resource, term)` runs the `UPDATE` in one transaction with the fence: an upsert
 * into `simba_fence` keeps the highest token per resource and locks its row, and the `UPDATE` runs
 * only if this term's token is not below it. Nothing the late writer sends is applied.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { Effect, Either, Layer, Option, Redacted, Schema } from "effect"
import { Simba, SimbaMemoryLive } from "simba"
// In your app: import * as FencedSql from "simba/fencing/sql"
import * as FencedSql from "../src/fencing/FencedSql.js"

const PgLive = PgClient.layer(
  process.env.SIMBA_PG_URL !== undefined
    ? { url: Redacted.make(process.env.SIMBA_PG_URL) }
    : { host: "127.0.0.1", port: 5432, database: "test", username: "postgres" }
)

const Row = Schema.Array(Schema.Struct({ owner: Schema.String, writes: Schema.Number }))

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* FencedSql.ensureTable() // once per database; idempotent

  const table = `fenced_example_${process.pid}`
  const resource = `example:${table}`
  yield* Effect.addFinalizer(() =>
    Effect.orDie(Effect.all([
      sql`DROP TABLE IF EXISTS ${sql(table)}`,
      sql`DELETE FROM ${sql(FencedSql.defaultTable)} WHERE resource = ${resource}`
    ]))
  )
  yield* sql`CREATE TABLE ${sql(table)} (id INT PRIMARY KEY, owner TEXT NOT NULL, writes INT NOT NULL)`
  yield* sql`INSERT INTO ${sql(table)} (id, owner, writes) VALUES (1, 'nobody', 0)`

  /** The only way this program writes the row: fenced with the token of the term it holds. */
  const writeOwner = (who: string, term: { readonly token: bigint }) =>
    sql`UPDATE ${sql(table)} SET owner = ${who}, writes = writes + 1 WHERE id = 1`.pipe(
      FencedSql.write(resource, term)
    )

  // Worker A takes the lock and writes. Then it stalls (a GC pause, a frozen VM) still holding its
  // term: here, the lock is released and the term kept, which is what the rest of the world sees.
  const termA = yield* Simba.withLock("example-row", (term) => Effect.as(writeOwner("a", term), term))
  console.log(`A wrote with token ${termA.token}, then stalled`)

  // Meanwhile worker B gets the lock: a new term, a higher token.
  yield* Simba.withLock("example-row", (term) =>
    Effect.zipRight(writeOwner("b", term), Effect.sync(() => console.log(`B wrote with token ${term.token}`))))

  // A wakes up and carries on with the term it still has.
  const late = yield* Effect.either(writeOwner("a, late", termA))
  if (Either.isLeft(late) && late.left._tag === "FencedWriteRejectedError") {
    console.log(`A's late write was refused: ${late.left.message}`)
  } else {
    console.log("A's late write was NOT refused: this should never happen")
  }

  const [row] = yield* Effect.flatMap(sql`SELECT owner, writes FROM ${sql(table)} WHERE id = 1`, Schema.decodeUnknown(Row))
  const highest = yield* FencedSql.highest(resource)
  console.log(
    `row: owner=${row?.owner}, writes=${row?.writes}; highest token seen: ${Option.getOrElse(highest, () => 0n)}`
  )
})

program.pipe(Effect.scoped, Effect.provide(Layer.mergeAll(SimbaMemoryLive, PgLive)), Effect.runPromise).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)

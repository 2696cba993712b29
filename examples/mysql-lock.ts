/**
 * A fenced lock on MySQL/MariaDB: several copies move money between two accounts, one at a time.
 *
 *   npx tsx examples/mysql-lock.ts        (SIMBA_MYSQL_URL defaults to mysql://root@127.0.0.1:3306/test)
 *
 * The leases live in the tables `simba_session`, `simba_lease`, `simba_member` (created on start).
 * Each transfer runs under `Simba.withLock("accounts", ...)`, and its writes are *fenced*: the
 * transfer first raises the fence row of the accounts to the term's token (refused if a higher token
 * was written, which only a later lock holder can have done), then moves the money in the same
 * transaction, so a copy that paused past its lease cannot apply a stale transfer. MySQL pushes no
 * release notifications: a waiting copy takes the lock on its next try (`HeldBy.remaining`, then the
 * retry period).
 *
 * Environment: TRANSFERS (default 20), SIMBA_MYSQL_URL, SIMBA_MYSQL_TABLE_PREFIX and the SIMBA_*
 * timing settings.
 */
import { NodeRuntime } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { MysqlClient } from "@effect/sql-mysql2"
import { Config, Effect, Layer, Redacted } from "effect"
import { Simba, type Term } from "simba"
import { SimbaMysqlLive } from "simba/mysql"

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const transfers = yield* Config.integer("TRANSFERS").pipe(Config.withDefault(20))
  const sql = yield* SqlClient.SqlClient

  yield* sql`CREATE TABLE IF NOT EXISTS simba_example_account (id VARCHAR(16) PRIMARY KEY, balance BIGINT NOT NULL)`
  yield* sql`CREATE TABLE IF NOT EXISTS simba_example_fence (resource VARCHAR(64) PRIMARY KEY, token BIGINT NOT NULL)`
  yield* sql`INSERT IGNORE INTO simba_example_account VALUES ('alice', 1000), ('bob', 1000)`
  yield* sql`INSERT IGNORE INTO simba_example_fence VALUES ('accounts', 0)`

  const transfer = (term: Term.Term, amount: number) =>
    sql.withTransaction(Effect.gen(function*() {
      // The fence: its row stays locked until the transfer commits; a higher stored token refuses it.
      const [fence] = yield* sql<{ token: string }>`
        SELECT CAST(token AS CHAR) AS token FROM simba_example_fence WHERE resource = 'accounts' FOR UPDATE`
      if (fence === undefined || BigInt(fence.token) > term.token) return false
      yield* sql`UPDATE simba_example_fence SET token = ${term.token.toString()} WHERE resource = 'accounts'`
      yield* sql`UPDATE simba_example_account SET balance = balance - ${amount} WHERE id = 'alice'`
      yield* sql`UPDATE simba_example_account SET balance = balance + ${amount} WHERE id = 'bob'`
      return true
    }))

  for (let i = 0; i < transfers; i++) {
    const applied = yield* Simba.withLock("accounts", (term) =>
      Effect.gen(function*() {
        // Check the term before writing: a paused process reads isValid = false on waking.
        yield* term.ensureValid("200 millis")
        const ok = yield* transfer(term, 1)
        yield* say(`TRANSFER ${term.token} ${ok ? "applied" : "rejected"} ${process.pid}`)
        return ok
      }))
    if (!applied) yield* say("a later lock holder wrote first: this transfer was not applied")
  }
  const balances = yield* sql<{ id: string; balance: string }>`
    SELECT id, CAST(balance AS CHAR) AS balance FROM simba_example_account ORDER BY id`
  yield* say(`BALANCES ${balances.map((b) => `${b.id}=${b.balance}`).join(" ")}`)
})

// The example's own connection for the accounts, to the same database as the leases.
const AccountsDatabase = Layer.unwrapEffect(
  Effect.map(
    Config.redacted("SIMBA_MYSQL_URL").pipe(Config.withDefault(Redacted.make("mysql://root@127.0.0.1:3306/test"))),
    (url) => MysqlClient.layer({ url, maxConnections: 2 })
  )
)

program.pipe(Effect.scoped, Effect.provide(Layer.merge(SimbaMysqlLive, AccountsDatabase)), NodeRuntime.runMain)

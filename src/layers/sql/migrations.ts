/**
 * The schema of the SQL backends, per dialect: the tables (`<prefix>session`, `lease`, `member`, and
 * `waiter`, the unlogged `boot`, `released` (the releases of each session, counted apart from its row),
 * and `pool` and `pool_waiter` (semaphores and read-write locks, `pgPools.ts`) on PostgreSQL) and one
 * routine per SPI operation (`<prefix>v7_*` PL/pgSQL functions,
 * `<prefix>v4_*` MySQL procedures, in `mysqlMigrations.ts`), so every operation is one round trip with every decision about
 * time taken by the database inside it. Lease rows are never deleted, so tokens only rise; routines
 * lock lease rows, then session rows in id order, then read the clock. The version in the routines'
 * names lets two versions run side by side during a rolling upgrade. Details: docs/design.md,
 * "PostgreSQL and MySQL/MariaDB".
 */
import * as PgPools from "./pgPools.js"

/** What the migration creates for a table prefix. */
export interface Schema {
  /** The name of the routine of one operation, e.g. `simba_v3_acquire`. */
  readonly routine: (operation: string) => string
  /** Statements run in order by `migrate`, each one round trip. */
  readonly statements: ReadonlyArray<string>
  /** A routine whose presence means the whole schema of this version is installed. */
  readonly marker: string
}

/** The default table prefix. */
export const defaultPrefix = "simba_"

/** Table prefixes the backends accept: they are spliced into SQL text, so only these characters. */
export const prefixPattern = /^[a-z][a-z0-9_]{0,29}$/

/** The PostgreSQL `NOTIFY` channel the routines publish hints on. */
export const channel = (prefix: string): string => `${prefix}hints`

/**
 * The tables of a prefix: `session`, `lease`, `member` on both dialects; `waiter` (a lease's FIFO
 * queue), the unlogged `boot` and `released` (a session's own releases, see `postgres`) on
 * PostgreSQL; `pool` and `poolWaiter` (semaphores and read-write locks) on both.
 */
export const tables = (prefix: string) => ({
  session: `${prefix}session`,
  lease: `${prefix}lease`,
  member: `${prefix}member`,
  waiter: `${prefix}waiter`,
  boot: `${prefix}boot`,
  released: `${prefix}released`,
  pool: `${prefix}pool`,
  poolWaiter: `${prefix}pool_waiter`
})

/** Name of the routine of one operation, for a schema version. */
export const routine = (prefix: string, version: number, operation: string): string => `${prefix}v${version}_${operation}`

/** The schema versions the routines carry in their names. */
export const postgresVersion = 7
export const mysqlVersion = 4

/** PostgreSQL's default `lockDelay`, also the one the routines of older schema versions pass on (`postgresUpgrades`). */
export const defaultLockDelayMs = 15_000

/** The schema versions on PostgreSQL whose routines `postgresUpgrades` turns into calls of this version's. */
export const olderPostgresVersions = [1, 2, 3, 4, 5, 6] as const

/**
 * PostgreSQL 12+: tables, then one PL/pgSQL function per operation, each returning one `json` value.
 *
 * Commits that grant, release or renew do not wait for the WAL flush (`synchronous_commit = off` for
 * their transaction): a crash may lose the last few hundred ms of them. Two rules make that safe, as
 * on Redis: a token is `max(stored + 1, the database clock in µs)`, so a grant after a lost one gets
 * a larger token; and `<prefix>boot`, an unlogged table, which PostgreSQL empties after a crash and
 * which is empty on a promoted replica: a routine that finds it empty knows commits may be lost and
 * grants nothing for the caller's lock-delay, so every holder that may still believe in a lost grant
 * or renewal passes its deadline first. A session re-asking for a lease it held since before the loss
 * gets a new token (its release may be what was lost). docs/sql.md, "Commits without a flush".
 *
 * A session's lease set has a version (renewals list the set only when it changed since the version
 * the client names): its row's `version`, bumped by every grant and every change made to it by
 * others, plus its count in `<prefix>released`, bumped by its own releases (since version 7). A
 * release does not write its session's row: the release a client sends behind its back would
 * otherwise hold that row's lock until it commits, and the client's next acquire, which bumps the
 * version in its own transaction, would wait for it whenever the release got there first (measured:
 * an acquire sent while the previous release runs, median 328 -> 304 µs).
 */
export const postgres = (prefix: string): Schema => {
  const { boot, lease, member, pool, poolWaiter, released, session, waiter } = tables(prefix)
  const fn = (operation: string) => routine(prefix, postgresVersion, operation)
  const notify = (payload: string) => `PERFORM pg_notify('${channel(prefix)}', ${payload});`
  const ms = (millis: string) => `${millis} * interval '1 millisecond'`
  // This transaction's commit returns before its WAL is flushed (see above).
  const noFlush = `PERFORM set_config('synchronous_commit', 'off', true);`
  // The session p_sid released a lease: its lease set's version moves on, without its session row.
  const releasedBy = `INSERT INTO ${released} (session_id, n) VALUES (p_sid, 1)
    ON CONFLICT (session_id) DO UPDATE SET n = ${released}.n + 1;`
  // A token never below the database clock in microseconds.
  const floored = (token: string, at: string) => `greatest(${token}, floor(extract(epoch FROM ${at}) * 1000000)::bigint)`
  // Reads the boot row into v_resume (grants allowed from) and v_lost (when a loss was found); an
  // empty table is a loss found now: grants resume after p_delay ms (v_found = true, logged by the client).
  const readBoot = `SELECT resume_at, lost_at INTO v_resume, v_lost FROM ${boot} WHERE id = 1;
  IF NOT FOUND THEN
    INSERT INTO ${boot} (id, resume_at, lost_at) VALUES (1, clock_timestamp() + ${ms("p_delay")}, clock_timestamp())
      ON CONFLICT (id) DO NOTHING;
    v_found := FOUND;
    SELECT resume_at, lost_at INTO v_resume, v_lost FROM ${boot} WHERE id = 1;
  END IF;`
  const pools: PgPools.PgPoolSchema = {
    session,
    lease,
    waiter,
    boot,
    pool,
    poolWaiter,
    fn,
    notify,
    floored,
    noFlush,
    releasedBy
  }
  return {
    routine: fn,
    marker: fn("members"),
    statements: [
      `CREATE TABLE IF NOT EXISTS ${session} (
  id varchar(32) PRIMARY KEY,
  expires_at timestamptz NOT NULL,
  version bigint NOT NULL DEFAULT 0
)`,
      `CREATE INDEX IF NOT EXISTS ${session}_expires ON ${session} (expires_at)`,
      `CREATE TABLE IF NOT EXISTS ${lease} (
  name varchar(128) PRIMARY KEY,
  session_id varchar(32),
  token bigint NOT NULL DEFAULT 0,
  acquired_at timestamptz
)`,
      `CREATE INDEX IF NOT EXISTS ${lease}_session ON ${lease} (session_id)`,
      // Since version 5: the holder's grant reserved a block of tokens (its client may cache the
      // lease), so a session refused it is told ("w:<holder>:<name>"). Metadata only on PostgreSQL 11+.
      `ALTER TABLE ${lease} ADD COLUMN IF NOT EXISTS cached boolean NOT NULL DEFAULT false`,
      `CREATE TABLE IF NOT EXISTS ${member} (
  group_name varchar(128) NOT NULL,
  session_id varchar(32) NOT NULL,
  PRIMARY KEY (group_name, session_id)
)`,
      `CREATE INDEX IF NOT EXISTS ${member}_session ON ${member} (session_id)`,
      // The waiter queue of a lease: sessions refused it, oldest first; a release hands the lease to
      // the first that is still alive.
      `CREATE TABLE IF NOT EXISTS ${waiter} (
  name varchar(128) NOT NULL,
  session_id varchar(32) NOT NULL,
  since timestamptz NOT NULL,
  PRIMARY KEY (name, session_id)
)`,
      `CREATE INDEX IF NOT EXISTS ${waiter}_session ON ${waiter} (session_id)`,
      // Since version 7: each session's own releases, counted apart from its row (see above).
      `CREATE TABLE IF NOT EXISTS ${released} (
  session_id varchar(32) PRIMARY KEY,
  n bigint NOT NULL
)`,
      // Created with its row by the migration that creates it: until then every commit was durable
      // (earlier versions), so nothing can have been lost. Never written again but after a loss.
      `DO $d$
BEGIN
  IF to_regclass('${boot}') IS NULL THEN
    CREATE UNLOGGED TABLE ${boot} (
      id smallint PRIMARY KEY,
      resume_at timestamptz NOT NULL,
      lost_at timestamptz
    );
    INSERT INTO ${boot} (id, resume_at, lost_at) VALUES (1, clock_timestamp(), NULL);
  END IF;
END $d$`,
      ...PgPools.poolTables(pools),
      `CREATE OR REPLACE FUNCTION ${fn("open")}(p_sid varchar, p_ttl bigint) RETURNS json LANGUAGE plpgsql AS $f$
BEGIN
  ${noFlush}
  -- Sweep a few expired sessions (clients that died without closing): rows and memberships only;
  -- their leases are free already, since their holder is gone.
  WITH dead AS (
    SELECT id FROM ${session} WHERE expires_at < clock_timestamp() ORDER BY expires_at LIMIT 16 FOR UPDATE SKIP LOCKED
  ), gone AS (
    DELETE FROM ${member} m USING dead WHERE m.session_id = dead.id
  ), unqueued AS (
    DELETE FROM ${waiter} w USING dead WHERE w.session_id = dead.id
  ), uncounted AS (
    DELETE FROM ${released} r USING dead WHERE r.session_id = dead.id
  )
  DELETE FROM ${session} s USING dead WHERE s.id = dead.id;
  INSERT INTO ${session} (id, expires_at) VALUES (p_sid, clock_timestamp() + ${ms("p_ttl")});
  RETURN json_build_object('status', 'live', 'remaining', p_ttl);
END $f$`,
      `CREATE OR REPLACE FUNCTION ${fn("keep_alive")}(p_sid varchar, p_ttl bigint, p_known bigint) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_now timestamptz;
  v_expires timestamptz;
  v_version bigint;
BEGIN
  ${noFlush}
  SELECT expires_at, version INTO v_expires, v_version FROM ${session} WHERE id = p_sid FOR UPDATE;
  -- Read before the list (its own statement, a later snapshot): a release committing in between
  -- is in the list and not in this version, so the next renewal lists again; never the other way.
  v_version := v_version + coalesce((SELECT n FROM ${released} WHERE session_id = p_sid), 0);
  v_now := clock_timestamp();
  IF v_expires IS NULL OR v_expires <= v_now THEN
    RETURN json_build_object('status', 'expired');
  END IF;
  UPDATE ${session} SET expires_at = v_now + ${ms("p_ttl")} WHERE id = p_sid;
  RETURN json_build_object(
    'status', 'live',
    'remaining', p_ttl,
    'version', v_version::text,
    'leases', CASE WHEN p_known IS NOT NULL AND p_known = v_version THEN NULL ELSE (
      SELECT coalesce(json_agg(json_build_array(l.name, l.token::text)), '[]'::json)
      FROM ${lease} l WHERE l.session_id = p_sid
    ) END,
    'groups', (
      SELECT coalesce(json_agg(json_build_array(m.group_name, m.session_id)), '[]'::json)
      FROM ${member} g
      JOIN ${member} m ON m.group_name = g.group_name
      JOIN ${session} s ON s.id = m.session_id
      WHERE g.session_id = p_sid AND s.expires_at > v_now
    )
  );
END $f$`,
      // Its holds end (their rows go) and the pools it held or waited in are served once it is gone:
      // their counter rows are locked first (a pool's lock), then its leases.
      `CREATE OR REPLACE FUNCTION ${fn("close")}(p_sid varchar) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_name varchar;
  v_pools varchar[];
BEGIN
  ${noFlush}
  v_pools := ARRAY(
    SELECT h.pool FROM ${lease} h WHERE h.session_id = p_sid AND h.pool IS NOT NULL
    UNION SELECT w.pool FROM ${pools.poolWaiter} w WHERE w.session_id = p_sid
    UNION SELECT l.name FROM ${lease} l JOIN ${pool} p ON p.name = l.name WHERE l.session_id = p_sid
    ORDER BY 1);
  PERFORM 1 FROM ${lease} WHERE name = ANY (v_pools) ORDER BY name FOR UPDATE;
  PERFORM 1 FROM ${lease} WHERE session_id = p_sid ORDER BY name FOR UPDATE;
  DELETE FROM ${session} WHERE id = p_sid;
  DELETE FROM ${released} WHERE session_id = p_sid;
  DELETE FROM ${lease} WHERE session_id = p_sid AND pool IS NOT NULL;
  FOR v_name IN UPDATE ${lease} SET session_id = NULL WHERE session_id = p_sid RETURNING name LOOP
    ${notify("'r:' || v_name")}
  END LOOP;
  FOR v_name IN DELETE FROM ${member} WHERE session_id = p_sid RETURNING group_name LOOP
    ${notify("'g:' || v_name")}
  END LOOP;
  DELETE FROM ${waiter} WHERE session_id = p_sid;
  DELETE FROM ${pools.poolWaiter} WHERE session_id = p_sid;
  FOREACH v_name IN ARRAY v_pools LOOP
    PERFORM ${fn("pool_serve")}(v_name);
  END LOOP;
  RETURN json_build_object('status', 'ok');
END $f$`,
      // During a lock-delay nothing is granted: the answer is "held" with the delay's time left. A
      // name never acquired is granted by its first row: one insert and the requester's version bump.
      // A requester whose session turned out dead leaves a row naming it, which is a free lease (its
      // holder is gone); its token is simply spent. A free lease is granted by the version bump (which
      // is the requester's row lock) and the lease update. A new grant reserves p_block tokens: its
      // token is the block's last ('reserved' says how many), so every later grant is above the block.
      // A hold name, or a name whose pool lives (checked under the lease row lock), takes the pool
      // rule (pool_acquire, pgPools.ts).
      `CREATE OR REPLACE FUNCTION ${fn("acquire")}(p_sid varchar, p_name varchar, p_delay bigint, p_block bigint) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_now timestamptz;
  v_holder varchar;
  v_token bigint;
  v_cached boolean;
  v_acquired timestamptz;
  v_own timestamptz;
  v_held timestamptz;
  v_resume timestamptz;
  v_lost timestamptz;
  v_found boolean := false;
  v_reply json;
BEGIN
  ${noFlush}
  ${readBoot}
  IF v_resume > clock_timestamp() THEN
    SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid;
    SELECT token INTO v_token FROM ${lease} WHERE name = p_name;
    v_now := clock_timestamp();
    IF v_own IS NULL OR v_own <= v_now THEN
      RETURN json_build_object('lost', v_found, 'status', 'expired');
    END IF;
    RETURN json_build_object('lost', v_found, 'status', 'held', 'token', CASE WHEN v_token > 0 THEN v_token::text END,
      'remaining', ceil(extract(epoch FROM v_resume - v_now) * 1000));
  END IF;
  IF strpos(p_name, '~') > 0 THEN
    RETURN ${fn("pool_acquire")}(p_sid, p_name, p_block, v_found);
  END IF;
  v_now := clock_timestamp();
  INSERT INTO ${lease} (name, session_id, token, acquired_at, cached)
    VALUES (p_name, p_sid, ${floored("1", "v_now")} + p_block - 1, v_now, p_block > 1)
    ON CONFLICT (name) DO NOTHING RETURNING token INTO v_token;
  IF FOUND THEN
    UPDATE ${session} SET version = version + 1 WHERE id = p_sid RETURNING expires_at INTO v_own;
    IF v_own IS NULL OR v_own <= clock_timestamp() THEN
      RETURN json_build_object('lost', v_found, 'status', 'expired');
    END IF;
    RETURN json_build_object('lost', v_found, 'status', 'granted', 'token', v_token::text, 'reserved', p_block);
  END IF;
  SELECT session_id, token, acquired_at, cached INTO v_holder, v_token, v_acquired, v_cached FROM ${lease} WHERE name = p_name FOR UPDATE;
  IF EXISTS (SELECT 1 FROM ${pool} WHERE name = p_name) THEN
    v_reply := ${fn("pool_acquire")}(p_sid, p_name, p_block, v_found);
    IF v_reply IS NOT NULL THEN
      RETURN v_reply;
    END IF;
    -- The pool was empty (and is gone): the plain rule, on the row as serving it left it.
    SELECT session_id, token, acquired_at, cached INTO v_holder, v_token, v_acquired, v_cached FROM ${lease} WHERE name = p_name;
  END IF;
  IF v_holder IS NULL THEN
    UPDATE ${session} SET version = version + 1 WHERE id = p_sid RETURNING expires_at INTO v_own;
  ELSIF v_holder = p_sid THEN
    SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
  ELSIF p_sid < v_holder THEN
    SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
    SELECT expires_at INTO v_held FROM ${session} WHERE id = v_holder FOR SHARE;
  ELSE
    SELECT expires_at INTO v_held FROM ${session} WHERE id = v_holder FOR SHARE;
    SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
  END IF;
  v_now := clock_timestamp();
  IF v_own IS NULL OR v_own <= v_now THEN
    RETURN json_build_object('lost', v_found, 'status', 'expired');
  END IF;
  IF v_holder = p_sid THEN
    -- Its own lease: the same term (a retried acquire), unless granted before a loss was found,
    -- when the release that ended that term may be what was lost: a new token then.
    IF v_lost IS NULL OR v_acquired >= v_lost THEN
      RETURN json_build_object('lost', v_found, 'status', 'granted', 'token', v_token::text);
    END IF;
    v_held := NULL;
  END IF;
  IF v_held > v_now THEN
    INSERT INTO ${waiter} (name, session_id, since) VALUES (p_name, p_sid, v_now) ON CONFLICT DO NOTHING;
    IF v_cached THEN
      ${notify("'w:' || v_holder || ':' || p_name")}
    END IF;
    RETURN json_build_object('lost', v_found, 'status', 'held', 'token', v_token::text,
      'remaining', floor(extract(epoch FROM v_held - v_now) * 1000));
  END IF;
  UPDATE ${lease} SET session_id = p_sid, token = ${floored("v_token + 1", "v_now")} + p_block - 1, acquired_at = v_now,
    cached = p_block > 1 WHERE name = p_name
    RETURNING token INTO v_token;
  IF v_holder IS NOT NULL THEN
    UPDATE ${session} SET version = version + 1 WHERE id = p_sid;
  END IF;
  DELETE FROM ${waiter} WHERE name = p_name AND session_id = p_sid;
  RETURN json_build_object('lost', v_found, 'status', 'granted', 'token', v_token::text, 'reserved', p_block);
END $f$`,
      // A release hands the lease to the first waiter still alive, in the same transaction (the next
      // token, as its own acquire would get), and notifies `h:<session>:<token>:<name>`; with waiters
      // queued but none alive, or during a lock-delay, it notifies `r:<name>`; with none queued,
      // nothing (a waiter that queued after the peek is found by the loop). Session rows are locked in
      // id order, as in acquire. A hold's release, and a writer's while its pool lives, serve the pool instead.
      `CREATE OR REPLACE FUNCTION ${fn("release")}(p_sid varchar, p_name varchar, p_token bigint, p_delay bigint) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_next varchar;
  v_expires timestamptz;
  v_queued boolean;
  v_token bigint;
  v_resume timestamptz;
  v_lost timestamptz;
  v_found boolean := false;
BEGIN
  IF strpos(p_name, '~') > 0 THEN
    RETURN ${fn("pool_release")}(p_sid, p_name, p_token);
  END IF;
  ${noFlush}
  -- With a queue, the lease row is locked and written once, to its next holder. The peek takes no
  -- lock: a waiter queued after it is found by the loop (it queues under the lease row lock).
  v_queued := EXISTS (SELECT 1 FROM ${waiter} WHERE name = p_name);
  IF v_queued THEN
    PERFORM 1 FROM ${lease} WHERE name = p_name AND session_id = p_sid AND token = p_token FOR UPDATE;
  ELSE
    UPDATE ${lease} SET session_id = NULL WHERE name = p_name AND session_id = p_sid AND token = p_token;
  END IF;
  IF NOT FOUND THEN
    RETURN json_build_object('status', 'ok');
  END IF;
  IF EXISTS (SELECT 1 FROM ${pool} WHERE name = p_name) THEN
    UPDATE ${lease} SET session_id = NULL WHERE name = p_name;
    ${releasedBy}
    PERFORM ${fn("pool_serve")}(p_name);
    ${notify("'r:' || p_name")}
    RETURN json_build_object('status', 'released');
  END IF;
  ${readBoot}
  WHILE v_resume <= clock_timestamp() LOOP
    SELECT w.session_id INTO v_next FROM ${waiter} w WHERE w.name = p_name ORDER BY w.since, w.session_id LIMIT 1;
    EXIT WHEN v_next IS NULL;
    PERFORM 1 FROM ${session} WHERE id IN (p_sid, v_next) ORDER BY id FOR UPDATE;
    DELETE FROM ${waiter} WHERE name = p_name AND session_id = v_next;
    SELECT expires_at INTO v_expires FROM ${session} WHERE id = v_next;
    EXIT WHEN v_expires > clock_timestamp();
    v_next := NULL;
  END LOOP;
  ${releasedBy}
  IF v_next IS NULL THEN
    -- Waiters queued but none taken (all gone, or a lock-delay runs): they hear of the free lease.
    -- With nobody queued nobody is told: every client's LISTEN connection would wake for it.
    IF v_queued THEN
      UPDATE ${lease} SET session_id = NULL WHERE name = p_name;
      ${notify("'r:' || p_name")}
    END IF;
  ELSE
    UPDATE ${lease} SET session_id = v_next, token = ${floored("p_token + 1", "clock_timestamp()")}, acquired_at = clock_timestamp(),
      cached = false WHERE name = p_name RETURNING token INTO v_token;
    UPDATE ${session} SET version = version + 1 WHERE id = v_next;
    ${notify("'h:' || v_next || ':' || v_token::text || ':' || p_name")}
  END IF;
  RETURN json_build_object('lost', v_found, 'status', 'released');
END $f$`,
      `CREATE OR REPLACE FUNCTION ${fn("join")}(p_sid varchar, p_group varchar) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_expires timestamptz;
BEGIN
  SELECT expires_at INTO v_expires FROM ${session} WHERE id = p_sid FOR SHARE;
  IF v_expires IS NULL OR v_expires <= clock_timestamp() THEN
    RETURN json_build_object('status', 'expired');
  END IF;
  INSERT INTO ${member} (group_name, session_id) VALUES (p_group, p_sid) ON CONFLICT DO NOTHING;
  IF FOUND THEN
    ${notify("'g:' || p_group")}
  END IF;
  RETURN json_build_object('status', 'joined');
END $f$`,
      `CREATE OR REPLACE FUNCTION ${fn("leave")}(p_sid varchar, p_group varchar) RETURNS json LANGUAGE plpgsql AS $f$
BEGIN
  DELETE FROM ${member} WHERE group_name = p_group AND session_id = p_sid;
  IF FOUND THEN
    ${notify("'g:' || p_group")}
  END IF;
  RETURN json_build_object('status', 'ok');
END $f$`,
      `CREATE OR REPLACE FUNCTION ${fn("members")}(p_group varchar) RETURNS json LANGUAGE plpgsql AS $f$
BEGIN
  RETURN json_build_object('status', 'ok', 'members', (
    SELECT coalesce(json_agg(m.session_id), '[]'::json)
    FROM ${member} m JOIN ${session} s ON s.id = m.session_id
    WHERE m.group_name = p_group AND s.expires_at > clock_timestamp()
  ));
END $f$`,
      ...PgPools.poolRoutines(pools),
      // Last: an older client that finds its routines (its marker) skips its own migration.
      ...olderPostgresVersions.flatMap((version) => postgresUpgrades(prefix, version))
    ]
  }
}

/**
 * Statements that make the routines of an older schema version calls of this version's, installed by
 * this version's migration whether or not that version was ever installed: a client of it still
 * running (a rolling upgrade), or started later, then keeps this version's rules (no grant during a
 * lock-delay, tokens floored by the clock, no waiting for a flush), and its own migration finds its
 * marker and installs nothing. Versions 1 to 3 have these signatures and the lock-delay
 * `defaultLockDelayMs`; version 4's acquire and release take the lock-delay as their last parameter,
 * and its acquire reserves no block (one token); versions 5 and 6 have this version's signatures, and
 * 6's clients also call `withdraw`.
 */
export const postgresUpgrades = (prefix: string, version: number): ReadonlyArray<string> => {
  const older = (operation: string) => routine(prefix, version, operation)
  const fn = (operation: string) => routine(prefix, postgresVersion, operation)
  const delay = version >= 4 ? "p_delay" : String(defaultLockDelayMs)
  const delayParam = version >= 4 ? ", p_delay bigint" : ""
  // Version 5's acquire reserves a block of tokens, as this version's.
  const blockParam = version >= 5 ? ", p_block bigint" : ""
  const block = version >= 5 ? "p_block" : "1"
  const wrapper = (operation: string, params: string, call: string) =>
    `CREATE OR REPLACE FUNCTION ${older(operation)}(${params}) RETURNS json LANGUAGE sql AS $f$ SELECT ${fn(operation)}(${call}) $f$`
  return [
    wrapper("open", "p_sid varchar, p_ttl bigint", "p_sid, p_ttl"),
    wrapper("keep_alive", "p_sid varchar, p_ttl bigint, p_known bigint", "p_sid, p_ttl, p_known"),
    wrapper("close", "p_sid varchar", "p_sid"),
    wrapper("acquire", `p_sid varchar, p_name varchar${delayParam}${blockParam}`, `p_sid, p_name, ${delay}, ${block}`),
    wrapper("release", `p_sid varchar, p_name varchar, p_token bigint${delayParam}`, `p_sid, p_name, p_token, ${delay}`),
    wrapper("join", "p_sid varchar, p_group varchar", "p_sid, p_group"),
    wrapper("leave", "p_sid varchar, p_group varchar", "p_sid, p_group"),
    wrapper("members", "p_group varchar", "p_group"),
    ...(version >= 6 ? [wrapper("withdraw", "p_sid varchar, p_name varchar", "p_sid, p_name")] : [])
  ]
}

/**
 * PostgreSQL, since schema version 6: semaphores and read-write locks (the pool rule of
 * `src/layers/memory/pools.ts`, docs/design.md "Semaphores and read-write locks") as tables and
 * PL/pgSQL routines that `migrations.ts` installs beside the lease routines.
 *
 * - A hold is a row of `<prefix>lease` of its own, named by its hold name, with `pool` (its pool's
 *   name) and `weight` set: renewed, listed and released as any lease, deleted when it ends (its
 *   token comes from the pool's counter, so no row needs to keep one).
 * - The pool's plain lease row `pool` is its counter and its lock: every routine that reads or
 *   changes a pool first locks that row (`FOR UPDATE`, inserted with token 0 when missing), so a
 *   pool's changes are serialised, and a writer (the plain lease) is granted under the same lock.
 * - `<prefix>pool` keeps a pool's kind and limit while it has live holds or waiters, and the counter
 *   of its queue (`seq`); `<prefix>pool_waiter` is its FIFO queue (a hold name, or the pool's name for
 *   a writer). Holds and waiters of sessions found gone are dropped by the next routine that looks
 *   (`pool_live`), and the pool row with them once nothing is left.
 * - `pool_serve` grants the queue's head while it fits and notifies `h:<session>:<token>:<name>`
 *   on the hints channel for each, the hand-off of a plain lease, so the waiter adopts the grant
 *   without a round trip. Nothing is served during a lock-delay (the boot row, see `migrations.ts`).
 */

/** What the pool routines need of the schema `migrations.ts` builds. */
export interface PgPoolSchema {
  readonly session: string
  readonly lease: string
  readonly waiter: string
  readonly boot: string
  /** `<prefix>pool` and `<prefix>pool_waiter`. */
  readonly pool: string
  readonly poolWaiter: string
  /** The name of this version's routine of an operation. */
  readonly fn: (operation: string) => string
  /** A `PERFORM pg_notify(...)` of the payload expression on the hints channel. */
  readonly notify: (payload: string) => string
  /** A token never below the database clock in µs: `floored(token, at)`. */
  readonly floored: (token: string, at: string) => string
  /** Turns off the WAL flush wait for the transaction (see `migrations.ts`). */
  readonly noFlush: string
  /** Moves the version of `p_sid`'s lease set on for a release of its own (see `migrations.ts`). */
  readonly releasedBy: string
}

/** The longest hold name (`LeaseName.holdName`: a pool name of 128 characters and its parts). */
export const holdNameColumn = "varchar(200)"

/** Tables, columns and indexes, all idempotent. */
export const poolTables = (s: PgPoolSchema): ReadonlyArray<string> => [
  // Hold names are longer than lease names: widen the name columns (metadata only), once.
  `DO $d$
BEGIN
  IF (SELECT atttypmod - 4 FROM pg_attribute WHERE attrelid = '${s.lease}'::regclass AND attname = 'name') < 200 THEN
    ALTER TABLE ${s.lease} ALTER COLUMN name TYPE ${holdNameColumn};
  END IF;
  IF (SELECT atttypmod - 4 FROM pg_attribute WHERE attrelid = '${s.waiter}'::regclass AND attname = 'name') < 200 THEN
    ALTER TABLE ${s.waiter} ALTER COLUMN name TYPE ${holdNameColumn};
  END IF;
END $d$`,
  // A hold's row names its pool and its permits (1 for a read hold); NULL on plain leases.
  `ALTER TABLE ${s.lease} ADD COLUMN IF NOT EXISTS pool varchar(128)`,
  `ALTER TABLE ${s.lease} ADD COLUMN IF NOT EXISTS weight integer`,
  `CREATE INDEX IF NOT EXISTS ${s.lease}_pool ON ${s.lease} (pool) WHERE pool IS NOT NULL`,
  `CREATE TABLE IF NOT EXISTS ${s.pool} (
  name varchar(128) PRIMARY KEY,
  kind varchar(16) NOT NULL,
  lim integer NOT NULL,
  seq bigint NOT NULL DEFAULT 0
)`,
  `CREATE TABLE IF NOT EXISTS ${s.poolWaiter} (
  pool varchar(128) NOT NULL,
  name ${holdNameColumn} NOT NULL,
  session_id varchar(32) NOT NULL,
  mode varchar(8) NOT NULL,
  weight integer NOT NULL,
  seq bigint NOT NULL,
  PRIMARY KEY (name, session_id)
)`,
  `CREATE INDEX IF NOT EXISTS ${s.poolWaiter}_queue ON ${s.poolWaiter} (pool, seq)`,
  `CREATE INDEX IF NOT EXISTS ${s.poolWaiter}_session ON ${s.poolWaiter} (session_id)`
]

const describe = (kind: string, limit: string) =>
  `CASE WHEN ${kind} = 'semaphore' THEN 'semaphore of ' || ${limit} || ' permits' ELSE 'read-write lock' END`

/**
 * The pool routines. Internal ones (`pool_live`, `pool_fits`, `pool_grant`, `pool_serve`) run inside
 * a caller that holds the pool's counter row lock; `pool_acquire`, `pool_release` and `withdraw` are
 * called by `acquire`, `release` (for hold names, and a plain name whose pool lives) and the client.
 */
export const poolRoutines = (s: PgPoolSchema): ReadonlyArray<string> => {
  const live = (sid: string) => `EXISTS (SELECT 1 FROM ${s.session} s WHERE s.id = ${sid} AND s.expires_at > clock_timestamp())`
  const writer = (pool: string) =>
    `EXISTS (SELECT 1 FROM ${s.lease} l JOIN ${s.session} s ON s.id = l.session_id WHERE l.name = ${pool} AND s.expires_at > clock_timestamp())`
  return [
    // Drops the holds and waiters of gone sessions; deletes the pool once it has none: whether it lives.
    `CREATE OR REPLACE FUNCTION ${s.fn("pool_live")}(p_pool varchar) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM 1 FROM ${s.pool} WHERE name = p_pool;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  DELETE FROM ${s.lease} h WHERE h.pool = p_pool AND NOT ${live("h.session_id")};
  DELETE FROM ${s.poolWaiter} w WHERE w.pool = p_pool AND NOT ${live("w.session_id")};
  IF EXISTS (SELECT 1 FROM ${s.lease} WHERE pool = p_pool) OR EXISTS (SELECT 1 FROM ${s.poolWaiter} WHERE pool = p_pool) THEN
    RETURN true;
  END IF;
  DELETE FROM ${s.pool} WHERE name = p_pool;
  RETURN false;
END $f$`,
    `CREATE OR REPLACE FUNCTION ${s.fn("pool_fits")}(p_pool varchar, p_lim integer, p_mode varchar, p_weight integer) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
  IF p_mode = 'read' THEN
    RETURN NOT ${writer("p_pool")};
  ELSIF p_mode = 'write' THEN
    RETURN NOT EXISTS (SELECT 1 FROM ${s.lease} WHERE pool = p_pool) AND NOT ${writer("p_pool")};
  END IF;
  RETURN (SELECT coalesce(sum(weight), 0) FROM ${s.lease} WHERE pool = p_pool) + p_weight <= p_lim;
END $f$`,
    // The next token of the pool's counter: a hold's row, or (a writer) the plain lease itself with a
    // block of p_block tokens. The grantee leaves the queues and its lease set's version changes.
    `CREATE OR REPLACE FUNCTION ${s.fn("pool_grant")}(p_pool varchar, p_name varchar, p_sid varchar, p_mode varchar, p_weight integer, p_block bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_token bigint;
BEGIN
  IF p_mode = 'write' THEN
    UPDATE ${s.lease} SET session_id = p_sid, token = ${s.floored("token + 1", "v_now")} + p_block - 1, acquired_at = v_now,
      cached = p_block > 1 WHERE name = p_pool RETURNING token INTO v_token;
    DELETE FROM ${s.waiter} WHERE name = p_pool AND session_id = p_sid;
  ELSE
    UPDATE ${s.lease} SET token = ${s.floored("token + 1", "v_now")} WHERE name = p_pool RETURNING token INTO v_token;
    INSERT INTO ${s.lease} (name, session_id, token, acquired_at, cached, pool, weight)
      VALUES (p_name, p_sid, v_token, v_now, false, p_pool, p_weight)
      ON CONFLICT (name) DO UPDATE SET session_id = excluded.session_id, token = excluded.token,
        acquired_at = excluded.acquired_at, cached = false, pool = excluded.pool, weight = excluded.weight;
  END IF;
  DELETE FROM ${s.poolWaiter} WHERE name = p_name AND session_id = p_sid;
  UPDATE ${s.session} SET version = version + 1 WHERE id = p_sid;
  RETURN v_token;
END $f$`,
    // Grants the queue's head while it fits, each pushed as a hand-off; a head whose hold name another
    // session holds (its client's request retried from a new session) leaves the queue: never twice.
    `CREATE OR REPLACE FUNCTION ${s.fn("pool_serve")}(p_pool varchar) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
  v_lim integer;
  v_head record;
  v_token bigint;
  v_resume timestamptz;
BEGIN
  IF NOT ${s.fn("pool_live")}(p_pool) THEN
    RETURN;
  END IF;
  SELECT resume_at INTO v_resume FROM ${s.boot} WHERE id = 1;
  IF v_resume IS NULL OR v_resume > clock_timestamp() THEN
    RETURN;
  END IF;
  SELECT lim INTO v_lim FROM ${s.pool} WHERE name = p_pool;
  LOOP
    SELECT name, session_id, mode, weight INTO v_head FROM ${s.poolWaiter} WHERE pool = p_pool ORDER BY seq LIMIT 1;
    EXIT WHEN NOT FOUND;
    IF v_head.mode <> 'write' AND EXISTS (SELECT 1 FROM ${s.lease} WHERE name = v_head.name) THEN
      DELETE FROM ${s.poolWaiter} WHERE name = v_head.name AND session_id = v_head.session_id;
    ELSE
      EXIT WHEN NOT ${s.fn("pool_fits")}(p_pool, v_lim, v_head.mode, v_head.weight);
      v_token := ${s.fn("pool_grant")}(p_pool, v_head.name, v_head.session_id, v_head.mode, v_head.weight, 1);
      ${s.notify("'h:' || v_head.session_id || ':' || v_token::text || ':' || v_head.name")}
    END IF;
  END LOOP;
  PERFORM ${s.fn("pool_live")}(p_pool);
END $f$`,
    // An acquire of a hold name, or of a plain name whose pool row exists (a writer): the pool rule.
    // NULL for a plain name whose pool turned out empty: the caller applies the plain rule (under the
    // same row lock). The caller checked the session's lock-delay; p_lost is its finding.
    `CREATE OR REPLACE FUNCTION ${s.fn("pool_acquire")}(p_sid varchar, p_name varchar, p_block bigint, p_lost boolean) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_hold boolean := strpos(p_name, '~') > 0;
  v_pool varchar := split_part(p_name, '~', 1);
  v_mode varchar := 'write';
  v_kind varchar;
  v_weight integer := 1;
  v_lim integer := 0;
  v_have_kind varchar;
  v_have_lim integer;
  v_own timestamptz;
  v_holder varchar;
  v_held timestamptz;
  v_token bigint;
  v_cached boolean;
  v_head_name varchar;
  v_head_sid varchar;
  v_seq bigint;
  v_waited boolean;
BEGIN
  IF v_hold THEN
    IF split_part(p_name, '~', 2) = 'r' THEN
      v_mode := 'read';
      v_kind := 'rw';
    ELSE
      v_mode := 'permits';
      v_kind := 'semaphore';
      v_weight := split_part(p_name, '~', 3)::integer;
      v_lim := split_part(p_name, '~', 4)::integer;
    END IF;
  END IF;
  INSERT INTO ${s.lease} (name, token) VALUES (v_pool, 0) ON CONFLICT (name) DO NOTHING;
  PERFORM 1 FROM ${s.lease} WHERE name = v_pool FOR UPDATE;
  SELECT expires_at INTO v_own FROM ${s.session} WHERE id = p_sid FOR UPDATE;
  IF v_own IS NULL OR v_own <= clock_timestamp() THEN
    RETURN json_build_object('lost', p_lost, 'status', 'expired');
  END IF;
  IF v_hold THEN
    SELECT session_id, token INTO v_holder, v_token FROM ${s.lease} WHERE name = p_name FOR UPDATE;
    IF v_holder = p_sid THEN
      RETURN json_build_object('lost', p_lost, 'status', 'granted', 'token', v_token::text);
    END IF;
    IF v_holder IS NOT NULL THEN
      SELECT expires_at INTO v_held FROM ${s.session} WHERE id = v_holder;
      IF v_held > clock_timestamp() THEN
        RETURN json_build_object('lost', p_lost, 'status', 'held', 'token', v_token::text,
          'remaining', floor(extract(epoch FROM v_held - clock_timestamp()) * 1000));
      END IF;
    END IF;
  END IF;
  v_waited := EXISTS (SELECT 1 FROM ${s.poolWaiter} WHERE name = p_name AND session_id = p_sid);
  PERFORM ${s.fn("pool_serve")}(v_pool);
  -- Serving the pool may have granted this very request (it waited, and what blocked it is gone).
  IF v_waited AND NOT EXISTS (SELECT 1 FROM ${s.poolWaiter} WHERE name = p_name AND session_id = p_sid) THEN
    SELECT token INTO v_token FROM ${s.lease} WHERE name = CASE WHEN v_hold THEN p_name ELSE v_pool END AND session_id = p_sid;
    IF FOUND THEN
      RETURN json_build_object('lost', p_lost, 'status', 'granted', 'token', v_token::text, 'reserved', 1);
    END IF;
  END IF;
  SELECT kind, lim INTO v_have_kind, v_have_lim FROM ${s.pool} WHERE name = v_pool;
  IF FOUND THEN
    IF NOT v_hold AND v_have_kind = 'semaphore' THEN
      RETURN json_build_object('lost', p_lost, 'status', 'conflict', 'held', ${describe("v_have_kind", "v_have_lim")}, 'asked', 'lock');
    ELSIF v_hold AND (v_have_kind <> v_kind OR v_have_lim <> v_lim) THEN
      RETURN json_build_object('lost', p_lost, 'status', 'conflict', 'held', ${describe("v_have_kind", "v_have_lim")},
        'asked', ${describe("v_kind", "v_lim")});
    END IF;
  ELSIF NOT v_hold THEN
    RETURN NULL;
  ELSE
    IF v_kind = 'semaphore' AND ${writer("v_pool")} THEN
      RETURN json_build_object('lost', p_lost, 'status', 'conflict', 'held', 'lock', 'asked', ${describe("v_kind", "v_lim")});
    END IF;
    INSERT INTO ${s.pool} (name, kind, lim) VALUES (v_pool, v_kind, v_lim);
    v_have_lim := v_lim;
  END IF;
  -- Granted at once only when nobody waits before it and it fits.
  SELECT name, session_id INTO v_head_name, v_head_sid FROM ${s.poolWaiter} WHERE pool = v_pool ORDER BY seq LIMIT 1;
  IF (v_head_name IS NULL OR (v_head_name = p_name AND v_head_sid = p_sid))
    AND ${s.fn("pool_fits")}(v_pool, v_have_lim, v_mode, v_weight) THEN
    v_token := ${s.fn("pool_grant")}(v_pool, p_name, p_sid, v_mode, v_weight, CASE WHEN v_hold THEN 1 ELSE p_block END);
    -- A head granted by its own call (the queue waited out a lock-delay): those behind it go on.
    IF v_head_name IS NOT NULL THEN
      PERFORM ${s.fn("pool_serve")}(v_pool);
    END IF;
    RETURN json_build_object('lost', p_lost, 'status', 'granted', 'token', v_token::text,
      'reserved', CASE WHEN v_hold THEN 1 ELSE p_block END);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM ${s.poolWaiter} WHERE name = p_name AND session_id = p_sid) THEN
    UPDATE ${s.pool} SET seq = seq + 1 WHERE name = v_pool RETURNING seq INTO v_seq;
    INSERT INTO ${s.poolWaiter} (pool, name, session_id, mode, weight, seq) VALUES (v_pool, p_name, p_sid, v_mode, v_weight, v_seq);
  END IF;
  -- A writer caching the plain lease (a reserved block) is told someone waits, as for a plain lease.
  SELECT l.session_id, l.token, l.cached INTO v_holder, v_token, v_cached FROM ${s.lease} l WHERE l.name = v_pool;
  IF v_cached AND v_holder IS NOT NULL AND v_holder <> p_sid THEN
    ${s.notify("'w:' || v_holder || ':' || v_pool")}
  END IF;
  -- The pool's last token: a grant pushed to this waiter later is above it.
  RETURN json_build_object('lost', p_lost, 'status', 'held', 'token', CASE WHEN v_token > 0 THEN v_token::text END);
END $f$`,
    `CREATE OR REPLACE FUNCTION ${s.fn("pool_release")}(p_sid varchar, p_name varchar, p_token bigint) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_pool varchar := split_part(p_name, '~', 1);
BEGIN
  ${s.noFlush}
  PERFORM 1 FROM ${s.lease} WHERE name = v_pool FOR UPDATE;
  DELETE FROM ${s.lease} WHERE name = p_name AND session_id = p_sid AND token = p_token;
  IF NOT FOUND THEN
    RETURN json_build_object('status', 'ok');
  END IF;
  ${s.releasedBy}
  PERFORM ${s.fn("pool_serve")}(v_pool);
  RETURN json_build_object('lost', false, 'status', 'released');
END $f$`,
    // A session no longer waits for a name: out of the plain queue, and out of its pool's queue,
    // which is then served (the head may have been what blocked the others).
    `CREATE OR REPLACE FUNCTION ${s.fn("withdraw")}(p_sid varchar, p_name varchar) RETURNS json LANGUAGE plpgsql AS $f$
DECLARE
  v_pool varchar := split_part(p_name, '~', 1);
BEGIN
  ${s.noFlush}
  DELETE FROM ${s.waiter} WHERE name = p_name AND session_id = p_sid;
  IF EXISTS (SELECT 1 FROM ${s.poolWaiter} WHERE name = p_name AND session_id = p_sid) THEN
    PERFORM 1 FROM ${s.lease} WHERE name = v_pool FOR UPDATE;
    DELETE FROM ${s.poolWaiter} WHERE name = p_name AND session_id = p_sid;
    IF FOUND THEN
      PERFORM ${s.fn("pool_serve")}(v_pool);
    END IF;
  END IF;
  RETURN json_build_object('status', 'ok');
END $f$`
  ]
}

/**
 * The schema of the MySQL/MariaDB backend: its tables and stored procedures (`mysql`), and the query
 * of the poll that stands in for push hints there (`mysqlFreeNames`). The shared names (prefix rules,
 * routine names, versions) are in `migrations.ts`, beside PostgreSQL's schema.
 */
import { mysqlVersion, routine, type Schema, tables } from "./migrations.js"

/**
 * MySQL/MariaDB: which of `count` names may be taken now, for the poll that stands in for push hints
 * (its parameters: the names, twice, `mysqlFreeParams`). A name outside any live pool queue when it
 * is free (no holder, or a holder whose session is gone or expired), `to` NULL; a name waited for in
 * a pool's queue (a hold's, or a writer's plain name) when its waiter is the first live one of the
 * queue and fits the pool now, `to` that waiter's session: only it would be granted (see `mysql`).
 */
export const mysqlFreeNames = (prefix: string, count: number): string => {
  const list = Array.from({ length: count }, () => "?").join(", ")
  const now = "UTC_TIMESTAMP(6)"
  const { lease, pool, poolWaiter: waiter, session } = tables(prefix)
  const holdsOf = (alias: string, pool: string) =>
    `FROM ${lease} ${alias} JOIN ${session} ${alias}s ON ${alias}s.id = ${alias}.session_id
    WHERE ${alias}.name > CONCAT(${pool}, '~') AND ${alias}.name < CONCAT(${pool}, '~~') AND ${alias}s.expires_at > ${now}`
  return `SELECT l.name AS name, NULL AS \`to\` FROM ${lease} l LEFT JOIN ${session} s ON s.id = l.session_id
WHERE l.name IN (${list})
AND (s.id IS NULL OR s.expires_at <= ${now})
AND NOT EXISTS (SELECT 1 FROM ${waiter} w JOIN ${session} ws ON ws.id = w.session_id WHERE w.pool = l.name AND ws.expires_at > ${now})
UNION ALL
SELECT q.name AS name, q.session_id AS \`to\` FROM ${waiter} q
JOIN ${session} s ON s.id = q.session_id JOIN ${pool} p ON p.name = q.pool
WHERE q.name IN (${list}) AND s.expires_at > ${now}
AND NOT EXISTS (SELECT 1 FROM ${waiter} e JOIN ${session} es ON es.id = e.session_id
  WHERE e.pool = q.pool AND e.id < q.id AND es.expires_at > ${now})
AND (q.mode = 'p' OR NOT EXISTS (SELECT 1 FROM ${lease} x JOIN ${session} xs ON xs.id = x.session_id
  WHERE x.name = q.pool AND x.session_id <> q.session_id AND xs.expires_at > ${now}))
AND (q.mode <> 'w' OR NOT EXISTS (SELECT 1 ${holdsOf("h", "q.pool")}))
AND (q.mode <> 'p' OR q.weight + (SELECT COALESCE(SUM(${mysqlHoldWeight("u.name")}), 0) ${holdsOf("u", "q.pool")}) <= p.lim)`
}

/** The parameters of `mysqlFreeNames`: the names, once per part of its union. */
export const mysqlFreeParams = (names: ReadonlyArray<string>): ReadonlyArray<string> => [...names, ...names]

/** MySQL: the permits a hold name (`pool~p~weight~limit~id`) stands for; a read hold's is 1. */
const mysqlHoldWeight = (column: string): string =>
  `IF(SUBSTRING_INDEX(SUBSTRING_INDEX(${column}, '~', 2), '~', -1) = 'p', CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(${column}, '~', 3), '~', -1) AS UNSIGNED), 1)`

/**
 * MySQL 8 / MariaDB 10.5+: tables (InnoDB, ids and names `ascii_bin`: case-sensitive, one byte per
 * character), then one procedure per operation. Each procedure runs its own READ COMMITTED
 * transaction (so it must not be called inside one), rolls back and re-raises on any error, and ends
 * with one `SELECT` of its reply (lists as JSON text). Times are `DATETIME(6)` in UTC.
 *
 * Holds (since version 4; docs/design.md, "Semaphores and read-write locks"): a hold is a lease row
 * named by its hold name (`pool~r~id`, `pool~p~weight~limit~id`; `lease.name` widened to 187), deleted
 * when it ends, its token taken from the pool's own lease row (the plain lease `pool`, the pool's lock:
 * every call that decides for a pool locks it first). `<prefix>pool` keeps a live pool's kind and
 * limit, `<prefix>pool_waiter` its FIFO queue (an auto-increment id is the arrival order). Grants are
 * made by the waiter's own acquire only, when it is the first live waiter and fits; the poll
 * (`mysqlFreeNames`) tells it when that is so. Holds and waiters of gone sessions, and a pool left
 * with neither, are dropped by the next acquire of the pool (the poll already skips them).
 * Version 3's procedures keep working beside these on the same tables (they never see hold names).
 */
export const mysql = (prefix: string): Schema => {
  const { lease, member, pool, poolWaiter: waiter, session } = tables(prefix)
  const fn = (operation: string) => routine(prefix, mysqlVersion, operation)
  const id = "CHAR(32) CHARACTER SET ascii COLLATE ascii_bin"
  const name = "VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin"
  // A lease name or a hold name (a pool name of 128 and at most 59 more).
  const leaseName = "VARCHAR(187) CHARACTER SET ascii COLLATE ascii_bin"
  // The hold rows of a pool (`v_pool`): hold names sort between `pool~` and `pool~~` (`~` is above
  // every character of the rest), a range of the primary key.
  const holdRange = (alias: string) => `${alias}.name > CONCAT(v_pool, '~') AND ${alias}.name < CONCAT(v_pool, '~~')`
  const describe = (kind: string, limit: string) =>
    `IF(${kind} = 's', CONCAT('semaphore of ', ${limit}, ' permits'), 'read-write lock')`
  const begin = `DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;`
  return {
    routine: fn,
    marker: fn("members"),
    statements: [
      `CREATE TABLE IF NOT EXISTS ${session} (
  id ${id} NOT NULL PRIMARY KEY,
  expires_at DATETIME(6) NOT NULL,
  version BIGINT NOT NULL DEFAULT 0,
  KEY ${session}_expires (expires_at)
) ENGINE=InnoDB`,
      `CREATE TABLE IF NOT EXISTS ${lease} (
  name ${leaseName} NOT NULL PRIMARY KEY,
  session_id ${id} NULL,
  token BIGINT NOT NULL DEFAULT 0,
  acquired_at DATETIME(6) NULL,
  KEY ${lease}_session (session_id)
) ENGINE=InnoDB`,
      // Since version 4: hold names fit (an in-place change: the length stays within one byte).
      `ALTER TABLE ${lease} MODIFY name ${leaseName} NOT NULL`,
      // A live pool: kind 's' (semaphore of lim permits) or 'r' (read-write lock, lim 0).
      `CREATE TABLE IF NOT EXISTS ${pool} (
  name ${name} NOT NULL PRIMARY KEY,
  kind CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  lim INT NOT NULL
) ENGINE=InnoDB`,
      // A pool's queue: what each waiter asked (mode 'p' permits of weight, 'r' a read hold, 'w' the
      // write lock, its name the pool's), in arrival order (id).
      `CREATE TABLE IF NOT EXISTS ${waiter} (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  pool ${name} NOT NULL,
  name ${leaseName} NOT NULL,
  session_id ${id} NOT NULL,
  mode CHAR(1) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  weight INT NOT NULL,
  UNIQUE KEY ${waiter}_name (name, session_id),
  KEY ${waiter}_pool (pool, id),
  KEY ${waiter}_session (session_id)
) ENGINE=InnoDB`,
      `CREATE TABLE IF NOT EXISTS ${member} (
  group_name ${name} NOT NULL,
  session_id ${id} NOT NULL,
  PRIMARY KEY (group_name, session_id),
  KEY ${member}_session (session_id)
) ENGINE=InnoDB`,
      `CREATE PROCEDURE ${fn("open")}(IN p_sid ${id}, IN p_ttl BIGINT)
BEGIN
  ${begin}
  -- Sweep a few expired sessions (clients that died without closing); their leases are free already
  -- (their holds are dropped by the next acquire of their pool).
  DELETE m FROM ${member} m JOIN (
    SELECT id FROM ${session} WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 16
  ) dead ON m.session_id = dead.id;
  DELETE w FROM ${waiter} w JOIN (
    SELECT id FROM ${session} WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 16
  ) dead ON w.session_id = dead.id;
  DELETE FROM ${session} WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 16;
  INSERT INTO ${session} (id, expires_at) VALUES (p_sid, UTC_TIMESTAMP(6) + INTERVAL p_ttl * 1000 MICROSECOND);
  COMMIT;
  SELECT 'live' AS status, p_ttl AS remaining;
END`,
      `CREATE PROCEDURE ${fn("keep_alive")}(IN p_sid ${id}, IN p_ttl BIGINT, IN p_known BIGINT)
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_expires DATETIME(6) DEFAULT NULL;
  DECLARE v_version BIGINT DEFAULT NULL;
  DECLARE v_leases LONGTEXT DEFAULT NULL;
  DECLARE v_groups LONGTEXT DEFAULT NULL;
  ${begin}
  SELECT expires_at, version INTO v_expires, v_version FROM ${session} WHERE id = p_sid FOR UPDATE;
  SET v_now = UTC_TIMESTAMP(6);
  IF v_expires IS NULL OR v_expires <= v_now THEN
    COMMIT;
    SELECT 'expired' AS status;
  ELSE
    UPDATE ${session} SET expires_at = v_now + INTERVAL p_ttl * 1000 MICROSECOND WHERE id = p_sid;
    IF p_known IS NULL OR p_known <> v_version THEN
      SELECT COALESCE(JSON_ARRAYAGG(JSON_ARRAY(name, CAST(token AS CHAR))), '[]') INTO v_leases
      FROM ${lease} WHERE session_id = p_sid;
    END IF;
    SELECT COALESCE(JSON_ARRAYAGG(JSON_ARRAY(m.group_name, m.session_id)), '[]') INTO v_groups
    FROM ${member} g
    JOIN ${member} m ON m.group_name = g.group_name
    JOIN ${session} s ON s.id = m.session_id
    WHERE g.session_id = p_sid AND s.expires_at > v_now;
    COMMIT;
    SELECT 'live' AS status, p_ttl AS remaining, CAST(v_version AS CHAR) AS version, v_leases AS leases,
      v_groups AS \`groups\`;
  END IF;
END`,
      `CREATE PROCEDURE ${fn("close")}(IN p_sid ${id})
BEGIN
  ${begin}
  -- Leases before the session row (the lock order of every procedure). A grant committed between
  -- the two leaves its lease naming a deleted session, which is free (its holder is gone). Its holds
  -- end (their rows go; the pool's waiters learn by their poll), and it waits no more.
  DELETE FROM ${lease} WHERE session_id = p_sid AND LOCATE('~', name) > 0;
  UPDATE ${lease} SET session_id = NULL WHERE session_id = p_sid;
  DELETE FROM ${session} WHERE id = p_sid;
  DELETE FROM ${member} WHERE session_id = p_sid;
  DELETE FROM ${waiter} WHERE session_id = p_sid;
  COMMIT;
  SELECT 'ok' AS status;
END`,
      // A new grant reserves p_block tokens (since version 3): its token is the block's last. Since
      // version 4 a hold name, or the plain name of a live pool (a writer), follows the pool rule.
      `CREATE PROCEDURE ${fn("acquire")}(IN p_sid ${id}, IN p_name ${leaseName}, IN p_block BIGINT)
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_found INT DEFAULT 0;
  DECLARE v_holder ${id} DEFAULT NULL;
  DECLARE v_token BIGINT DEFAULT 0;
  DECLARE v_own DATETIME(6) DEFAULT NULL;
  DECLARE v_held DATETIME(6) DEFAULT NULL;
  DECLARE v_pool ${name};
  DECLARE v_mode CHAR(1) CHARACTER SET ascii DEFAULT 'w';
  DECLARE v_weight INT DEFAULT 1;
  DECLARE v_lim INT DEFAULT 0;
  DECLARE v_kind CHAR(1) CHARACTER SET ascii DEFAULT NULL;
  DECLARE v_plim INT DEFAULT 0;
  DECLARE v_locked INT DEFAULT 0;
  DECLARE v_holds INT DEFAULT 0;
  DECLARE v_used BIGINT DEFAULT 0;
  DECLARE v_head BIGINT DEFAULT NULL;
  DECLARE v_at BIGINT DEFAULT NULL;
  DECLARE v_writer INT DEFAULT 0;
  DECLARE v_fits INT DEFAULT 0;
  DECLARE v_hfound INT DEFAULT 0;
  DECLARE v_hholder ${id} DEFAULT NULL;
  DECLARE v_htoken BIGINT DEFAULT 0;
  DECLARE v_hheld DATETIME(6) DEFAULT NULL;
  ${begin}
  IF LOCATE('~', p_name) = 0 THEN
    SET v_pool = p_name;
  ELSE
    SET v_pool = SUBSTRING_INDEX(p_name, '~', 1);
    SET v_mode = SUBSTRING_INDEX(SUBSTRING_INDEX(p_name, '~', 2), '~', -1);
    IF v_mode = 'p' THEN
      SET v_weight = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_name, '~', 3), '~', -1) AS UNSIGNED);
      SET v_lim = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_name, '~', 4), '~', -1) AS UNSIGNED);
    END IF;
  END IF;
  -- The pool's own lease row first: the lock of the name, and of its pool. A hold's pool gets one
  -- (token 0, nobody holding) if the name was never used; a concurrent first insert fails with 1062: retried.
  SELECT 1, session_id, token INTO v_found, v_holder, v_token FROM ${lease} WHERE name = v_pool FOR UPDATE;
  IF v_found = 0 AND v_mode <> 'w' THEN
    INSERT INTO ${lease} (name, session_id, token) VALUES (v_pool, NULL, 0);
    SET v_found = 1;
  END IF;
  SELECT kind, lim INTO v_kind, v_plim FROM ${pool} WHERE name = v_pool FOR UPDATE;
  IF v_mode = 'w' AND v_kind IS NULL THEN
    -- A plain lease with no pool: version 3's rule.
    IF v_found = 0 THEN
      -- A name never acquired is granted by its first row (token 1); a requester whose session turned
      -- out dead leaves a row naming it, a free lease (token 1 is spent). A concurrent first acquire of
      -- the name makes this fail with a duplicate key (1062): retried.
      INSERT INTO ${lease} (name, session_id, token, acquired_at) VALUES (p_name, p_sid, p_block, UTC_TIMESTAMP(6));
      SET v_holder = p_sid, v_token = p_block;
    END IF;
    IF v_holder IS NULL OR v_holder = p_sid THEN
      SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
    ELSEIF p_sid < v_holder THEN
      SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
      SELECT expires_at INTO v_held FROM ${session} WHERE id = v_holder LOCK IN SHARE MODE;
    ELSE
      SELECT expires_at INTO v_held FROM ${session} WHERE id = v_holder LOCK IN SHARE MODE;
      SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
    END IF;
    SET v_now = UTC_TIMESTAMP(6);
    IF v_own IS NULL OR v_own <= v_now THEN
      COMMIT;
      SELECT 'expired' AS status;
    ELSEIF v_holder = p_sid THEN
      IF v_found = 0 THEN
        UPDATE ${session} SET version = version + 1 WHERE id = p_sid;
        COMMIT;
        SELECT 'granted' AS status, CAST(v_token AS CHAR) AS token, p_block AS reserved;
      ELSE
        COMMIT;
        SELECT 'granted' AS status, CAST(v_token AS CHAR) AS token;
      END IF;
    ELSEIF v_held > v_now THEN
      COMMIT;
      SELECT 'held' AS status, CAST(v_token AS CHAR) AS token, TIMESTAMPDIFF(MICROSECOND, v_now, v_held) DIV 1000 AS remaining;
    ELSE
      -- The token first: MySQL evaluates SET left to right.
      UPDATE ${lease} SET token = v_token + p_block, session_id = p_sid, acquired_at = v_now WHERE name = p_name;
      UPDATE ${session} SET version = version + 1 WHERE id = p_sid;
      COMMIT;
      SELECT 'granted' AS status, CAST(v_token + p_block AS CHAR) AS token, p_block AS reserved;
    END IF;
  ELSE
    SELECT expires_at INTO v_own FROM ${session} WHERE id = p_sid FOR UPDATE;
    -- The holders' sessions shared (after the requester's: a deadlock is retried), so dropping a hold
    -- found expired is serialised with its renewal, as a takeover is.
    IF v_holder IS NOT NULL AND v_holder <> p_sid THEN
      SELECT expires_at INTO v_held FROM ${session} WHERE id = v_holder LOCK IN SHARE MODE;
    END IF;
    SELECT COUNT(*) INTO v_locked FROM ${lease} h JOIN ${session} s ON s.id = h.session_id
      WHERE ${holdRange("h")} LOCK IN SHARE MODE;
    SET v_now = UTC_TIMESTAMP(6);
    IF v_own IS NULL OR v_own <= v_now THEN
      COMMIT;
      SELECT 'expired' AS status;
    ELSE
      -- Holds of gone sessions, and gone waiters, are dropped; a pool left with neither goes.
      DELETE h FROM ${lease} h LEFT JOIN ${session} s ON s.id = h.session_id
        WHERE ${holdRange("h")} AND (s.id IS NULL OR s.expires_at <= v_now);
      DELETE q FROM ${waiter} q LEFT JOIN ${session} s ON s.id = q.session_id
        WHERE q.pool = v_pool AND (s.id IS NULL OR s.expires_at <= v_now);
      SELECT COUNT(*), COALESCE(SUM(${mysqlHoldWeight("h.name")}), 0) INTO v_holds, v_used
        FROM ${lease} h WHERE ${holdRange("h")};
      SELECT MIN(id) INTO v_head FROM ${waiter} WHERE pool = v_pool;
      SELECT id INTO v_at FROM ${waiter} WHERE name = p_name AND session_id = p_sid;
      SET v_writer = IF(v_holder IS NOT NULL AND (v_holder = p_sid OR COALESCE(v_held > v_now, 0)), 1, 0);
      IF v_kind IS NOT NULL AND v_holds = 0 AND v_head IS NULL THEN
        DELETE FROM ${pool} WHERE name = v_pool;
        SET v_kind = NULL;
      END IF;
      IF v_mode <> 'w' THEN
        SELECT 1, session_id, token INTO v_hfound, v_hholder, v_htoken FROM ${lease} WHERE name = p_name;
      END IF;
      IF v_hfound = 1 AND v_hholder = p_sid THEN
        -- Its own hold (a retried acquire).
        COMMIT;
        SELECT 'granted' AS status, CAST(v_htoken AS CHAR) AS token;
      ELSEIF v_hfound = 1 THEN
        -- The same hold asked from another session (its client's new one): never a second holder.
        SELECT expires_at INTO v_hheld FROM ${session} WHERE id = v_hholder;
        COMMIT;
        SELECT 'held' AS status, CAST(v_htoken AS CHAR) AS token,
          TIMESTAMPDIFF(MICROSECOND, v_now, v_hheld) DIV 1000 AS remaining;
      ELSEIF v_mode = 'w' AND v_holder = p_sid THEN
        COMMIT;
        SELECT 'granted' AS status, CAST(v_token AS CHAR) AS token;
      ELSEIF v_mode = 'w' AND v_kind IS NULL THEN
        -- The pool just went: the plain rule (v_holder, if any, is another session).
        IF v_writer = 1 THEN
          COMMIT;
          SELECT 'held' AS status, CAST(v_token AS CHAR) AS token, TIMESTAMPDIFF(MICROSECOND, v_now, v_held) DIV 1000 AS remaining;
        ELSE
          UPDATE ${lease} SET token = v_token + p_block, session_id = p_sid, acquired_at = v_now WHERE name = p_name;
          UPDATE ${session} SET version = version + 1 WHERE id = p_sid;
          COMMIT;
          SELECT 'granted' AS status, CAST(v_token + p_block AS CHAR) AS token, p_block AS reserved;
        END IF;
      ELSEIF v_mode = 'w' AND v_kind = 's' THEN
        COMMIT;
        SELECT 'conflict' AS status, ${describe("v_kind", "v_plim")} AS held, 'lock' AS asked;
      ELSEIF v_kind IS NOT NULL AND (v_kind <> IF(v_mode = 'p', 's', 'r') OR v_plim <> v_lim) THEN
        COMMIT;
        SELECT 'conflict' AS status, ${describe("v_kind", "v_plim")} AS held,
          ${describe("IF(v_mode = 'p', 's', 'r')", "v_lim")} AS asked;
      ELSEIF v_kind IS NULL AND v_mode = 'p' AND v_writer = 1 THEN
        COMMIT;
        SELECT 'conflict' AS status, 'lock' AS held, ${describe("'s'", "v_lim")} AS asked;
      ELSE
        IF v_kind IS NULL THEN
          INSERT INTO ${pool} (name, kind, lim) VALUES (v_pool, IF(v_mode = 'p', 's', 'r'), v_lim);
        END IF;
        SET v_fits = CASE v_mode
          WHEN 'p' THEN v_used + v_weight <= v_lim
          WHEN 'r' THEN v_writer = 0
          ELSE v_holds = 0 AND v_writer = 0 END;
        IF (v_head IS NULL OR v_head = v_at) AND v_fits THEN
          -- Granted in arrival order: the pool's next token, no block (a cached write lock would pass the queue).
          SET v_token = v_token + 1;
          IF v_mode = 'w' THEN
            UPDATE ${lease} SET token = v_token, session_id = p_sid, acquired_at = v_now WHERE name = v_pool;
          ELSE
            UPDATE ${lease} SET token = v_token WHERE name = v_pool;
            INSERT INTO ${lease} (name, session_id, token, acquired_at) VALUES (p_name, p_sid, v_token, v_now);
          END IF;
          DELETE FROM ${waiter} WHERE name = p_name AND session_id = p_sid;
          UPDATE ${session} SET version = version + 1 WHERE id = p_sid;
          COMMIT;
          SELECT 'granted' AS status, CAST(v_token AS CHAR) AS token;
        ELSE
          -- Queued once; the token told is the pool's last, below any later grant.
          IF v_at IS NULL THEN
            INSERT INTO ${waiter} (pool, name, session_id, mode, weight) VALUES (v_pool, p_name, p_sid, v_mode, v_weight);
          END IF;
          COMMIT;
          SELECT 'held' AS status, CAST(v_token AS CHAR) AS token;
        END IF;
      END IF;
    END IF;
  END IF;
END`,
      `CREATE PROCEDURE ${fn("release")}(IN p_sid ${id}, IN p_name ${leaseName}, IN p_token BIGINT)
BEGIN
  DECLARE v_released INT DEFAULT 0;
  ${begin}
  IF LOCATE('~', p_name) > 0 THEN
    -- A hold's row goes (its token lives on in the pool's row); the pool's next waiter learns by its poll.
    DELETE FROM ${lease} WHERE name = p_name AND session_id = p_sid AND token = p_token;
  ELSE
    UPDATE ${lease} SET session_id = NULL WHERE name = p_name AND session_id = p_sid AND token = p_token;
  END IF;
  SET v_released = ROW_COUNT();
  IF v_released > 0 THEN
    UPDATE ${session} SET version = version + 1 WHERE id = p_sid;
  END IF;
  COMMIT;
  SELECT IF(v_released > 0, 'released', 'ok') AS status;
END`,
      `CREATE PROCEDURE ${fn("join")}(IN p_sid ${id}, IN p_group ${name})
BEGIN
  DECLARE v_expires DATETIME(6) DEFAULT NULL;
  ${begin}
  SELECT expires_at INTO v_expires FROM ${session} WHERE id = p_sid LOCK IN SHARE MODE;
  IF v_expires IS NULL OR v_expires <= UTC_TIMESTAMP(6) THEN
    COMMIT;
    SELECT 'expired' AS status;
  ELSE
    INSERT IGNORE INTO ${member} (group_name, session_id) VALUES (p_group, p_sid);
    COMMIT;
    SELECT 'joined' AS status;
  END IF;
END`,
      `CREATE PROCEDURE ${fn("leave")}(IN p_sid ${id}, IN p_group ${name})
BEGIN
  ${begin}
  DELETE FROM ${member} WHERE group_name = p_group AND session_id = p_sid;
  COMMIT;
  SELECT 'ok' AS status;
END`,
      `CREATE PROCEDURE ${fn("members")}(IN p_group ${name})
BEGIN
  SELECT 'ok' AS status, COALESCE(JSON_ARRAYAGG(m.session_id), '[]') AS members
  FROM ${member} m JOIN ${session} s ON s.id = m.session_id
  WHERE m.group_name = p_group AND s.expires_at > UTC_TIMESTAMP(6);
END`
    ]
  }
}

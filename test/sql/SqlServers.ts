/**
 * The real databases the SQL tests run against: PostgreSQL 15 at 127.0.0.1:5432 (trust auth,
 * database `test`) and MariaDB 10.11 at 127.0.0.1:3306 (root, empty password, database `test`),
 * started by `scripts/services.sh` when they do not answer. Each test file uses its own table
 * prefix, so files running in parallel never share rows, and names are unique per test.
 */

export const pgUrl = "postgres://postgres@127.0.0.1:5432/test"

export const mysqlUrl = "mysql://root@127.0.0.1:3306/test"

/** Session ttl of the real-time suites: short, so expiry tests stay quick. */
export const ttl = "1500 millis"

/**
 * Client timing of the TCK's client-level cases: leases of `ttl`, and the margin the Redis suites
 * use (400 ms), which covers event-loop stalls of a loaded 2-core machine running files in parallel.
 */
export const clientTiming = { leaseDuration: ttl, margin: "400 millis" } as const

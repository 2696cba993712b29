/**
 * `simba/postgres`: the PostgreSQL backend (through `@effect/sql-pg`) and `Simba` on it. The driver
 * is an optional peer, loaded only when a layer of this module is built.
 */
import * as Layer from "effect/Layer"
import * as PgBackend from "./layers/sql/PgBackend.js"
import * as Simba from "./Simba.js"

export * as PgBackend from "./layers/sql/PgBackend.js"

/**
 * `Simba` on PostgreSQL: `SIMBA_PG_URL` (default `postgres://127.0.0.1:5432/postgres`),
 * `SIMBA_PG_TABLE_PREFIX`, `SIMBA_PG_MAX_CONNECTIONS`, `SIMBA_PG_LOCK_DELAY`, plus the `SIMBA_*` timing
 * settings.
 */
export const SimbaPgLive = Simba.layerConfig.pipe(Layer.provide(PgBackend.layerConfig(PgBackend.config)))

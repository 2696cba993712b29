/**
 * `simba/mysql`: the MySQL/MariaDB backend (through `@effect/sql-mysql2`) and `Simba` on it. The
 * driver is an optional peer, loaded only when a layer of this module is built.
 */
import * as Layer from "effect/Layer"
import * as MysqlBackend from "./layers/sql/MysqlBackend.js"
import * as Simba from "./Simba.js"

export * as MysqlBackend from "./layers/sql/MysqlBackend.js"

/**
 * `Simba` on MySQL/MariaDB: `SIMBA_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`),
 * `SIMBA_MYSQL_TABLE_PREFIX`, `SIMBA_MYSQL_MAX_CONNECTIONS`, plus the `SIMBA_*` timing settings.
 */
export const SimbaMysqlLive = Simba.layerConfig.pipe(Layer.provide(MysqlBackend.layerConfig(MysqlBackend.config)))

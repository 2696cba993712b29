// Every subpath that names a driver's types, compiled with `skipLibCheck: false` once the drivers
// are installed: simba/redis (ioredis), simba/postgres (@effect/sql, @effect/sql-pg), simba/mysql
// (@effect/sql, @effect/sql-mysql2), simba/zookeeper (zookeeper), simba/http (@effect/platform-node),
// simba/fencing/sql (@effect/sql), simba/fencing/redis (ioredis).
import { Layer } from "effect"
import * as FencedRedis from "simba/fencing/redis"
import * as FencedSql from "simba/fencing/sql"
import { SimbaHttp } from "simba/http"
import { MysqlBackend, SimbaMysqlLive } from "simba/mysql"
import { PgBackend, SimbaPgLive } from "simba/postgres"
import { RedisBackend, SimbaRedisLive } from "simba/redis"
import { SimbaZookeeperLive, ZookeeperBackend } from "simba/zookeeper"

export const layers = [SimbaRedisLive, SimbaPgLive, SimbaMysqlLive, SimbaZookeeperLive]
export const backends = [RedisBackend.layer({}), PgBackend.layer(), MysqlBackend.layer(), ZookeeperBackend.layer()]
export const endpoint = SimbaHttp.layer({ port: 9464 }).pipe(Layer.provide(SimbaRedisLive))
export const fencing = [typeof FencedRedis.setScript, FencedSql.defaultTable]

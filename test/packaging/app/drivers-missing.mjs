// Building a backend's layer in a project without its driver must fail with a typed error that names
// the package to install (a driver is loaded when its layer is built, never when "simba" is imported).
// One line of JSON per backend.
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { SimbaMysqlLive } from "simba/mysql"
import { SimbaPgLive } from "simba/postgres"
import { SimbaRedisLive } from "simba/redis"
import { SimbaZookeeperLive } from "simba/zookeeper"

const layers = { redis: SimbaRedisLive, postgres: SimbaPgLive, mysql: SimbaMysqlLive, zookeeper: SimbaZookeeperLive }

for (const [backend, layer] of Object.entries(layers)) {
  const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(layer)).pipe(Effect.timeout("20 seconds")))
  const failure = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
  console.log(JSON.stringify({
    backend,
    failed: Exit.isFailure(exit),
    tag: failure?._tag,
    message: failure?.message,
    pretty: Exit.isFailure(exit) ? Cause.pretty(exit.cause) : undefined
  }))
}

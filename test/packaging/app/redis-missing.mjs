// Building `SimbaRedisLive` in a project without `ioredis` must fail with an error that names the
// package to install (the driver is loaded when the layer is built, not when "simba" is imported).
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { SimbaRedisLive } from "simba"

const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(SimbaRedisLive)).pipe(Effect.timeout("20 seconds")))
const failure = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
console.log(JSON.stringify({
  failed: Exit.isFailure(exit),
  tag: failure?._tag,
  message: failure?.message,
  pretty: Exit.isFailure(exit) ? Cause.pretty(exit.cause) : undefined
}))

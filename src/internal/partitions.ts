/** Partition groups: join, lead the partitions this client wins, run their work, leave on exit. */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SimbaConfigError } from "../Errors.js"
import * as LeaseName from "../LeaseName.js"
import type { ElectionError, WorkFailureOptions } from "../Simba.js"
import type * as Term from "../Term.js"
import { request } from "./completions.js"
import { failStart } from "./handles.js"
import type { Shell } from "./shell.js"
import * as WorkFailure from "./workFailure.js"

export const partitionGroup = <E, R>(
  shell: Shell,
  group: string,
  partitions: number,
  work: (partition: number, term: Term.Term) => Effect.Effect<unknown, E, R>,
  options?: WorkFailureOptions
): Effect.Effect<never, ElectionError | SimbaConfigError, R> =>
  Effect.gen(function*() {
    if (!Number.isSafeInteger(partitions) || partitions < 1) {
      return yield* new SimbaConfigError({ field: "partitions", rule: "must be a positive integer" })
    }
    yield* LeaseName.validate(group)
    yield* LeaseName.validate(LeaseName.partitionName(group, partitions - 1))
    const context = yield* Effect.context<R>()
    const backoff = WorkFailure.backoff(options)
    return yield* Effect.scoped(Effect.gen(function*() {
      const handle = shell.nextId++
      const join = request(shell, (completion) => ({ _tag: "Join", handle, group, partitions, completion })).pipe(
        Effect.flatMap((outcome) => failStart(group, outcome)),
        Effect.zipRight(Effect.sync(() =>
          shell.groupHooks.set(group, {
            onElected: (term, partition) =>
              Effect.succeed(
                partition === undefined
                  ? Option.none()
                  : Option.some(WorkFailure.withRestart(term.name, options, Effect.provide(work(partition, term), context)))
              ),
            onRevoked: () => undefined,
            // Per partition: one failing partition backs off alone.
            onWorkFailed: (partition, ranFor) => backoff.failed(partition ?? -1, ranFor)
          })
        ))
      )
      const leave = request(shell, (completion) => ({ _tag: "Leave", handle, completion })).pipe(
        Effect.zipRight(Effect.sync(() => shell.groupHooks.delete(group)))
      )
      yield* Effect.acquireRelease(join, () => leave)
      return yield* Effect.never
    }))
  })

#!/usr/bin/env node
/**
 * The `simba` command (package.json `bin`): `simba lock`, `simba elect`, `simba status`,
 * `simba watch`. Loaded only by the command: importing `simba` or a subpath never loads this module
 * or `@effect/cli`.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import { createRequire } from "node:module"
import { status as printStatus, watch as runWatch } from "./inspect.js"
import { type CommandLine, elect, lock, say } from "./run.js"
import { client, connect, durationFlag, flags } from "./settings.js"
import * as Signals from "./signals.js"
import * as Status from "./status.js"

const exitStatuses = [
  "Exit statuses: the command's own when it ran and exited holding the lock;",
  `${Status.notAcquired} not acquired within --timeout (a --timeout 0 try that found the lock held included);`,
  `${Status.lockLost} the lock was lost and the command stopped; ${Status.badConfiguration} invalid configuration or arguments;`,
  `${Status.unavailable} the backend cannot be reached; ${Status.commandNotFound} / ${Status.commandNotRunnable} the command was not found / could not be run;`,
  "128 + n a signal n came before the command started."
].join(" ")

const settings =
  "The backend and its settings come from SIMBA_BACKEND (redis, postgres, mysql, zookeeper, memory), the backend's own variables (SIMBA_REDIS_URL, SIMBA_PG_URL, ...) and SIMBA_LEASE_DURATION and the other SIMBA_* timing variables, or the flags that set them."

/** Runs a command's program: its status, or the failure's status with a line on stderr. */
const finish = <R>(program: Effect.Effect<number, unknown, R>): Effect.Effect<void, never, R> =>
  Effect.flatMap(Effect.exit(program), (exit) => {
    if (Exit.isSuccess(exit)) return setStatus(exit.value)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) {
      const { status, text } = Status.ofFailure(failure.value)
      return Effect.zipRight(say(text), setStatus(status))
    }
    if (Cause.isInterruptedOnly(exit.cause)) return setStatus(0)
    return Effect.zipRight(say(Cause.pretty(exit.cause)), setStatus(Status.internalError))
  })

const setStatus = (status: number): Effect.Effect<void> => Effect.sync(() => void (process.exitCode = status))

const commandLine = (words: ReadonlyArray<string>): CommandLine => ({ command: words[0]!, args: words.slice(1) })

const leaseName = Args.text({ name: "NAME" }).pipe(Args.withDescription("The lease's name: 1-128 characters of [A-Za-z0-9._:-]."))
const commandArgs = Args.text({ name: "COMMAND" }).pipe(
  Args.atLeast(1),
  Args.withDescription("The command and its arguments, after --.")
)
const grace = Options.text("grace").pipe(
  Options.withDefault("10s"),
  Options.withDescription("How long the command has to exit after SIGTERM before SIGKILL, e.g. 10s.")
)
const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

const lockCommand = Command.make("lock", {
  ...flags,
  timeout: Options.text("timeout").pipe(
    Options.optional,
    Options.withDescription("Give up waiting after this long (exit 75); 0 tries once. Default: wait.")
  ),
  grace,
  name: leaseName,
  command: commandArgs
}, (input) =>
  finish(Effect.scoped(Effect.gen(function*() {
    const timeout = yield* Option.match(input.timeout, {
      onNone: () => Effect.succeed(Option.none<Duration.Duration>()),
      onSome: (text) => Effect.map(durationFlag("timeout", text), Option.some)
    })
    const graceTime = yield* durationFlag("grace", input.grace)
    const connected = yield* connect(input)
    const simba = yield* client(connected)
    return yield* lock({ client: simba, name: input.name, line: commandLine(input.command), timeout, grace: graceTime })
  })))).pipe(Command.withDescription(
    `Acquire the lock NAME, run COMMAND holding it with SIMBA_LEASE=NAME and SIMBA_TOKEN=<fencing token> in its environment, release when it exits. If the lock is lost while COMMAND runs, COMMAND's process group gets SIGTERM at once and SIGKILL after --grace. SIGINT and SIGTERM to simba are forwarded to COMMAND. ${exitStatuses} ${settings}`
  ))

const electCommand = Command.make("elect", { ...flags, grace, name: leaseName, command: commandArgs }, (input) =>
  finish(Effect.scoped(Effect.gen(function*() {
    const graceTime = yield* durationFlag("grace", input.grace)
    const connected = yield* connect(input)
    const simba = yield* client(connected)
    return yield* elect({ client: simba, name: input.name, line: commandLine(input.command), grace: graceTime })
  })))).pipe(Command.withDescription(
    `Compete for leadership of NAME; run COMMAND for each term this process holds (SIMBA_LEASE, and a new SIMBA_TOKEN each term), stop it when the term ends (SIGTERM, SIGKILL after --grace), and compete again. A COMMAND that exits by itself gives the term up. SIGINT or SIGTERM: forwarded to COMMAND; once it exited the lease is handed over and simba exits with its status (0 when none ran). ${settings}`
  ))

const statusCommand = Command.make("status", { ...flags, json }, (input) =>
  finish(Effect.scoped(Effect.gen(function*() {
    const connected = yield* connect(input)
    yield* printStatus(connected.backend, input.json)
    return 0
  })))).pipe(Command.withDescription(
    `Print the sessions, the leases (holder, token, waiters) and the groups the store holds. Exit 0, or ${Status.unavailable} / ${Status.badConfiguration}. ${settings}`
  ))

const watchCommand = Command.make("watch", {
  ...flags,
  json,
  every: Options.text("every").pipe(Options.withDefault("1s"), Options.withDescription("How often the store is read, e.g. 1s.")),
  name: Args.text({ name: "NAME" }).pipe(Args.optional, Args.withDescription("Only this lease or group."))
}, (input) =>
  finish(Effect.scoped(Effect.gen(function*() {
    const every = yield* durationFlag("every", input.every)
    const connected = yield* connect(input)
    const signals = yield* Signals.Signals
    yield* Effect.raceFirst(runWatch(connected.backend, input.name, input.json, every), Deferred.await(signals.first))
    return 0
  })))).pipe(Command.withDescription(
    `Print a line per change of the store's sessions, leases, waiters and groups (the current state first), read every --every, until interrupted. ${settings}`
  ))

const simba = Command.make("simba").pipe(
  Command.withDescription("Locks and leaders for commands: run a command on one host at a time, or only on the leader."),
  Command.withSubcommands([lockCommand, electCommand, statusCommand, watchCommand])
)

const version = (createRequire(import.meta.url)("../../package.json") as { readonly version: string }).version

const run = Command.run(simba, { name: "simba", version })

const main = run(process.argv).pipe(
  // @effect/cli printed the problem with the arguments already.
  Effect.catchIf(ValidationError.isValidationError, (error) =>
    setStatus(ValidationError.isHelpRequested(error) ? 0 : Status.badConfiguration)),
  Effect.provide(Layer.mergeAll(NodeContext.layer, Signals.layer)),
  // The client's own log lines (renewal failures and the like) go to stderr, not the command's stdout.
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true, colors: false })))
)

Effect.runPromiseExit(main).then((exit) => {
  if (Exit.isFailure(exit)) {
    process.stderr.write(`simba: ${Cause.pretty(exit.cause)}\n`)
    process.exitCode = Status.internalError
  }
  // Done: every scope is closed (the lease released, the session closed). Exit once what was written
  // is flushed, so a driver's handle left open cannot keep a finished command alive.
  process.stdout.write("", () => process.stderr.write("", () => process.exit()))
})

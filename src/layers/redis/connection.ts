/**
 * The connections to Redis: the driver (ioredis, loaded when a backend is built, never when the
 * library is imported), the command connection and its script runner, and the subscriber.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import type { Cluster, ClusterOptions, Redis } from "ioredis"
import { BackendError, loadDriver } from "../../LeaseBackend.js"
import type { BackendSettings, Settings } from "./options.js"
import type { Call, Library } from "./scripts.js"

/** What this backend uses of the ioredis module. */
export interface Driver {
  readonly Redis: typeof Redis
  readonly Cluster: typeof Cluster
}

/** A connection to one server, or to a cluster. */
export type Client = Redis | Cluster

export const backendError = (operation: string, cause: unknown) => new BackendError({ backend: "redis", operation, cause })

/** Loads ioredis; a missing package fails with a `BackendError` naming the install line. */
export const loadIORedis: Effect.Effect<Driver, BackendError> = loadDriver(
  "redis",
  "ioredis",
  "npm install ioredis@^5",
  () => import("ioredis")
)

/** The command connection of `settings`, not connected yet. */
export const newClient = (driver: Driver, settings: Settings): Client => {
  if (settings.cluster === undefined) return new driver.Redis(settings.redisOptions)
  const { db: _db, host: _host, port: _port, ...nodeOptions } = settings.redisOptions
  const clusterOptions: ClusterOptions = {
    ...settings.clusterOptions,
    lazyConnect: true,
    enableOfflineQueue: false,
    redisOptions: nodeOptions
  }
  return new driver.Cluster(settings.cluster.map((node) => ({ host: node.host, port: node.port })), clusterOptions)
}

/**
 * Whether `client` is an ioredis `Cluster`. Not `instanceof`: a client you bring may come from
 * another copy of ioredis than the one this library loads.
 */
export const isCluster = (client: Client): client is Cluster => (client as { isCluster?: unknown }).isCluster === true

/**
 * The subscriber: the same options as `client`, its own connection(s), another name; connected by
 * `connect` (so `lazyConnect`, whatever the client you bring says).
 */
export const duplicate = (client: Client, connectionName: string): Client =>
  isCluster(client)
    ? client.duplicate(undefined, {
      lazyConnect: true,
      redisOptions: { ...client.options.redisOptions, connectionName }
    })
    : client.duplicate({ connectionName, lazyConnect: true })

/** `host:port` of a connection, for messages. */
export const addressOf = (node: Redis): string => `${node.options.host ?? "127.0.0.1"}:${node.options.port ?? 6379}`

/**
 * ioredis attaches the failed command to a reply error (`error.command.args`): for `AUTH` and `HELLO`
 * those are credentials, so such an error is replaced by one carrying only its message.
 */
export const scrub = (cause: unknown): unknown => {
  if (!(cause instanceof Error) || !("command" in cause)) return cause
  const command: unknown = cause.command
  const name = typeof command === "object" && command !== null && "name" in command ? String(command.name) : ""
  if (!/^(auth|hello)$/i.test(name)) return cause
  const clean = new Error(cause.message)
  clean.name = cause.name
  return clean
}

/** Creates a connection in the scope (closed by a finalizer) and waits until it is ready. */
export const connect = (
  settings: BackendSettings,
  create: () => Client,
  onError: (error: Error) => void
): Effect.Effect<Client, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    // ioredis rejects `connect()` with "Connection is closed." and reports the reason (refused,
    // WRONGPASS, ...) as an `error` event: keep the last one for the BackendError.
    let lastError: Error | undefined
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = create()
        // Without a listener ioredis prints every error; failures reach callers as BackendError.
        client.on("error", (error: Error) => {
          lastError = error
          onError(error)
        })
        return client
      }),
      (client) =>
        Effect.tryPromise(() => client.quit()).pipe(
          Effect.timeout("1 second"),
          Effect.catchAllCause((cause) => Effect.logDebug("simba redis: QUIT failed, disconnecting", cause)),
          Effect.ensuring(Effect.sync(() => client.disconnect()))
        )
    )
    yield* Effect.tryPromise({
      try: () => client.connect(),
      catch: (cause) => backendError("connect", scrub(lastError ?? cause))
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(settings.connectTimeout),
        onTimeout: () =>
          backendError(
            "connect",
            lastError === undefined
              ? `not connected within ${settings.connectTimeout} ms`
              : `not connected within ${settings.connectTimeout} ms: ${lastError.message}`
          )
      })
    )
    return client
  })

/** The subscriber connection (resubscribed by ioredis after a reconnect), as the hints use it. */
export interface Subscriber {
  /**
   * Calls `onMessage` for each message of a subscribed channel or pattern, synchronously and in
   * order, and `onReconnect` each time the connection is ready again after a loss (one server:
   * ioredis subscribes again then; a cluster's subscriber moves to another node without telling).
   */
  readonly listen: (onMessage: (channel: string, message: string) => void, onReconnect: () => void) => void
  readonly psubscribe: (patterns: ReadonlyArray<string>) => Effect.Effect<void, BackendError>
  /** `SUBSCRIBE` one channel; resolves when the server confirmed it. */
  readonly subscribe: (channel: string) => Promise<unknown>
  /** Whether the connection is up now (a `SUBSCRIBE` sent now is answered without waiting for a reconnect). */
  readonly isReady: () => boolean
  readonly unsubscribe: (channel: string) => Promise<unknown>
}

/** Connects the subscriber: the options of `client`, its own connection(s), the name `<name>:hints`. */
export const subscriber = (
  settings: BackendSettings,
  client: Client,
  onError: (error: Error) => void
): Effect.Effect<Subscriber, BackendError, Scope.Scope> =>
  Effect.map(
    connect(settings, () => duplicate(client, `${settings.connectionName}:hints`), onError),
    (connection): Subscriber => ({
      listen: (onMessage, onReconnect) => {
        connection.on("message", onMessage)
        connection.on("pmessage", (_pattern: string, channel: string, message: string) => onMessage(channel, message))
        // `connect` returned once the connection was ready: every later `ready` is a reconnection.
        connection.on("ready", onReconnect)
      },
      psubscribe: (patterns) =>
        Effect.tryPromise({
          try: () => connection.psubscribe(...patterns),
          catch: (cause) => backendError("subscribe", cause)
        }),
      subscribe: (channel) => connection.subscribe(channel),
      isReady: () => connection.status === "ready",
      unsubscribe: (channel) => connection.unsubscribe(channel)
    })
  )

/** Sends commands on a command connection and settles each call as an effect. */
export interface Tracker {
  /**
   * Runs `send` (a command or commands on the connection) as an effect that fails with `BackendError`
   * when the command fails, when no reply came within the command timeout, when the connection is not
   * ready, and at once when the connection (in a cluster: any node's) closes while it is in flight.
   * The timeout is ioredis's own per command when it has one (see `ioredisTimesOut`): then an
   * `EVALSHA` answered `NOSCRIPT` and the `EVAL` after it each have their own.
   */
  readonly track: <A>(operation: string, send: () => Promise<A>) => Effect.Effect<A, BackendError>
  /**
   * The same without an Effect: `settle` is called once with the outcome, from the driver's callback
   * (or at once when the call cannot be sent). Returns what forgets the call, when the tracker times
   * it out itself.
   */
  readonly trackWith: <A>(
    operation: string,
    send: () => Promise<A>,
    settle: (result: Either.Either<A, BackendError>) => void
  ) => (() => void) | undefined
}

/**
 * Whether ioredis itself rejects every command of `client` after at most `commandTimeout` ms: its
 * `commandTimeout` option (on each node of a cluster) starts a timer when the command is handed to a
 * connection, and a cluster without an offline queue never holds a command before that. Then the
 * tracker adds no timeout of its own. A client you bring may have no such option (ioredis's default),
 * a longer one or an offline queue: its commands get the tracker's timeout (see `tracker`).
 */
const ioredisTimesOut = (client: Client, commandTimeout: number): boolean => {
  const own = isCluster(client) ? client.options.redisOptions?.commandTimeout : client.options.commandTimeout
  const queues = isCluster(client) && client.options.enableOfflineQueue !== false
  return typeof own === "number" && own > 0 && own <= commandTimeout && !queues
}

/** The error ioredis rejects a command with after its `commandTimeout`. */
const isCommandTimeout = (cause: unknown): boolean => cause instanceof Error && cause.message === "Command timed out"

/**
 * Calls in flight on `client`, failed at once when a connection closes, for the scope. Why: when a
 * connection drops, ioredis moves the commands it had written aside and, with
 * `autoResendUnfulfilledCommands: false`, drops them on reconnect without settling them, so a call
 * would wait for the command timeout (a lease can run out meanwhile); a cluster resends them after
 * `retryDelayOnFailover`, behind whatever held the node. A client you bring may have any options, so
 * the backend watches the connections' `close` events itself rather than relying on ioredis options.
 * In a cluster a node's connection closing fails every call in flight on the client (the engine
 * retries them); like any failed call, one may still have been applied.
 *
 * With `onReset` (the connections Simba made, not a client you bring): a command that times out
 * closes the connection it was sent on (told to `onReset` first), and ioredis connects again. A connection that stops
 * answering (a peer gone without a reset, a half-open TCP connection behind a NAT or a load balancer)
 * would otherwise time out every later call until the kernel gives up on it (ioredis sets no TCP
 * keep-alive), minutes during which the client cannot renew or acquire anything. Closing also fails
 * every call still in flight on it (see above) and drops ioredis's queue of commands waiting for a
 * reply, so no reply can be matched to a command it does not answer. Only the connection the command
 * went out on is closed: a timeout of a command sent before the last reconnect closes nothing.
 *
 * When ioredis does not time the commands out itself (a client you bring, see `ioredisTimesOut`), the
 * tracker does: one fiber of the scope sleeps (on the `Clock`) until the oldest call's deadline and
 * fails every call past its own. All calls get the same timeout, so the calls in flight, kept in the
 * order they were sent, are also in the order of their deadlines. Racing a timeout per call cost two
 * fibers and a timer per command: ~75 µs of CPU each, more than the round trip.
 */
export const tracker = (
  client: Client,
  commandTimeout: number,
  onReset: ((reason: string) => void) | undefined
): Effect.Effect<Tracker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const ownTimeout = ioredisTimesOut(client, commandTimeout)
    // Counts the connections made (each `ready`): the one a command went out on is still there while
    // the count has not moved.
    let connection = 0
    const onReady = () => {
      connection++
    }
    const resetAfterTimeout = (sentOn: number, operation: string) => {
      if (onReset === undefined || sentOn !== connection || client.status !== "ready") return
      onReset(`${operation}: no reply within ${commandTimeout} ms; reconnecting`)
      client.disconnect(true)
    }
    /** A call in flight: what fails it, and when it times out (tracker's own timeout only). */
    interface Pending {
      readonly fail: (reason: string) => void
      readonly timeOut: () => void
      readonly deadline: number
    }
    // In the order the calls were sent: also the order of their deadlines.
    const inFlight = new Set<Pending>()
    const failAll = (reason: string) => {
      const calls = [...inFlight]
      inFlight.clear()
      for (const call of calls) call.fail(reason)
    }
    const onClientClose = () => failAll("the connection closed")
    const watched = new Map<Redis, () => void>()
    const watchNode = (node: Redis) => {
      if (watched.has(node)) return
      const onClose = () => failAll(`the connection to ${addressOf(node)} closed`)
      watched.set(node, onClose)
      node.on("close", onClose)
    }
    const unwatchNode = (node: Redis) => {
      const onClose = watched.get(node)
      if (onClose === undefined) return
      node.off("close", onClose)
      watched.delete(node)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        client.on("close", onClientClose)
        client.on("ready", onReady)
        if (isCluster(client)) {
          for (const node of client.nodes("all")) watchNode(node)
          client.on("+node", watchNode)
          client.on("-node", unwatchNode)
        }
      }),
      () =>
        Effect.sync(() => {
          client.off("close", onClientClose)
          client.off("ready", onReady)
          if (isCluster(client)) {
            client.off("+node", watchNode)
            client.off("-node", unwatchNode)
            for (const node of [...watched.keys()]) unwatchNode(node)
          }
        })
    )
    const clock = yield* Effect.clock
    // Monotonic: a step of the wall clock moves no deadline.
    const nowMillis = () => Number(clock.unsafeCurrentTimeNanos()) / 1_000_000
    // The tracker's own timeout: the sweeper waits for a call while none is in flight.
    let wakeSweeper: ((resumed: Effect.Effect<void>) => void) | undefined
    if (!ownTimeout) {
      const sweep = Effect.suspend(() => {
        const now = nowMillis()
        for (const call of inFlight) {
          if (call.deadline > now) return clock.sleep(Duration.millis(call.deadline - now))
          inFlight.delete(call)
          call.timeOut()
        }
        return Effect.async<void>((resume) => {
          if (inFlight.size > 0) resume(Effect.void)
          else wakeSweeper = resume
        })
      })
      yield* Effect.forkScoped(Effect.whileLoop({ while: () => true, body: () => sweep, step: () => undefined }))
    }
    const trackWith = <A>(
      operation: string,
      send: () => Promise<A>,
      settled: (result: Either.Either<A, BackendError>) => void
    ): (() => void) | undefined => {
      // Never into an offline queue (a client you bring may have one): it would be sent late.
      if (client.status !== "ready") {
        settled(Either.left(backendError(operation, `not connected (connection ${client.status})`)))
        return undefined
      }
      let open = true
      const settle = (result: Either.Either<A, BackendError>) => {
        if (!open) return
        open = false
        inFlight.delete(pending)
        settled(result)
      }
      const pending: Pending = {
        fail: (reason) => settle(Either.left(backendError(operation, `${reason} while the call was in flight`))),
        timeOut: () => settle(Either.left(backendError(operation, `no reply within ${commandTimeout} ms`))),
        deadline: ownTimeout ? 0 : nowMillis() + commandTimeout
      }
      inFlight.add(pending)
      if (wakeSweeper !== undefined) {
        const wake = wakeSweeper
        wakeSweeper = undefined
        wake(Effect.void)
      }
      const sentOn = connection
      let promise: Promise<A>
      try {
        promise = send()
      } catch (cause) {
        settle(Either.left(backendError(operation, scrub(cause))))
        return undefined
      }
      // The promise settles later, or never (see above); after `settle` its outcome is ignored, but
      // not its timeout: the connection stopped answering, whoever gave up on the call first.
      promise.then(
        (reply) => settle(Either.right(reply)),
        (cause: unknown) => {
          if (isCommandTimeout(cause)) resetAfterTimeout(sentOn, operation)
          settle(Either.left(backendError(operation, scrub(cause))))
        }
      )
      if (ownTimeout) return undefined
      return () => {
        open = false
        inFlight.delete(pending)
      }
    }
    // Interrupted (the client's call timeout), a call is forgotten at once when ioredis may never
    // settle it; when ioredis times it out itself, it is forgotten when that happens (within
    // `commandTimeout`), and the wait needs no canceler: a canceler wraps every call in an
    // interruption handler, several runtime operations each. A late settle of an
    // interrupted wait is ignored by the runtime.
    const track = <A>(operation: string, send: () => Promise<A>): Effect.Effect<A, BackendError> =>
      Effect.async<A, BackendError>((resume) => {
        const forget = trackWith(operation, send, (result) => resume(result))
        return forget === undefined ? undefined : Effect.sync(forget)
      })
    return { track, trackWith }
  })

/** Runs script calls on a command connection. */
export interface Runner {
  /** Runs one script and decodes its reply. */
  readonly run: <A>(operation: string, call: Call<A>) => Effect.Effect<A, BackendError>
  /**
   * Runs several scripts at once (one per slot: ioredis sends them to their nodes without waiting)
   * as one effect, and decodes the replies; fails if any fails.
   */
  readonly runAll: <A>(operation: string, calls: ReadonlyArray<Call<A>>) => Effect.Effect<ReadonlyArray<A>, BackendError>
  /** `run` without an Effect: `done` gets the decoded reply or the failure, once. */
  readonly runWith: <A>(operation: string, call: Call<A>, done: (result: Either.Either<A, BackendError>) => void) => void
  /**
   * `runWith` for a call nobody waits on (a release behind the caller's back). When the last such
   * call was followed by another within the same turn of the event loop (a caller locking in a loop:
   * its next acquire), it waits for that one and both leave in one write, their replies in one read:
   * one system call each way on the client and on Redis instead of two, and the release is later only
   * by the caller's own work up to its next call. Otherwise (a release after idle, a hand-over) it goes
   * out at once. Either way it is sent by the end of the turn (`process.nextTick`); one node only.
   */
  readonly runBehind: <A>(operation: string, call: Call<A>, done: (result: Either.Either<A, BackendError>) => void) => void
}

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

/**
 * A server before Redis 7 cannot compile a script with flags (`#!lua flags=...`), which mode
 * `cluster` needs (its scripts read a session's pulse in another slot of the same node): said plainly.
 */
const flagsRefused = (script: Call<unknown>["script"], error: unknown): unknown =>
  script.lua.startsWith("#!lua") && error instanceof Error && /compiling script|shebang/i.test(error.message)
    ? new Error(
      `simba redis: the server refused script ${script.name}, which has Redis 7 script flags: Redis Cluster ` +
        `mode (and routeBySlot) needs Redis 7 or later (${error.message})`
    )
    : error

const isFunctionMissing = (error: unknown): boolean => error instanceof Error && /function not found/i.test(error.message)

/**
 * Whether `FUNCTION LOAD` failed because the server does not take libraries from this client: a
 * server before Redis 7 (no `FUNCTION`), or an ACL user without it. Then scripts go by SHA.
 */
const functionsRefused = (error: unknown): boolean =>
  error instanceof Error && /unknown command|unknown subcommand|NOPERM|no permissions/i.test(error.message)

/** The servers a library must be on: the client's, or every master of a cluster. */
const masters = (client: Client): ReadonlyArray<Redis> => isCluster(client) ? client.nodes("master") : [client]

/** `FUNCTION LOAD` of `library` on every master; one already there (by its name, so the same code) counts as loaded. */
const loadOn = (client: Client, library: Library): Promise<void> =>
  Promise.all(masters(client).map((node) =>
    node.call("FUNCTION", "LOAD", library.code).catch((error: unknown) =>
      error instanceof Error && /already exists/i.test(error.message) ? undefined : Promise.reject(error)
    )
  )).then(() => undefined)

/**
 * Loads the scripts' function library (`library.ts`) on every master: answers the library when the
 * servers took it, `undefined` (scripts by SHA) when a server does not take libraries (Redis 6, an ACL
 * user without `FUNCTION`; see `functionsRefused`). Any other failure (the connection, a library the
 * server cannot compile) fails the backend's start.
 */
export const loadLibrary = (client: Client, { track }: Tracker, library: Library): Effect.Effect<Library | undefined, BackendError> =>
  track("loadScripts", () => loadOn(client, library).then(() => library, (error: unknown) =>
    functionsRefused(error) ? undefined : Promise.reject(error)))

/**
 * Script calls: as functions of `library` (`FCALL`) when it was loaded (see `loadLibrary`), else by
 * SHA (`EVALSHA`). A server that lost the library (restarted without persistence, `FUNCTION FLUSH`, a
 * master added to a cluster) answers "Function not found": the library is loaded again on every
 * master and the call sent once more (by SHA, and every call after it, should the servers refuse the
 * library by then). By SHA, after `NOSCRIPT` (script cache flushed, failover) `EVAL`
 * loads the script again. Replies are decoded synchronously: the schemas have no effects, and the
 * Effect-based parser costs more than the round trip on a busy client.
 */
export const runner = (client: Client, { track, trackWith }: Tracker, library: Library | undefined): Runner => {
  /** The library calls go to; `undefined` from the moment the servers refuse it (scripts by SHA). */
  let functions = library
  /** The reload in flight after "Function not found", shared by the calls that met it at once. */
  let reloading: Promise<void> | undefined
  const reload = (lib: Library): Promise<void> => {
    if (reloading === undefined) {
      reloading = loadOn(client, lib).finally(() => {
        reloading = undefined
      })
    }
    return reloading
  }
  const bySha = ({ args, keys, script }: Call<unknown>): Promise<unknown> =>
    client.evalsha(script.sha, keys.length, ...keys, ...args).catch((error: unknown) =>
      isNoScript(error) ? client.eval(script.lua, keys.length, ...keys, ...args) : Promise.reject(flagsRefused(script, error))
    )
  const send = (call: Call<unknown>): Promise<unknown> => {
    const lib = functions
    const fn = lib?.functionOf(call.script)
    if (lib === undefined || fn === undefined) return bySha(call)
    const { args, keys } = call
    return client.fcall(fn, keys.length, ...keys, ...args).catch((error: unknown) =>
      isFunctionMissing(error)
        ? reload(lib).then(
          () => client.fcall(fn, keys.length, ...keys, ...args),
          (reloadError: unknown) => {
            if (!functionsRefused(reloadError)) return Promise.reject(reloadError)
            // The servers no longer take the library (its user lost `FUNCTION`): by SHA from now on.
            functions = undefined
            return bySha(call)
          }
        )
        : Promise.reject(error)
    )
  }
  const decode = <A>(operation: string, call: Call<A>, raw: unknown): Effect.Effect<A, BackendError> =>
    Either.match(call.decode(raw), {
      onLeft: (error) => Effect.fail(backendError(operation, error)),
      onRight: Effect.succeed
    })
  const run = <A>(operation: string, call: Call<A>): Effect.Effect<A, BackendError> =>
    track(operation, () => send(call)).pipe(Effect.flatMap((raw) => decode(operation, call, raw)))
  const runAll = <A>(operation: string, calls: ReadonlyArray<Call<A>>): Effect.Effect<ReadonlyArray<A>, BackendError> =>
    calls.length === 0
        ? Effect.succeed([])
        : track(operation, () => Promise.all(calls.map(send))).pipe(
          Effect.flatMap((raws) => {
            const replies: Array<A> = []
            for (let i = 0; i < calls.length; i++) {
              const reply = calls[i]!.decode(raws[i])
              if (Either.isLeft(reply)) return Effect.fail(backendError(operation, reply.left))
              replies.push(reply.right)
            }
            return Effect.succeed(replies)
          })
        )
  const runWith = <A>(operation: string, call: Call<A>, done: (result: Either.Either<A, BackendError>) => void): void => {
    trackWith(operation, () => send(call), (raw) =>
      done(Either.flatMap(raw, (reply) => Either.mapLeft(call.decode(reply), (error) => backendError(operation, error)))))
  }
  // Coalescing (see `Runner.runBehind`): one node's socket only (a cluster has one per node).
  /** A call nobody waits on was sent in this turn of the event loop (reset by `process.nextTick`). */
  let behindThisTurn = false
  /** Whether, after the last such call, another call followed within the same turn. */
  let followed = false
  /** The socket corked for the call behind, until the next call or the turn's end. */
  let corked: NonNullable<Redis["stream"]> | undefined
  const flush = () => {
    if (corked === undefined) return
    const stream = corked
    corked = undefined
    stream.uncork()
  }
  const endTurn = () => {
    behindThisTurn = false
    flush()
  }
  const runBehind = <A>(operation: string, call: Call<A>, done: (result: Either.Either<A, BackendError>) => void): void => {
    if (!behindThisTurn) {
      behindThisTurn = true
      process.nextTick(endTurn)
    }
    if (followed && corked === undefined && !isCluster(client) && client.status === "ready" && client.stream?.writable) {
      corked = client.stream
      corked.cork()
    }
    followed = false
    runWith(operation, call, done)
  }
  const runNow = <A>(operation: string, call: Call<A>, done: (result: Either.Either<A, BackendError>) => void): void => {
    runWith(operation, call, done)
    if (!behindThisTurn) return
    followed = true
    flush()
  }
  return { run, runAll, runWith: runNow, runBehind }
}

/**
 * Waits until a client you bring is ready: connects it when it was never connected (`lazyConnect`;
 * Simba still never closes it), fails when it was closed or is not ready within `connectTimeout`.
 */
export const awaitReady = (client: Client, connectTimeout: number): Effect.Effect<void, BackendError> => {
  let lastError: unknown
  return Effect.async<void, BackendError>((resume) => {
    if (client.status === "ready") return resume(Effect.void)
    if (client.status === "end") return resume(Effect.fail(backendError("connect", "the client given is closed")))
    const stop = () => {
      client.off("ready", onReady)
      client.off("end", onEnd)
    }
    const onReady = () => {
      stop()
      resume(Effect.void)
    }
    const onEnd = () => {
      stop()
      resume(Effect.fail(backendError("connect", scrub(lastError ?? "the client given was closed"))))
    }
    client.on("ready", onReady)
    client.on("end", onEnd)
    if (client.status === "wait") {
      client.connect().catch((error: unknown) => {
        lastError = error
      })
    }
    return Effect.sync(stop)
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(connectTimeout),
      onTimeout: () =>
        backendError(
          "connect",
          `the client given was not ready within ${connectTimeout} ms (status ${client.status})${
            lastError instanceof Error ? `: ${lastError.message}` : ""
          }`
        )
    })
  )
}

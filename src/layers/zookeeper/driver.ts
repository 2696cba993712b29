/**
 * The `zookeeper` addon (7.3, the C client built as a Node addon), loaded when a backend is built and
 * never when the library is imported, and the few of its callback calls this backend uses.
 *
 * Facts of the addon this module relies on (docs/design.md, "ZooKeeper", for the protocol):
 * - one `ZooKeeper` object is one ZooKeeper session; after its `close` event (code -112 on expiry, 0
 *   when closed here) it is never used again (the addon can crash on a reused handle);
 * - `connecting` is emitted when the connection is lost, `connect` when it is (re)established; the C
 *   client re-registers the session's watches itself on a reconnect (`SetWatches`);
 * - replies (and watch events) of one session arrive in the order the server processed them, and a
 *   watch event before the reply to any later request of that session;
 * - a default watch (`a_exists(path, true)`, `a_get_children(path, true)`) is registered once per
 *   path however often it is asked for, fires once, and is emitted on the object as `deleted`,
 *   `created`, `changed` or `child` with the path;
 * - `czxid` is a JavaScript number (exact below 2^53), `ephemeralOwner` and `client_id` lowercase hex
 *   without padding;
 * - the addon closes a session (as if expired) after `response_counter_limit` polls in a row that
 *   bring nothing (default 10): set far out of reach here, so only the server expires a session.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { closeSync, openSync, readdirSync, readlinkSync } from "node:fs"
import { BackendError, loadDriver } from "../../LeaseBackend.js"

/** Return codes of the C client used here. */
export const Rc = {
  ok: 0,
  connectionLoss: -4,
  operationTimeout: -7,
  invalidState: -9,
  noNode: -101,
  badVersion: -103,
  nodeExists: -110,
  notEmpty: -111,
  sessionExpired: -112,
  closing: -116,
  sessionMoved: -118
} as const

/** `ZOO_EPHEMERAL`. */
export const ephemeral = 1
/** No flags: a persistent node. */
export const persistent = 0
/** `ZOO_EPHEMERAL | ZOO_SEQUENCE`: the server appends the parent's next sequence number (10 digits). */
export const ephemeralSequential = 3

/** The `Stat` of a node, as much of it as this backend reads. */
export interface Stat {
  readonly czxid: number
  /** The zxid of the last change of the node's children (a child created or deleted). */
  readonly pzxid: number
  readonly version: number
  readonly ephemeralOwner: string
}

type Done<A> = (rc: number, message: string, value: A) => void

/** The callback API of one addon object (one session), typed as this backend uses it. */
export interface Handle {
  init(config: {
    readonly connect: string
    readonly timeout: number
    readonly response_counter_limit: number
    readonly debug_level: number
  }): unknown
  a_create(path: string, data: string, flags: number, done: Done<string>): number
  a_exists(path: string, watch: boolean, done: Done<Stat | null>): number
  a_get_children(path: string, watch: boolean, done: Done<ReadonlyArray<string> | null>): number
  a_delete_(path: string, version: number, done: (rc: number, message: string) => void): number
  close(): unknown
  on(event: "connect" | "connecting", listener: () => void): unknown
  on(event: "close", listener: (handle: unknown, code: number) => void): unknown
  on(event: "deleted" | "created" | "changed" | "child" | "notwatching", listener: (handle: unknown, path: string) => void): unknown
  readonly timeout: number
  readonly client_id: string
}

/** Makes a new, not yet initialised addon object. */
export type Driver = () => Handle

/** Loads the addon; a missing package fails with a `BackendError` naming the install line. */
export const loadZookeeper: Effect.Effect<Driver, BackendError> = Effect.map(
  loadDriver("zookeeper", "zookeeper", "npm install zookeeper@~7.3", () => import("zookeeper")),
  (module) => {
    // The package types its promise class loosely; this backend uses the callback API it inherits,
    // typed by `Handle` above.
    const ZooKeeper = module.default as unknown as new(config: object) => Handle
    return () => new ZooKeeper({})
  }
)

/**
 * Creating and closing addon objects, one at a time, a loop turn apart, and a defect of the addon
 * this backend works around.
 *
 * The addon watches a session's socket with a libuv poll handle and never checks the result of
 * `uv_poll_init`. After an object whose connection was lost and re-established (an ensemble
 * failover) is closed, the descriptor number of its socket stays registered with libuv: every later
 * socket that gets that number (the next session's) is never polled, and that session never connects
 * (seen in the ensemble tests: after a failover, closing a session made every later session of the
 * process hang; a new process was fine). So, when such an object is closed, the backend keeps that
 * descriptor number occupied (a read-only `/dev/null`, one descriptor per session closed after its
 * connection moved, for the life of the process). Objects are also created only after a loop turn
 * has passed since the last close (`sleep(1 ms)` resumes in a later turn's timer phase, after the
 * close phase of the turn the close happened in), so a socket never takes a number whose poll handle
 * libuv is still closing.
 */
const lifecycle = Effect.unsafeMakeSemaphore(1)
const nextTurn = Effect.sleep(Duration.millis(1))

/** Creates an addon object, wires it with `setup` and starts it with `config` (see `lifecycle`). */
export const createHandle = (
  driver: Driver,
  setup: (handle: Handle) => void,
  config: Parameters<Handle["init"]>[0]
): Effect.Effect<Handle> =>
  lifecycle.withPermits(1)(Effect.zipRight(
    nextTurn,
    Effect.sync(() => {
      const handle = driver()
      setup(handle)
      handle.init(config)
      return handle
    })
  ))

/** The socket descriptors of this process (Linux `/proc`; empty where it cannot be read). */
const socketDescriptors = (): Set<number> => {
  const sockets = new Set<number>()
  let names: Array<string>
  try {
    names = readdirSync("/proc/self/fd")
  } catch {
    return sockets // no /proc: the workaround cannot apply
  }
  for (const name of names) {
    try {
      if (readlinkSync(`/proc/self/fd/${name}`).startsWith("socket:")) sockets.add(Number(name))
    } catch {
      // closed while listing
    }
  }
  return sockets
}

/** Keeps descriptor number `fd` open on `/dev/null` (lower free numbers are taken and given back on the way). */
const occupy = (fd: number): void => {
  const passed: Array<number> = []
  try {
    for (let i = 0; i <= fd; i++) {
      const opened = openSync("/dev/null", "r")
      if (opened === fd) return
      if (opened > fd) {
        closeSync(opened) // someone else took it meanwhile: nothing to protect
        return
      }
      passed.push(opened)
    }
  } finally {
    for (const extra of passed) closeSync(extra)
  }
}

/**
 * Closes an addon object (see `lifecycle`); the object is never used again. `moved`: its connection
 * was lost and re-established at some point, so its descriptor number is kept occupied.
 */
export const closeHandle = (handle: Handle, moved = false): Effect.Effect<void> =>
  lifecycle.withPermits(1)(Effect.zipLeft(
    Effect.sync(() => {
      if (!moved) return void handle.close()
      const before = socketDescriptors()
      handle.close()
      const after = socketDescriptors()
      for (const fd of before) if (!after.has(fd)) occupy(fd)
    }),
    nextTurn
  ))

/** The codes that mean the session is gone (expired, or closed here). */
export const isSessionGone = (rc: number): boolean =>
  rc === Rc.sessionExpired || rc === Rc.closing || rc === Rc.invalidState

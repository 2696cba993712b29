/**
 * The `zookeeper` addon (7.3, the C client built as a Node addon), loaded when a backend is built and
 * never when the library is imported, and the few of its callback calls this backend uses.
 *
 * Facts of the addon this module relies on (see the backend's module comment for the protocol):
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
import * as Effect from "effect/Effect"
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
  sessionExpired: -112,
  closing: -116,
  sessionMoved: -118
} as const

/** `ZOO_EPHEMERAL`. */
export const ephemeral = 1
/** No flags: a persistent node. */
export const persistent = 0

/** The `Stat` of a node, as much of it as this backend reads. */
export interface Stat {
  readonly czxid: number
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

/** A non-zero return code as an error: `<rc> <message>`, as the addon's promise API words it. */
export const failure = (operation: string, rc: number, message: string): BackendError =>
  new BackendError({ backend: "zookeeper", operation, cause: new Error(`${rc} ${message}`) })

/** The codes that mean the session is gone (expired, or closed here). */
export const isSessionGone = (rc: number): boolean =>
  rc === Rc.sessionExpired || rc === Rc.closing || rc === Rc.invalidState

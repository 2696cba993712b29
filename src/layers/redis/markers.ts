/**
 * Boot markers: how the backend notices that the store lost its state (restart without persistence,
 * flush, fail-over to a replica that lacks it) and starts a lock-delay (docs/design.md,
 * "Lost state"). Mode `node`: one key, `<prefix>:boot`. Mode `cluster`: a script may touch one slot
 * only and a node can be wiped alone, so one marker per slot, `<prefix>:boot:{tag(slot)}`, checked by
 * the scripts of that slot; when the backend finds markers missing it creates every missing one in one
 * pass, all of a node resuming at the same time, so a fresh store pays one delay, not one per slot.
 */
import * as Effect from "effect/Effect"
import type { BackendError } from "../../LeaseBackend.js"
import type { Client, Runner } from "./connection.js"
import type { Keys } from "./keys.js"
import type { Mode } from "./options.js"
import * as Scripts from "./scripts.js"
import { slotTag } from "./slots.js"

const slotCount = 16384
/** Markers created per round of a pass (bounded work per round). */
const batch = 2048

/** The slots of each master (ioredis `Cluster.slots`: per slot, its master's key first); one group on a single server. */
const slotsByNode = (client: Client): Array<Array<number>> => {
  const bySlot: ReadonlyArray<ReadonlyArray<string> | undefined> = "slots" in client ? client.slots : []
  const groups = new Map<string, Array<number>>()
  for (let slot = 0; slot < slotCount; slot++) {
    const node = bySlot[slot]?.[0] ?? ""
    const group = groups.get(node)
    if (group === undefined) groups.set(node, [slot])
    else group.push(slot)
  }
  return [...groups.values()]
}

/**
 * Creates the missing markers with a lock-delay of `delayMs`. Mode `cluster`: per node, the marker of
 * its first slot first; the node's other slots only when that one was missing or `all`, resuming at
 * its time when it was just created. Answers the resume time (server ms) of each node whose first
 * marker (mode `node`: the store's) this pass created.
 */
const pass = (
  mode: Mode,
  k: Keys,
  { run, runAll }: Runner,
  client: Client,
  delayMs: number,
  all: boolean
): Effect.Effect<ReadonlyArray<string>, BackendError> => {
  if (mode === "node") {
    return Effect.map(
      run("bootMarker", Scripts.bootMarker({ marker: k.boot }, { delayMs, resumeAt: "" })),
      ([created, resume]) => created === 1 ? [resume] : []
    )
  }
  const marker = (slot: number, resumeAt: string) => Scripts.bootMarker({ marker: k.bootIn(slotTag(slot)) }, { delayMs, resumeAt })
  return Effect.map(
    Effect.forEach(slotsByNode(client), ([first, ...rest]) =>
      Effect.gen(function*() {
        const [created, resume] = yield* run("bootMarker", marker(first!, ""))
        if (created === 0 && !all) return []
        const resumeAt = created === 1 ? resume : ""
        for (let i = 0; i < rest.length; i += batch) {
          yield* runAll("bootMarker", rest.slice(i, i + batch).map((slot) => marker(slot, resumeAt)))
        }
        return created === 1 ? [resume] : []
      }), { concurrency: "unbounded" }),
    (created) => created.flat()
  )
}

/**
 * The wait a start pays when it created a marker, logged then: nothing else shows it until the first
 * acquire comes back "held" with no holder, which looks like a hang. A new store (or key prefix) and
 * one that lost its state look the same here, so Warning, not the Error of a loss found mid-run.
 */
const logStartDelay = (mode: Mode, k: Keys, delayMs: number, resumes: ReadonlyArray<string>) => {
  if (resumes.length === 0 || delayMs === 0) return Effect.void
  const until = Math.max(...resumes.map(Number))
  const marker = mode === "node" ? k.boot : `${k.bootIn("...")}, one per hash slot`
  return Effect.logWarning(
    `simba redis: no boot marker (${marker}) on this store: ` +
      `a new Redis or keyPrefix, or one that lost its state (restart without persistence, flush, fail-over). ` +
      `No lease is granted for the lockDelay of ${delayMs} ms, until ${new Date(until).toISOString()} ` +
      `by the server's clock, so a session that may still believe it holds a lease here has passed its ` +
      `deadline first. For a store known to be new, start once with lockDelay 0 ` +
      `(option lockDelay, env SIMBA_REDIS_LOCK_DELAY=0): that start creates the marker without a wait, and ` +
      `later starts with the delay set keep its protection against a loss`
  ).pipe(Effect.annotateLogs({ backend: "redis" }))
}

/** At start: creates the markers of every node (mode `node`: the store) found without its first one, and logs the wait. */
export const markOnStart = (mode: Mode, k: Keys, runner: Runner, client: Client, delayMs: number) =>
  Effect.flatMap(pass(mode, k, runner, client, delayMs, false), (resumes) => logStartDelay(mode, k, delayMs, resumes))

/** After a script found a marker missing: creates every missing marker. */
export const markAll = (mode: Mode, k: Keys, runner: Runner, client: Client, delayMs: number) =>
  Effect.asVoid(pass(mode, k, runner, client, delayMs, true))

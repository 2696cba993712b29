/**
 * The ensemble's prober, run as a child process of the ensemble tests (see `Ensemble.ts`): asks each
 * client port for its mode (`srvr`) every 100 ms and prints one JSON line per round,
 * `{"modes":["leader","follower","down"],"served":12345.6}`, in the order of the ports given as
 * arguments. `served` is when (on the shared monotonic clock, `monotonicMs`) the latest write probe
 * that succeeded started: while some server says it leads, a fresh process (`writeProbe.mjs`) opens a
 * session and creates a node, one probe at a time. Polling here instead of in the test's process
 * keeps that process from opening and closing sockets and pipes while its ZooKeeper sessions
 * reconnect (see `Ensemble.ts` for why that matters).
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { monotonicMs } from "../support/processes.js"
import { modeOf } from "./Ensemble.js"

const ports = process.argv.slice(2).map(Number)
const connect = ports.map((port) => `127.0.0.1:${port}`).join(",")
const probe = fileURLToPath(new URL("./writeProbe.mjs", import.meta.url))
let served: number | undefined
let probing = false

const writeProbe = () => {
  probing = true
  const startedAt = monotonicMs()
  const child = spawn(process.execPath, [probe, connect], { stdio: "ignore" })
  child.on("exit", (code) => {
    if (code === 0) served = startedAt
    // One a second at most: each is a node process of its own.
    setTimeout(() => (probing = false), 1_000)
  })
}

const round = async (): Promise<void> => {
  const modes = await Promise.all(ports.map(modeOf))
  if (!probing && modes.includes("leader")) writeProbe()
  process.stdout.write(JSON.stringify({ modes, served }) + "\n")
  setTimeout(() => void round(), 100)
}
void round()

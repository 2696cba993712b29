/**
 * A private 3-node ZooKeeper ensemble for the ensemble tests: three `QuorumPeerMain` JVMs (from the
 * Debian package that `scripts/services.sh` installs) on free loopback ports, under a temporary
 * directory, each in its own process group. Only these pids are ever signalled; `stop` kills them
 * and removes the directory.
 *
 * The servers' modes are polled by a child process (`modes.ts`), never in the test's process: the
 * `zookeeper` addon (7.3) crashes the process that runs several of its sessions (`uv_poll_start:
 * Assertion '!uv__is_closing(handle)' failed`, or a segfault) when other sockets of that process
 * open and close while those sessions reconnect after a server fault. Reproduced in a minute with
 * three sessions, a fault every few seconds and the four-letter-word probes this module used to run
 * in-process (`addonStress.ts`); with the probes in another process 80 cycles of faults ran clean.
 * It crashed a CI run once: the worker running ensemble.test.ts died, and vitest stopped the run on
 * "Channel closed" (what a vitest worker that aborts prints). docs/zookeeper.md says
 * what this means for applications.
 */
import type { ChildProcess } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { exited, freePort, monotonicMs, processes, signalGroup } from "../support/processes.js"

const jars = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"]

export const tickTime = 500
/** Ticks a follower may lag (no ack) before its leader stops counting it. */
export const syncLimit = 4

/** Sends a four-letter word and returns the answer ("" when the server does not answer within 1 s). */
export const fourLetters = (port: number, word: string) =>
  new Promise<string>((resolve) => {
    let answer = ""
    const socket = connect(port, "127.0.0.1", () => socket.write(word))
    const timer = setTimeout(() => socket.destroy(), 1000)
    socket.on("data", (chunk) => (answer += chunk.toString()))
    socket.on("error", () => undefined)
    socket.on("close", () => {
      clearTimeout(timer)
      resolve(answer)
    })
  })

export type Mode = "leader" | "follower" | "down"

export const modeOf = async (port: number): Promise<Mode> => {
  const answer = await fourLetters(port, "srvr")
  const mode = /Mode: (\w+)/.exec(answer)?.[1]
  return mode === "leader" || mode === "follower" ? mode : "down"
}

export interface Node {
  readonly id: number
  readonly clientPort: number
  process: ChildProcess | undefined
}

export interface Ensemble {
  readonly nodes: ReadonlyArray<Node>
  /** `host:port,host:port,host:port` of the client ports. */
  readonly connect: string
  readonly start: (node: Node) => void
  /** Sends `signal` to the node's process group. */
  readonly signal: (node: Node, signal: NodeJS.Signals) => void
  /** The modes of a prober round that started after the call. */
  readonly freshModes: () => Promise<ReadonlyArray<Mode>>
  /** The node that leads, once one does (within `timeoutMs`). */
  readonly awaitLeader: (timeoutMs: number, among?: ReadonlyArray<Node>) => Promise<Node>
  /**
   * Whether a write probe that started after the call (a fresh process opening a session and creating
   * a node, see `modes.ts`) succeeded within `timeoutMs`: the ensemble serves, not only says it leads.
   */
  readonly awaitServing: (timeoutMs: number) => Promise<boolean>
  /** Kills every node and starts them again on their data (resolves once they are started). */
  readonly restart: () => Promise<void>
  /** The last `lines` lines of the node's log, the prober's `srvr` requests left out. */
  readonly logTail: (node: Node, lines: number) => string
  readonly stop: () => void
}

export const start = async (): Promise<Ensemble> => {
  const dir = mkdtempSync(join(tmpdir(), "simba-zk-ensemble-"))
  const ports = await Promise.all(Array.from({ length: 9 }, freePort))
  const nodes: Array<Node> = [1, 2, 3].map((id) => ({ id, clientPort: ports[id - 1]!, process: undefined }))
  const servers = nodes.map((node) => `server.${node.id}=127.0.0.1:${ports[2 + node.id]}:${ports[5 + node.id]}`)
  for (const node of nodes) {
    const home = join(dir, String(node.id))
    mkdirSync(join(home, "data"), { recursive: true })
    writeFileSync(join(home, "data", "myid"), `${node.id}\n`)
    writeFileSync(
      join(home, "zoo.cfg"),
      [
        `tickTime=${tickTime}`,
        "initLimit=10",
        `syncLimit=${syncLimit}`,
        "minSessionTimeout=1000",
        "maxSessionTimeout=60000",
        `dataDir=${join(home, "data")}`,
        `clientPort=${node.clientPort}`,
        "clientPortAddress=127.0.0.1",
        "maxClientCnxns=0",
        "admin.enableServer=false",
        "forceSync=no",
        "preAllocSize=4096",
        ...servers
      ].join("\n") + "\n"
    )
    writeFileSync(
      join(home, "log4j.properties"),
      [
        "log4j.rootLogger=INFO, FILE",
        "log4j.appender.FILE=org.apache.log4j.FileAppender",
        `log4j.appender.FILE.File=${join(home, "zookeeper.log")}`,
        "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %m%n"
      ].join("\n") + "\n"
    )
  }
  const group = processes()
  const startNode = (node: Node) => {
    const home = join(dir, String(node.id))
    node.process = group.spawnCommand("java", [
      "-Xms32m",
      "-Xmx128m",
      "-XX:+UseSerialGC",
      "-XX:TieredStopAtLevel=1",
      "-Dzookeeper.admin.enableServer=false",
      "-Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat,mntr",
      `-Dlog4j.configuration=file:${join(home, "log4j.properties")}`,
      "-cp",
      [home, ...jars].join(":"),
      "org.apache.zookeeper.server.quorum.QuorumPeerMain",
      join(home, "zoo.cfg")
    ])
  }
  const signal = (node: Node, sig: NodeJS.Signals) => {
    if (node.process !== undefined) signalGroup(node.process, sig)
  }
  // The prober (see the module comment); `latest` is its last round, `rounds` counts them.
  const prober = group.spawnScript("test/zookeeper/modes.ts", { args: nodes.map((node) => String(node.clientPort)) })
  let latest: ReadonlyArray<Mode> = nodes.map(() => "down")
  let rounds = 0
  let served = -Infinity
  let read = 0
  // Registered after `spawnScript`'s own listener, which has split the chunk into `group.lines`.
  prober.stdout!.on("data", () => {
    for (; read < group.lines.length; read++) {
      const line = group.lines[read]!
      if (line.pid !== prober.pid || line.json === undefined) continue
      latest = line.json["modes"] as ReadonlyArray<Mode>
      if (typeof line.json["served"] === "number") served = line.json["served"]
      rounds++
    }
  })
  /** The modes of a round that started after this call (so a fault just injected is seen). */
  const freshModes = async (): Promise<ReadonlyArray<Mode>> => {
    const from = rounds
    // A round takes at most the probe's 1 s timeout plus 100 ms; it began before `from` at worst.
    const until = performance.now() + 5_000
    while (rounds < from + 2) {
      if (performance.now() > until) throw new Error("the ensemble's prober printed nothing for 5 s")
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return latest
  }
  const awaitLeader = async (timeoutMs: number, among: ReadonlyArray<Node> = nodes) => {
    const until = performance.now() + timeoutMs
    for (;;) {
      const all = await freshModes()
      const modes = among.map((node) => all[nodes.indexOf(node)]!)
      const leader = among.find((_, i) => modes[i] === "leader")
      // A leader that serves: its followers among `among` are up too (a quorum).
      if (leader !== undefined && modes.filter((mode) => mode !== "down").length >= 2) return leader
      if (performance.now() > until) throw new Error(`no ZooKeeper leader within ${timeoutMs} ms (modes ${modes.join(", ")})`)
    }
  }
  const awaitServing = async (timeoutMs: number) => {
    const from = monotonicMs()
    const until = performance.now() + timeoutMs
    while (served < from) {
      if (performance.now() > until) return false
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return true
  }
  /** Resumes (if stopped) and kills every node. */
  const killNodes = () => {
    for (const node of nodes) {
      signal(node, "SIGCONT")
      signal(node, "SIGKILL")
    }
  }
  const restart = async () => {
    killNodes()
    await Promise.all(nodes.map((node) => node.process === undefined ? undefined : exited(node.process)))
    for (const node of nodes) startNode(node)
  }
  const logTail = (node: Node, lines: number) => {
    try {
      return readFileSync(join(dir, String(node.id), "zookeeper.log"), "utf8").split("\n").filter((line) => !line.includes("Processing srvr command")).slice(-lines - 1).join("\n")
    } catch (error) {
      return `(no log: ${String(error)})`
    }
  }
  for (const node of nodes) startNode(node)
  return {
    nodes,
    freshModes,
    connect: nodes.map((node) => `127.0.0.1:${node.clientPort}`).join(","),
    start: startNode,
    signal,
    awaitLeader,
    awaitServing,
    restart,
    logTail,
    stop: () => {
      signalGroup(prober, "SIGKILL")
      killNodes()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

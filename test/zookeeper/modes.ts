/**
 * The ensemble's prober, run as a child process of the ensemble tests (see `Ensemble.ts`): asks each
 * client port for its mode (`srvr`) every 100 ms and prints one JSON line per round,
 * `{"modes":["leader","follower","down"]}`, in the order of the ports given as arguments. Polling here
 * instead of in the test's process keeps that process from opening and closing sockets while its
 * ZooKeeper sessions reconnect (see `Ensemble.ts` for why that matters).
 */
import { modeOf } from "./Ensemble.js"

const ports = process.argv.slice(2).map(Number)
const round = async (): Promise<void> => {
  const modes = await Promise.all(ports.map(modeOf))
  process.stdout.write(JSON.stringify({ modes }) + "\n")
  setTimeout(() => void round(), 100)
}
void round()

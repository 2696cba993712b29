import { shortRun } from "./short.js"

shortRun("redis", ["SIGSTOP server", "lease hash deleted"])

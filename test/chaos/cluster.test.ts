import { shortRun } from "./short.js"

shortRun("cluster", ["kill -9 leader", "master restart, no persistence"])

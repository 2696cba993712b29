import { shortRun } from "./short.js"

shortRun("pg", ["blackhole leader", "crash restart"])

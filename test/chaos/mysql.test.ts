import { shortRun } from "./short.js"

shortRun("mysql", ["connection kill", "crash restart"])

import { shortRun } from "./short.js"

shortRun("zookeeper", ["blackhole leader"])

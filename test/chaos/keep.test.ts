import { shortRun } from "./short.js"

// Lock caching under faults: three processes take one lock with `keep` again and again (each body a
// term with its own token, from a cached lease's block), handing it on when another asks.
shortRun("redis", ["kill -9 leader", "lease hash deleted"], "200 millis")
shortRun("pg", ["SIGSTOP leader"], "200 millis")

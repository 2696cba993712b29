// The resolve hook behind record-loads.mjs (runs on the loader thread, hence the synchronous writes).
import { appendFileSync } from "node:fs"

let log

export const initialize = (data) => {
  log = data.log
}

export const resolve = (specifier, context, nextResolve) => {
  appendFileSync(log, `import ${specifier}\n`)
  return nextResolve(specifier, context)
}

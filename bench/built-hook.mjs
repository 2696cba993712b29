// The resolve hook of `built.mjs`: `<root>/src/X.ts` (or `.js`) resolves to `<root>/dist/X.js`.
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"

const src = new URL("../src/", import.meta.url).href
const dist = new URL("../dist/", import.meta.url).href

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context)
  if (!resolved.url.startsWith(src)) return resolved
  const url = dist + resolved.url.slice(src.length).replace(/\.ts$/, ".js")
  if (!existsSync(fileURLToPath(url))) {
    throw new Error(`bench: ${url} is missing: run \`npm run build\` first (npm run bench does)`)
  }
  return { ...resolved, url, format: "module" }
}

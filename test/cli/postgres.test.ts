/** `simba lock` and `simba elect` on PostgreSQL, with real processes (see `harness.ts`). */
import { describe } from "@effect/vitest"
import { backends, lockAndElectCases } from "./harness.js"

describe("simba lock and elect on postgres", () => lockAndElectCases(backends.find((b) => b.name === "postgres")!))

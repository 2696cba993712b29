/** `simba lock` and `simba elect` on MySQL/MariaDB, with real processes (see `harness.ts`). */
import { describe } from "@effect/vitest"
import { backends, lockAndElectCases } from "./harness.js"

describe("simba lock and elect on mysql", () => lockAndElectCases(backends.find((b) => b.name === "mysql")!))

/** `simba lock` and `simba elect` on ZooKeeper, with real processes (see `harness.ts`). */
import { describe } from "@effect/vitest"
import { backends, lockAndElectCases } from "./harness.js"

describe("simba lock and elect on zookeeper", () => lockAndElectCases(backends.find((b) => b.name === "zookeeper")!))

/**
 * `simba/test`: `SimbaTest`, the kit for testing leader-only code with `TestClock` on the in-memory
 * backend (a faulty network, `advance`, a fenced store, a recorder of terms).
 */
export * as SimbaTest from "./SimbaTest.js"

/**
 * `simba/http`: `SimbaHttp`, the operations endpoint (snapshot, health, Prometheus metrics). The only
 * module that needs `@effect/platform-node`, for `SimbaHttp.layer`'s server.
 */
export * as SimbaHttp from "./SimbaHttp.js"

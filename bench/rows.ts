// The rows of the bench's results files (results.json, results-sql.json, results-zookeeper.json):
// written by run.ts, sql.ts and zookeeper.ts, read by report.ts.

/** A row of results.json: Simba beside the Redis peers and the floor under it. */
export interface RedisRow {
  readonly bench: string
  readonly metric: string
  readonly unit: string
  readonly simba: number | null
  readonly redlock: number | null
  readonly redisSemaphore: number | null
  readonly floor: number | null
}

/** A row of results-sql.json: both SQL backends beside their raw lock pairs. */
export interface SqlRow {
  readonly bench: string
  readonly metric: string
  readonly unit: string
  readonly postgres: number | null
  readonly mysql: number | null
  readonly peerPostgres: number | null
  readonly peerMysql: number | null
}

/** A row of results-zookeeper.json. */
export interface ZkRow {
  readonly bench: string
  readonly metric: string
  readonly unit: string
  readonly simba: number | null
  readonly floor: number | null
}

/** The first row of `bench` whose metric matches `metric`. */
export const find = <A extends { readonly bench: string; readonly metric: string }>(
  rows: ReadonlyArray<A>,
  bench: string,
  metric: RegExp
): A | undefined => rows.find((row) => row.bench === bench && metric.test(row.metric))

/** Whether a results file's figure is there (a number, not `null` or a non-finite value). */
export const isNumber = (x: number | null | undefined): x is number => typeof x === "number" && Number.isFinite(x)

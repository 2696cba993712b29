/** The TCK (`LeaseBackendSpec`, `FencingSpec`) on the PostgreSQL at 127.0.0.1:5432, real time. */
import * as PgBackend from "../../src/layers/sql/PgBackend.js"
import { FencingSpec } from "../tck/FencingSpec.js"
import { LeaseBackendSpec } from "../tck/LeaseBackendSpec.js"
import { clientTiming, pgUrl, ttl } from "./SqlServers.js"

const layer = PgBackend.layer({ url: pgUrl, tablePrefix: "simba_t_pg_" })

LeaseBackendSpec("postgres", layer, { virtualTime: false, ttl, hints: true, handOffGrants: true, holds: true, client: clientTiming })
FencingSpec("postgres", layer, { virtualTime: false, ttl, client: clientTiming })

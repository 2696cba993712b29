/** The TCK (`LeaseBackendSpec`, `FencingSpec`) on the MariaDB at 127.0.0.1:3306, real time. MySQL pushes no hints. */
import * as MysqlBackend from "../../src/layers/sql/MysqlBackend.js"
import { FencingSpec } from "../tck/FencingSpec.js"
import { LeaseBackendSpec } from "../tck/LeaseBackendSpec.js"
import { clientTiming, mysqlUrl, ttl } from "./SqlServers.js"

const layer = MysqlBackend.layer({ url: mysqlUrl, tablePrefix: "simba_t_my_" })

LeaseBackendSpec("mysql", layer, { virtualTime: false, ttl, hints: false, holds: true, client: clientTiming })
FencingSpec("mysql", layer, { virtualTime: false, ttl, client: clientTiming })

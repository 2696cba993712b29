/**
 * The ZooKeeper the tests run against: the standalone server on 127.0.0.1:2181 that
 * `scripts/services.sh` (run first by `npm test`) installs and starts, with `tickTime=500`,
 * `minSessionTimeout=1000`, `maxSessionTimeout=60000` (see ../shared/SERVICES.md).
 */
import * as ZookeeperBackend from "../../src/layers/zookeeper/ZookeeperBackend.js"

export const standalone: ZookeeperBackend.ZookeeperOptions = { connect: "127.0.0.1:2181", root: "/simba-test" }

/**
 * Session ttl of the real-time suites. The server grants it as asked (it lies in [1 s, 60 s]), and a
 * renewal proves 5/12 of it: 1 s. Long enough that a loaded 2-core machine's event-loop stalls (a few
 * hundred ms) do not end sessions, short enough that the expiry cases stay quick.
 */
export const ttl = "2400 millis"

/** What a fresh session or a renewal reports for `ttl`: 5/12 of the negotiated timeout. */
export const granted = "1000 millis"

/**
 * Client timing of the TCK's client-level cases: leases of `ttl`, so the engine renews every third of
 * the 1 s a renewal proves (with no `SessionLeaseShortened`: the server grants the 2.4 s asked, and
 * 5/12 of it is the backend's own rule). Margin: a term ends locally at most
 * `sentAt + 1 s × 0.99 − 200 ms` after its last good renewal, while the server lets a successor in no
 * earlier than the session timeout (2.4 s) after that renewal was sent (the watchdog, or the server's
 * expiry of a silent client): 1.6 s of slack between a revoked leader's interruption and a successor.
 */
export const clientTiming = { leaseDuration: ttl, margin: "200 millis" } as const

/**
 * A TCP proxy of the tests' own (node:net) between a client and a server, to break the path without
 * touching the server: `blackhole` stops forwarding in both directions without closing anything (the
 * peers see silence, as behind a dead switch), `heal` forwards again (what was held back is dropped),
 * `reset` destroys every connection (both peers see it closed).
 */
import { createServer, type Socket } from "node:net"

export interface Proxy {
  readonly port: number
  readonly blackhole: () => void
  readonly heal: () => void
  readonly reset: () => void
  readonly close: () => Promise<void>
}

export const startProxy = (targetPort: number, targetHost = "127.0.0.1"): Promise<Proxy> =>
  new Promise((resolve, reject) => {
    let dropping = false
    const pairs = new Set<readonly [Socket, Socket]>()
    const server = createServer((client) => {
      const upstream = new (client.constructor as typeof Socket)()
      upstream.connect(targetPort, targetHost)
      const pair = [client, upstream] as const
      pairs.add(pair)
      const forward = (from: Socket, to: Socket) =>
        from.on("data", (chunk) => {
          if (!dropping && !to.destroyed) to.write(chunk)
        })
      forward(client, upstream)
      forward(upstream, client)
      const end = () => {
        pairs.delete(pair)
        client.destroy()
        upstream.destroy()
      }
      client.on("error", end).on("close", end)
      upstream.on("error", end).on("close", end)
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({
        port,
        blackhole: () => {
          dropping = true
        },
        heal: () => {
          dropping = false
        },
        reset: () => {
          for (const [client, upstream] of pairs) {
            client.destroy()
            upstream.destroy()
          }
          pairs.clear()
        },
        close: () =>
          new Promise((done) => {
            for (const [client, upstream] of pairs) {
              client.destroy()
              upstream.destroy()
            }
            server.close(() => done())
          })
      })
    })
  })

/** The client's `snapshot`: the session, every election/lock/partition and every group, read from the engine state. */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Engine from "../Engine.js"
import type { SimbaSnapshot } from "../Simba.js"
import * as Term from "../Term.js"
import * as SessionDeadline from "./sessionDeadline.js"
import type { Shell } from "./shell.js"

export const snapshot = (shell: Shell): Effect.Effect<SimbaSnapshot> =>
  Effect.gen(function*() {
    const now = yield* Term.monotonicMillis
    // Read after the clock, with no yield until the result is built: the loop drops a state's
    // history once the next step replaces it (`Engine.supersede`).
    const s = shell.state
    const left = (deadline: number) => Duration.millis(Math.max(0, deadline - now))
    const sessionDeadline = s.session.status === "LIVE" || s.session.status === "SUSPENDED" ? s.session.deadline : now
    return {
      session: { id: s.session.id, status: s.session.status, remaining: left(sessionDeadline) },
      elections: Array.from(s.elections.values()).map((e) => ({
        name: e.name,
        kind: e.kind,
        status: Engine.publicStatus(e),
        token: e.term?.token,
        remaining: e.term !== undefined && !e.term.revoked
          ? left(SessionDeadline.deadlineOf(shell.deadline, e.term.sessionSeq, now))
          : Duration.zero
      })),
      groups: Array.from(s.groups.values()).map((g) => ({
        group: g.group,
        partitions: g.partitions,
        members: g.members,
        owned: g.owned
      })),
      cached: Array.from(s.cached.entries()).map(([name, c]) => ({ name, token: c.leaseToken, remaining: left(c.until) }))
    } satisfies SimbaSnapshot
  })

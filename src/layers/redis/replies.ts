/**
 * The replies of the scripts, as `Schema`s (a reply that does not decode is a `BackendError`), and
 * their translation into the SPI's answers.
 */
import * as Duration from "effect/Duration"
import * as Schema from "effect/Schema"
import { AcquireReply, type GroupView, type HeldLease } from "../../LeaseBackend.js"

const Expired = Schema.Tuple(Schema.Literal("expired"))
const Millis = Schema.Int
const Token = Schema.BigInt
/** `{name, token}` pairs of held leases. */
export const LeaseList = Schema.Array(Schema.Tuple(Schema.String, Token))
/** `{group, members}` pairs of the groups a session belongs to. */
export const GroupList = Schema.Array(Schema.Tuple(Schema.String, Schema.Array(Schema.String)))

export const Opened = Schema.Union(Schema.Tuple(Schema.Literal("ok"), Millis), Schema.Tuple(Schema.Literal("exists")))
/** 1: the lease hash had been deleted by hand and was restored from its holder record. */
const Restored = Schema.optionalElement(Schema.Literal(0, 1))
/**
 * `delayed`: a lock-delay runs (the ms left, and 1 when this call found the boot marker missing).
 * `stale`: (cluster) the registration the call carried was overtaken by a renewal that closed the slot.
 * `moved`: (cluster) the pulse the call named is on another node (the client's slot table is behind). */
export const Acquired = Schema.Union(
  /** A grant's 4th element: the tokens it reserved (its token the last of them; absent: one). */
  Schema.Tuple(Schema.Literal("granted"), Token, Restored, Schema.optionalElement(Schema.Int)),
  Schema.Tuple(Schema.Literal("held"), Schema.Union(Schema.Literal(""), Token), Millis, Restored),
  Schema.Tuple(Schema.Literal("delayed"), Millis, Schema.Literal(0, 1)),
  Schema.Tuple(Schema.Literal("stale")),
  Schema.Tuple(Schema.Literal("moved")),
  /** A pool of another kind or limit holds the name (`held`, `asked`: their descriptions). */
  Schema.Tuple(Schema.Literal("conflict"), Schema.String, Schema.String),
  Expired
)
/** The session's time left, the version of its lease set, its groups and its leases (absent: still the known version). */
export const Renewed = Schema.Union(
  Schema.Tuple(Schema.Literal("live"), Millis, Schema.String, GroupList, Schema.optionalElement(LeaseList)),
  Expired
)
/** The home's time left and the number of the slot registration. */
export const Registered = Schema.Union(Schema.Tuple(Schema.Literal("ok"), Millis, Schema.Int), Expired)
/**
 * The home's time left, the number of its last slot registration, its registered slots (`tag, seq,
 * tag, seq, ...`; `0`: still those of the number the client knows) and its groups.
 */
const homeLive = [
  Schema.Literal("live"),
  Millis,
  Schema.String,
  Schema.Union(Schema.Array(Schema.String), Schema.Literal(0)),
  Schema.Array(Schema.String)
] as const
export const HomeRenewed = Schema.Union(Schema.Tuple(...homeLive), Expired)
/** `HomeRenewed`, then what `SlotsRenewed` answers for the slots and groups sent with it. */
export const HomeSlotsRenewed = Schema.Union(
  Schema.Tuple(...homeLive, Schema.Array(Schema.Int), GroupList, Schema.String),
  Expired
)
/**
 * The leases of the session in one slot (`0`: still the version the client knows), its groups there,
 * the registration to forget there (`""`: none) and the version of its lease set there (`""`: none).
 */
export const SlotRenewed = Schema.Tuple(Schema.Union(LeaseList, Schema.Literal(0)), GroupList, Schema.String, Schema.String)
/** Per slot of a `renewShadows` call: what `SlotRenewed` answers without the groups, or `moved`. */
export const ShadowsRenewed = Schema.Array(
  Schema.Union(Schema.Tuple(Schema.Union(LeaseList, Schema.Literal(0)), Schema.String, Schema.String), Schema.Literal("moved"))
)
/** The home's time left when it was deleted, its registered slot tags and its groups. */
export const HomeClosed = Schema.Tuple(Millis, Schema.Array(Schema.String), Schema.Array(Schema.String))
export const HomeJoined = Schema.Union(Schema.Tuple(Schema.Literal("ok"), Millis), Expired)
export const Joined = Schema.Literal("joined", "expired")
export const Members = Schema.Array(Schema.String)
export const Count = Schema.Int
/**
 * The count of the pulse a `renewSlots` call renewed, the (1-based) positions of the slots
 * it did not renew, and its groups' views.
 */
export const SlotsRenewed = Schema.Tuple(Schema.String, Schema.Array(Schema.Int), GroupList)
/** Whether the boot marker was created (1) and its value (server ms from which grants resume). */
export const Marked = Schema.Tuple(Schema.Literal(0, 1), Schema.String)

/** The SPI's answer to an acquire; `undefined` for `stale` and `moved` (register again). */
export const acquireReply = (reply: Schema.Schema.Type<typeof Acquired>): AcquireReply | undefined => {
  switch (reply[0]) {
    case "granted":
      return reply[3] === undefined
        ? AcquireReply.Granted({ token: reply[1] })
        : AcquireReply.Granted({ token: reply[1], reserved: reply[3] })
    case "held":
      return AcquireReply.HeldBy({
        token: reply[1] === "" ? undefined : reply[1],
        remaining: reply[2] >= 0 ? Duration.millis(reply[2]) : undefined
      })
    case "delayed":
      return AcquireReply.HeldBy({ token: undefined, remaining: Duration.millis(reply[1]) })
    case "expired":
      return AcquireReply.Expired()
    case "conflict":
      return AcquireReply.Conflict({ held: reply[1], asked: reply[2] })
    case "stale":
    case "moved":
      return undefined
  }
}

export const heldLeases = (leases: Schema.Schema.Type<typeof LeaseList>): Array<HeldLease> =>
  leases.map(([name, token]) => ({ name, token }))

export const groupViews = (groups: Schema.Schema.Type<typeof GroupList>): Array<GroupView> =>
  groups.map(([group, members]) => ({ group, members: [...members].sort() }))

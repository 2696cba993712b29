/**
 * Engine unit tests: lock caching (`keep`). A lock with `keep` asks for a block of tokens with its
 * grant; after its body the lease stays cached, and the next lock of the name starts at once with
 * the next token of the block. The cache ends (a release with the lease's token) when `keep` passes,
 * another session wants the lease, the block is used up, the lease was granted too long ago, or the
 * client closes; it is dropped without a release when the session or the lease is lost.
 */
import { describe, expect, it } from "vitest"
import type * as Engine from "../../src/Engine.js"
import { reservedTokens } from "../../src/engine/caching.js"
import { callsOf, close, expired, live, liveDriver, published, shows, start, stop } from "./harness.js"

const keep = 1_000
const block = (token: bigint, reserved: number): Engine.Response => ({ _tag: "Granted", token, reserved })
const wanted = (name: string, holder = "s1"): Engine.Event => ({ _tag: "Hint", hint: { _tag: "Wanted", name, holder } })
const elected = (commands: ReadonlyArray<Engine.Command>) => shows(commands).filter((c) => c.startsWith("Elected"))
const releases = (commands: ReadonlyArray<Engine.Command>) => shows(commands).filter((c) => c.startsWith("Call Release"))

/** A lock of `a` with `keep`, granted the block 91..100, whose first body has ended at 100. */
const cachedAfterOneBody = (keep = 1_000) => {
  const d = liveDriver()
  d.start(1, "a", { kind: "lock", keep })
  const acquire = d.call("Acquire", "a")
  expect(acquire.request).toMatchObject({ reserve: reservedTokens })
  expect(elected(d.acquireReply("a", block(100n, 10), 10))).toEqual(["Elected a#91"])
  const stopped = shows(d.send(stop(1, 60), 100))
  expect(stopped).toContain("Complete 60 Ok")
  expect(releases(d.send(stop(1, 60), 100))).toEqual([])
  expect(d.timer("cache:a").at).toBe(100 + keep)
  return d
}

describe("Engine: lock caching", () => {
  it("the next lock of the name starts at once with the next token of the block, without a call", () => {
    const d = cachedAfterOneBody()
    const commands = d.start(2, "a", { kind: "lock", keep })
    expect(elected(commands)).toEqual(["Elected a#92"])
    expect(callsOf(commands)).toEqual([])
    expect(shows(commands)).toContain("Disarm cache:a")
    // And again after it: every body its own term and token.
    d.send(stop(2, 61), 200)
    expect(elected(d.start(3, "a", { kind: "lock" }))).toEqual(["Elected a#93"])
  })

  it("keep passing releases the lease with its own token (the block's last)", () => {
    const d = cachedAfterOneBody()
    expect(releases(d.fire("cache:a"))).toEqual(["Call Release a#100@s1"])
    // The next lock asks the store again.
    d.start(2, "a", { kind: "lock", keep })
    expect(d.calls("Acquire", "a")).toHaveLength(1)
  })

  it("another session wanting the lease ends the cache at once", () => {
    const d = cachedAfterOneBody()
    expect(releases(d.send(wanted("a"), 150))).toEqual(["Call Release a#100@s1"])
    expect(d.armed.has("cache:a")).toBe(false)
    // A hint about another session's lease changes nothing here.
    const other = cachedAfterOneBody()
    expect(releases(other.send(wanted("a", "s9"), 150))).toEqual([])
  })

  it("wanted while a body runs: the lease is released when the body ends, never cached", () => {
    const d = cachedAfterOneBody()
    d.start(2, "a", { kind: "lock", keep })
    expect(releases(d.send(wanted("a"), 150))).toEqual([])
    expect(releases(d.send(stop(2, 61), 200))).toEqual(["Call Release a#100@s1"])
    expect(d.armed.has("cache:a")).toBe(false)
  })

  it("a used-up block is released after its last token's body", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock", keep })
    expect(elected(d.acquireReply("a", block(100n, 2), 10))).toEqual(["Elected a#99"])
    expect(releases(d.send(stop(1, 60), 100))).toEqual([])
    expect(elected(d.start(2, "a", { kind: "lock", keep }))).toEqual(["Elected a#100"])
    expect(releases(d.send(stop(2, 61), 200))).toEqual(["Call Release a#100@s1"])
  })

  it("a grant without a block (a store that keeps none) is released as without keep", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock", keep })
    expect(elected(d.acquireReply("a", { _tag: "Granted", token: 7n }, 10))).toEqual(["Elected a#7"])
    expect(releases(d.send(stop(1, 60), 100))).toEqual(["Call Release a#7@s1"])
  })

  it("a lock without keep neither asks for a block nor caches, and reads no block from the reply", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock" })
    expect(d.call("Acquire", "a").request).not.toHaveProperty("reserve")
    expect(elected(d.acquireReply("a", block(100n, 10), 10))).toEqual(["Elected a#100"])
    expect(releases(d.send(stop(1, 60), 100))).toEqual(["Call Release a#100@s1"])
  })

  it("a lease granted longer ago than max(keep, renew interval) is not cached again", () => {
    // Granted at 10; the renew interval (5 s) is above keep: cached again until 5,010.
    const d = cachedAfterOneBody(4_000)
    d.send(start(2, "a", { kind: "lock", keep: 4_000 }), 4_000)
    expect(releases(d.send(stop(2, 61), 4_050))).toEqual([])
    d.send(start(3, "a", { kind: "lock", keep: 4_000 }), 5_000)
    expect(releases(d.send(stop(3, 62), 5_020))).toEqual(["Call Release a#100@s1"])
  })

  it("a lock queued in this client behind a caching one takes the lease over without a call", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock", keep })
    d.acquireReply("a", block(100n, 10), 10)
    d.start(2, "a", { kind: "lock" })
    const commands = d.send(stop(1, 60), 100)
    expect(elected(commands)).toEqual(["Elected a#92"])
    expect(callsOf(commands)).toEqual([])
    // Without keep of its own, the second lock releases after its body.
    expect(releases(d.send(stop(2, 61), 200))).toEqual(["Call Release a#100@s1"])
  })

  it("a renewal listing the cached lease keeps it; one that lost it drops it without a release", () => {
    const d = cachedAfterOneBody(12_000)
    expect(releases(d.renewListing([["a", 100n]], 5_010))).toEqual([])
    expect(d.armed.has("cache:a")).toBe(true)
    const lost = d.renewListing([], 10_020)
    expect(published(lost)).toContain("Publish TokenRegressed a seen=100 token=absent")
    expect(releases(lost)).toEqual([])
    expect(d.armed.has("cache:a")).toBe(false)
    d.start(2, "a", { kind: "lock", keep })
    expect(d.calls("Acquire", "a")).toHaveLength(1)
  })

  it("the session's end drops the cache: never used after the session might have expired", () => {
    const d = cachedAfterOneBody()
    d.fire("renew")
    const commands = d.reply("KeepAlive", expired, 5_020)
    expect(releases(commands)).toEqual([])
    expect(d.armed.has("cache:a")).toBe(false)
    d.open("s2", 15_000, 5_030)
    d.start(2, "a", { kind: "lock", keep })
    expect(d.calls("Acquire", "a").map((c) => c.request)).toEqual([
      { _tag: "Acquire", sessionId: "s2", name: "a", reserve: reservedTokens }
    ])
  })

  it("close releases the cached lease before closing the session", () => {
    const d = cachedAfterOneBody()
    const commands = shows(d.send(close(70), 200))
    expect(commands).toContain("Call Release a#100@s1")
    expect(commands).toContain("Call CloseSession s1")
  })

  it("a late reply of an abandoned acquire naming the cached lease does not release it", () => {
    const d = liveDriver()
    d.start(1, "a", { kind: "lock", keep })
    const first = d.call("Acquire", "a")
    // The attempt times out: the retry is granted, its body ends, the lease is cached.
    d.reply(first, { _tag: "Failed", error: "timeout" }, 5)
    d.fire(`retry:1`)
    d.acquireReply("a", block(100n, 10), d.now + 10)
    d.send(stop(1, 60), d.now + 10)
    const late: Engine.Event = {
      _tag: "Reply",
      requestId: first.requestId,
      sentAt: first.sentAt,
      request: first.request,
      response: block(100n, 10)
    }
    expect(releases(d.send(late, d.now + 10))).toEqual([])
    expect(d.armed.has("cache:a")).toBe(true)
  })

  it("the renewal's unchanged reply still checks a cached lease adopted before it", () => {
    const d = cachedAfterOneBody()
    d.fire("renew")
    const commands = d.reply("KeepAlive", { ...live(15_000, [["a", 100n]]), version: "v1" } as Engine.Response, 5_020)
    expect(releases(commands)).toEqual([])
    expect(d.armed.has("cache:a")).toBe(true)
  })
})

// The control case of the driver check: a program that does try to load a driver, so the test can
// see that the recorder notices (whether or not the driver is installed).
await import("ioredis").catch(() => undefined)
console.log("tried ioredis")

// What Node's event loop asks of a kernel: epoll, eventfd wake-ups from
// libuv's thread pool (file reads, hashing, compression), timers and the
// microtask queue. It prints the same lines wherever it runs.
const fs = require("fs");
const crypto = require("crypto");
const zlib = require("zlib");

const order = [];
process.nextTick(() => order.push("tick"));
Promise.resolve().then(() => order.push("promise"));
// The timer is armed from the check phase: armed at start, it could fire
// first whenever the loop starts more than its delay late.
setImmediate(() => {
  order.push("immediate");
  setTimeout(() => {
    order.push("timer");
    console.log("order", order.join(" "));
  }, 30);
});

fs.readFile("/etc/passwd", (err, data) => {
  console.log("readFile", err === null && data.length > 0);
});
fs.promises.readdir("/etc").then((names) => console.log("readdir", names.includes("passwd")));
crypto.pbkdf2("secret", "salt", 1000, 16, "sha256", (err, key) => {
  console.log("pbkdf2", key.toString("hex"));
});
zlib.gzip("hello ".repeat(1000), (err, gz) => {
  zlib.gunzip(gz, (err2, back) => console.log("gzip", gz.length < 200, back.length));
});

// What Node asks of a kernel's sockets: child_process (libuv talks to
// children over socket pairs: piped stdio and the fork IPC channel), an
// http server and client on loopback, and net IPC over a unix socket path.
// It prints the same lines wherever it runs.
const child_process = require("child_process");
const fs = require("fs");
const http = require("http");
const net = require("net");
const os = require("os");
const path = require("path");
const util = require("util");

const exec = util.promisify(child_process.exec);

// Everything a spawned child writes, and how it ended.
function run(child, input) {
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ out, err, code, signal }));
    if (input !== undefined) child.stdin.end(input);
  });
}

async function childProcesses() {
  const { stdout, stderr } = await exec("echo to stdout; echo to stderr >&2");
  console.log("exec", JSON.stringify(stdout), JSON.stringify(stderr));
  try {
    await exec("exit 3");
  } catch (e) {
    console.log("exec failed with", e.code);
  }
  const big = "0123456789abcdef".repeat(65536);
  const cat = await run(child_process.spawn("cat", [], { stdio: "pipe" }), big);
  console.log("spawn cat", cat.out.length, cat.out === big, cat.code);
  const tr = await run(child_process.spawn("tr", ["a-z", "A-Z"]), "piped through tr\n");
  console.log("spawn tr", JSON.stringify(tr.out), tr.code);
  const sh = await run(child_process.spawn("sh", ["-c", "read line; echo \"got $line\"; echo oops >&2; kill -TERM $$"]), "a line\n");
  console.log("spawn sh", JSON.stringify(sh.out), JSON.stringify(sh.err), sh.code, sh.signal);
  const sync = child_process.spawnSync("sh", ["-c", "cat; echo done"], { input: "sync input\n", encoding: "utf8" });
  console.log("spawnSync", JSON.stringify(sync.stdout), sync.status);
}

async function forkIpc() {
  const child = child_process.fork(__filename, ["child"]);
  const replies = [];
  await new Promise((resolve) => {
    child.on("message", (m) => {
      replies.push(m);
      if (replies.length === 3) child.disconnect();
    });
    child.on("exit", resolve);
    for (let i = 0; i < 3; i++) child.send({ n: i });
  });
  console.log("fork ipc", JSON.stringify(replies), child.exitCode);
}

function listening(server, ...args) {
  return new Promise((resolve) => server.listen(...args, () => resolve(server.address())));
}

// A fresh connection per request unless `agent` says otherwise.
function get(port, urlPath, agent = false) {
  return new Promise((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path: urlPath, agent }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      })
      .on("error", reject);
  });
}

function post(port, urlPath, data) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path: urlPath, method: "POST" }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("error", reject);
    req.end(data);
  });
}

async function httpServer() {
  const server = http.createServer((req, res) => {
    let length = 0;
    req.on("data", (d) => (length += d.length));
    req.on("end", () => {
      if (req.url === "/missing") {
        res.writeHead(404).end("no such page");
        return;
      }
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ method: req.method, url: req.url, length }));
    });
  });
  const { address, port } = await listening(server, 0, "127.0.0.1");
  console.log("http listening on", address, port > 0);
  console.log("GET", JSON.stringify(await get(port, "/hello")));
  console.log("GET", JSON.stringify(await get(port, "/missing")));
  console.log("POST", JSON.stringify(await post(port, "/upload", "x".repeat(300000))));
  const many = await Promise.all([...Array(8).keys()].map((i) => get(port, `/parallel/${i}`)));
  console.log("parallel", many.map((r) => JSON.parse(r.body).url).join(" "));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 3; i++) console.log("keep-alive", (await get(port, `/kept/${i}`, agent)).body);
  agent.destroy();
  await new Promise((resolve) => server.close(resolve));
  try {
    await get(port, "/after-close");
  } catch (e) {
    console.log("after close", e.code);
  }
}

async function unixIpc() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "net-check-"));
  const sock = path.join(dir, "ipc.sock");
  const server = net.createServer((conn) => {
    let data = "";
    conn.setEncoding("utf8");
    conn.on("data", (d) => (data += d));
    conn.on("end", () => conn.end(data.split("").reverse().join("")));
  });
  const bound = await listening(server, sock);
  console.log("unix listening", bound === sock, fs.statSync(sock).isSocket());
  for (const msg of ["first message", "second message"]) {
    const reply = await new Promise((resolve, reject) => {
      let got = "";
      const c = net.connect(sock, () => c.end(msg));
      c.setEncoding("utf8");
      c.on("data", (d) => (got += d));
      c.on("end", () => resolve(got));
      c.on("error", reject);
    });
    console.log("unix reply", JSON.stringify(reply));
  }
  await new Promise((resolve) => server.close(resolve));
  console.log("socket removed on close", !fs.existsSync(sock));
  try {
    await new Promise((resolve, reject) => net.connect(sock, resolve).on("error", reject));
  } catch (e) {
    console.log("connect after close", e.code);
  }
  fs.rmdirSync(dir);
}

async function main() {
  await childProcesses();
  await forkIpc();
  await httpServer();
  await unixIpc();
}

if (process.argv[2] === "child") {
  process.on("message", (m) => process.send({ doubled: m.n * 2, in_child: process.pid !== process.ppid }));
} else {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

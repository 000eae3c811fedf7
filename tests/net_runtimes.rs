//! Real runtimes over sockets, natively and in the sandbox with the same
//! output: Python's socketpair, asyncio, http.server with urllib,
//! multiprocessing's Manager and socketserver's forking servers; Node's
//! child_process (libuv talks to children over socket pairs), http and net
//! IPC over a unix socket path (tests/js/net_check.js); Go's net/http on
//! loopback and os/exec with pipes (tests/go/net_check.go); and glibc's user
//! lookups, which probe nscd over a unix socket, in `id` and `ps`. Servers
//! bind port 0 and the programs print facts about the port, never its
//! number. Node and Go are skipped, saying so, where not installed.

mod common;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use common::{assert_same_shell_status, finish_within, native, scratch_dir, spawn_cordon};

/// Always /usr/bin/python3: the `python3` on PATH may be a shell shim.
const PYTHON: &str = "/usr/bin/python3";

/// Far more than any of these programs takes in the sandbox: a lost
/// wake-up in a socket shows as a hang, which must fail the test.
const HANG: Duration = Duration::from_secs(240);

/// `cordon run -- program args`, killed (and the test failed) if it hangs.
fn in_sandbox(program: &str, args: &[&str]) -> Output {
    finish_within(spawn_cordon(&[&[program], args].concat()), HANG, program)
}

/// Runs `program args` natively, where it must succeed, and in the sandbox,
/// where it must print the same and end the same way.
fn same(what: &str, program: &str, args: &[&str]) {
    let n = native(program, args, None);
    assert!(
        n.status.success(),
        "{what} fails natively, so the test itself is wrong:\n{}{}",
        String::from_utf8_lossy(&n.stdout),
        String::from_utf8_lossy(&n.stderr)
    );
    assert_same_shell_status(what, &in_sandbox(program, args), &n);
}

/// `python3 -c script` both ways.
fn same_python(what: &str, script: &str) {
    same(what, PYTHON, &["-c", script]);
}

/// `name` on PATH, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| PathBuf::from(d).join(name)).find(|p| p.is_file())
}

#[test]
fn python_socketpair() {
    require_kvm!();
    same_python(
        "socket.socketpair",
        r#"
import array, os, socket
a, b = socket.socketpair()
print(a.family == socket.AF_UNIX, a.type == socket.SOCK_STREAM, a.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))
a.sendall(b"hello")
print(b.recv(100))
pid = os.fork()
if pid == 0:
    a.close()
    data = b""
    while chunk := b.recv(65536):
        data += chunk
    b.sendall(b"child got %d bytes" % len(data))
    b.close()
    os._exit(0)
b.close()
a.sendall(b"x" * 1000000)
a.shutdown(socket.SHUT_WR)
print(a.recv(100))
print(a.recv(100))
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
a.close()
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.send(b"one")
a.send(b"two!")
print(b.recv(2), b.recv(100))
b.settimeout(0.05)
try:
    b.recv(10)
except TimeoutError:
    print("timed out on an empty socket")
b.setblocking(False)
try:
    b.recv(10)
except BlockingIOError:
    print("would block")
a.close(); b.close()
a, b = socket.socketpair()
r, w = os.pipe()
os.write(w, b"through a passed pipe")
os.close(w)
socket.send_fds(a, [b"fds"], [r])
msg, fds, flags, addr = socket.recv_fds(b, 100, 4)
os.close(r)
print(msg, len(fds), os.read(fds[0], 100))
print(repr(b.getpeername()), repr(a.getsockname()))
pid_, uid, gid = array.array("i", b.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
print(pid_ == os.getpid(), uid == os.getuid(), gid == os.getgid())
"#,
    );
}

#[test]
fn python_asyncio_echo_over_tcp_unix_and_udp() {
    require_kvm!();
    same_python(
        "asyncio",
        r#"
import asyncio, os, tempfile

async def echo_upper(reader, writer):
    while line := await reader.readline():
        writer.write(line.upper())
        await writer.drain()
    writer.close()
    await writer.wait_closed()

async def client(open_conn, n):
    reader, writer = await open_conn()
    got = []
    for i in range(3):
        writer.write(b"client %d line %d\n" % (n, i))
        await writer.drain()
        got.append((await reader.readline()).decode().strip())
    writer.write_eof()
    rest = await reader.read()
    writer.close()
    await writer.wait_closed()
    return got, rest

async def run(kind, server, open_conn):
    async with server:
        results = await asyncio.gather(*(client(open_conn, n) for n in range(4)))
        for got, rest in results:
            print(kind, got, rest)

async def main():
    server = await asyncio.start_server(echo_upper, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()
    print("tcp listening on", host, 1024 <= port < 65536)
    await run("tcp", server, lambda: asyncio.open_connection("127.0.0.1", port))

    server = await asyncio.start_server(echo_upper, "::1", 0)
    port = server.sockets[0].getsockname()[1]
    await run("tcp6", server, lambda: asyncio.open_connection("::1", port))

    path = os.path.join(tempfile.mkdtemp(), "echo.sock")
    server = await asyncio.start_unix_server(echo_upper, path)
    print("unix listening on", server.sockets[0].getsockname() == path, os.path.exists(path))
    await run("unix", server, lambda: asyncio.open_unix_connection(path))
    os.unlink(path)
    os.rmdir(os.path.dirname(path))

    loop = asyncio.get_running_loop()
    got = loop.create_future()
    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport
        def datagram_received(self, data, addr):
            self.transport.sendto(data[::-1], addr)
    class Client(asyncio.DatagramProtocol):
        def datagram_received(self, data, addr):
            got.set_result(data)
    st, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
    ct, _ = await loop.create_datagram_endpoint(Client, remote_addr=st.get_extra_info("sockname"))
    ct.sendto(b"datagram")
    print("udp", await got)
    ct.close(); st.close()

asyncio.run(main())
"#,
    );
}

#[test]
fn python_http_server_and_urllib() {
    require_kvm!();
    same_python(
        "http.server",
        r#"
import http.client, http.server, json, threading, urllib.error, urllib.request

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/missing":
            self.send_error(404)
            return
        self.reply(200, json.dumps({"method": "GET", "path": self.path}).encode())

    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(200, json.dumps({"method": "POST", "length": len(data), "sum": sum(data)}).encode())

    def log_message(self, format, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
port = server.server_address[1]
thread = threading.Thread(target=server.serve_forever)
thread.start()
# No proxy from the environment: the requests go to the server above.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
base = f"http://127.0.0.1:{port}"
with opener.open(base + "/hello?x=1") as r:
    print(r.status, r.headers["Content-Type"], json.loads(r.read()))
body = bytes(range(256)) * 1000
with opener.open(urllib.request.Request(base + "/upload", data=body)) as r:
    print(r.status, json.loads(r.read()))
try:
    opener.open(base + "/missing")
except urllib.error.HTTPError as e:
    print("HTTPError", e.code)
conn = http.client.HTTPConnection("127.0.0.1", port)
for i in range(3):
    conn.request("GET", f"/keepalive/{i}")
    r = conn.getresponse()
    print(r.status, r.read())
conn.close()
results = [None] * 8
def fetch(i):
    with opener.open(f"{base}/thread/{i}") as r:
        results[i] = json.loads(r.read())["path"]
threads = [threading.Thread(target=fetch, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(results)
server.shutdown()
server.server_close()
thread.join()
try:
    opener.open(base + "/after-close", timeout=10)
except urllib.error.URLError as e:
    print("URLError", type(e.reason).__name__)
"#,
    );
}

#[test]
fn python_multiprocessing_manager() {
    require_kvm!();
    same_python(
        "multiprocessing.Manager",
        r#"
import multiprocessing as mp
from multiprocessing.connection import Client, Listener

def work(shared, lock, i):
    with lock:
        shared["count"] += i
    shared[f"worker {i}"] = i * i

def square(x):
    return x * x

if __name__ == "__main__":
    mp.set_start_method("fork")
    with mp.Manager() as manager:
        print("manager address is a unix socket:", isinstance(manager.address, str) and manager.address.startswith("/"))
        shared = manager.dict(count=0)
        lock = manager.Lock()
        items = manager.list()
        procs = [mp.Process(target=work, args=(shared, lock, i)) for i in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        items.extend(sorted(shared.keys()))
        print(sorted(shared.items()), list(items), [p.exitcode for p in procs])
        ns = manager.Namespace()
        ns.x = 41
        q = manager.Queue()
        p = mp.Process(target=lambda: q.put(ns.x + 1))
        p.start()
        print("queue", q.get())
        p.join()
    with mp.Pool(2) as pool:
        print("pool", pool.map(square, range(10)))
    for family, address in (("AF_UNIX", None), ("AF_INET", ("127.0.0.1", 0))):
        with Listener(address, family=family, authkey=b"secret") as listener:
            def serve():
                with listener.accept() as conn:
                    conn.send(["echo", conn.recv()])
            p = mp.Process(target=serve)
            p.start()
            with Client(listener.address, family=family, authkey=b"secret") as conn:
                conn.send({"family": family})
                print("connection", conn.recv())
            p.join()
"#,
    );
}

#[test]
fn python_socketserver_forking() {
    require_kvm!();
    same_python(
        "socketserver",
        r#"
import os, socket, socketserver, threading

PARENT = os.getpid()

class Upper(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(b"%s (in a child: %s)\n" % (line.strip().upper(), str(os.getpid() != PARENT).encode()))

class Reverse(socketserver.DatagramRequestHandler):
    def handle(self):
        self.wfile.write(self.rfile.read()[::-1] + (b" forked" if os.getpid() != PARENT else b""))

def serving(server):
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    return thread

tcp = socketserver.ForkingTCPServer(("127.0.0.1", 0), Upper)
t = serving(tcp)
clients = [socket.create_connection(tcp.server_address) for _ in range(3)]
for i, c in enumerate(clients):
    c.sendall(b"hello %d\nsecond line %d\n" % (i, i))
for c in clients:
    c.shutdown(socket.SHUT_WR)
for c in clients:
    f = c.makefile("rb")
    print(f.read().decode(), end="")
    f.close()
    c.close()
tcp.shutdown()
tcp.server_close()
t.join()
print("children left:", tcp.active_children)

udp = socketserver.ForkingUDPServer(("127.0.0.1", 0), Reverse)
t = serving(udp)
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    for word in (b"abc", b"datagram"):
        s.sendto(word, udp.server_address)
        data, addr = s.recvfrom(100)
        print(data, addr == udp.server_address)
udp.shutdown()
udp.server_close()
t.join()
"#,
    );
}

/// `id` and `ps` look users and groups up through glibc, which first asks
/// nscd over a unix socket: with no nscd they must answer from the files,
/// as natively, and say nothing on stderr.
#[test]
fn user_lookups_in_id_and_ps_are_quiet() {
    require_kvm!();
    let runs: [(&str, &[&str]); 4] = [
        ("id", &[]),
        ("id", &["-un"]),
        ("getent", &["passwd", "root"]),
        // exec, so that $$ is ps itself, the one process both ways have.
        ("/bin/sh", &["-c", "exec ps -o user=,group=,comm= -p $$"]),
    ];
    for (program, args) in runs {
        let what = format!("{program} {}", args.join(" "));
        let n = native(program, args, None);
        assert!(n.status.success() && n.stderr.is_empty(), "{what} natively: {n:?}");
        let s = in_sandbox(program, args);
        assert_same_shell_status(&what, &s, &n);
        assert!(s.stderr.is_empty(), "{what} wrote to stderr in the sandbox:\n{}", String::from_utf8_lossy(&s.stderr));
    }
}

#[test]
fn node_child_process_http_and_unix_ipc() {
    require_kvm!();
    let Some(node) = on_path("node") else {
        eprintln!("skipping: no node on PATH");
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js/net_check.js");
    same("net_check.js", node.to_str().expect("utf-8 path"), &[script]);
}

#[test]
fn go_net_http_and_exec_with_pipes() {
    require_kvm!();
    let Some(go) = on_path("go") else {
        eprintln!("skipping: no Go toolchain on PATH");
        return;
    };
    let dir = scratch_dir("go-net");
    let prog = dir.join("net_check");
    let mut build = std::process::Command::new(go);
    build.env("CGO_ENABLED", "0").env("GOTOOLCHAIN", "local");
    // Go keeps its build cache under $HOME; give it one where there is none.
    if ["GOCACHE", "XDG_CACHE_HOME", "HOME"].iter().all(|v| std::env::var_os(v).is_none()) {
        build.env("GOCACHE", dir.join("cache")).env("GOPATH", dir.join("gopath"));
    }
    let built = build
        .args(["build", "-o"])
        .arg(&prog)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/go/net_check.go"))
        .output()
        .expect("run go build");
    assert!(built.status.success(), "go build: {}", String::from_utf8_lossy(&built.stderr));
    same("net_check", prog.to_str().expect("utf-8 path"), &[]);
}

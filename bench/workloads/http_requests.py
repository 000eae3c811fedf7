"""http_requests: requests per second of a small HTTP server and client.

    python3 http_requests.py http_requests SECONDS

The server is Python's http.server (one process, forked, serving one request
per connection as HTTP/1.0 does) on 127.0.0.1, port 0; the client is
urllib.request in the parent, a new connection per request as urllib makes
them. One operation is one request: connect, GET, the whole response read
and checked, close. The loop is sized by time as bench/c/bench.h sizes the
microbenchmarks', and the result is the same BENCH line, with requests per
second as the extra figure. Standard library only.
"""

import http.server
import os
import sys
import time
import urllib.request

BODY = b"".join(b"line %d of the response body\n" % i for i in range(32))


class Handler(http.server.BaseHTTPRequestHandler):
    stop = False

    def do_GET(self):
        if self.path == "/stop":
            Handler.stop = True
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format, *args):
        pass


def fail(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "http_requests":
        fail("usage: http_requests.py http_requests SECONDS")
    target = float(sys.argv[2])
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            while not Handler.stop:
                server.handle_request()
        finally:
            os._exit(0)
    server.socket.close()

    # No proxy from the environment: the requests go to the server above.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    url = f"http://127.0.0.1:{port}/"

    def run(n):
        for _ in range(n):
            with opener.open(url, timeout=60) as r:
                if r.status != 200 or r.read() != BODY:
                    fail("wrong response from the server")

    n = 1
    while True:
        t0 = time.monotonic_ns()
        run(n)
        dt = time.monotonic_ns() - t0
        if dt >= target * 1e9:
            break
        if dt >= target * 1e9 / 8:
            n = max(1, int(n * target * 1e9 / max(dt, 1)))
            t0 = time.monotonic_ns()
            run(n)
            dt = time.monotonic_ns() - t0
            break
        n *= 2

    opener.open(url + "stop", timeout=60).read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        fail(f"server ended with status 0x{status:x}")
    print(f"BENCH case=http_requests ops={n} ns={dt} ns_per_op={dt / n:.4f} unit=req/s value={n / (dt / 1e9):.4f}")
    sys.stdout.flush()


main()

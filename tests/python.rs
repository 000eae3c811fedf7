//! Python's process machinery, natively and in the sandbox: subprocess,
//! os.fork and waitpid, threading with locks and conditions, signals, and
//! multiprocessing with the fork start method. Always /usr/bin/python3
//! (the `python3` on PATH may be a shell shim).

mod common;

use common::{assert_same_shell_status, native, sandbox};

const PYTHON: &str = "/usr/bin/python3";

/// Runs `script` with `python3 -c` both ways and compares.
fn same(what: &str, script: &str) {
    let n = native(PYTHON, &["-c", script], None);
    assert!(
        n.status.success(),
        "{what} fails natively, so the test itself is wrong:\n{}",
        String::from_utf8_lossy(&n.stderr)
    );
    let s = sandbox(&[], PYTHON, &["-c", script], None);
    assert_same_shell_status(what, &s, &n);
}

#[test]
fn subprocess_run() {
    require_kvm!();
    same(
        "subprocess",
        r#"
import subprocess, sys
r = subprocess.run(["echo", "hello", "world"], capture_output=True, text=True)
print(repr(r.stdout), r.returncode)
r = subprocess.run(["sh", "-c", "echo to-err >&2; exit 3"], capture_output=True, text=True)
print(r.returncode, repr(r.stderr))
r = subprocess.run(["tr", "a-z", "A-Z"], input="piped through\n", capture_output=True, text=True)
print(r.stdout, end="")
try:
    subprocess.run(["false"], check=True)
except subprocess.CalledProcessError as e:
    print("CalledProcessError", e.returncode)
try:
    subprocess.run(["sleep", "5"], timeout=0.3)
except subprocess.TimeoutExpired:
    print("TimeoutExpired")
p = subprocess.Popen(["sh", "-c", "kill -TERM $$"])
print("killed by", -p.wait())
p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out, _ = p.communicate(b"x" * 200000)
print(len(out), p.returncode)
print(subprocess.check_output("seq 1 5 | paste -sd+ | bc", shell=True, text=True), end="")
print(subprocess.run([sys.executable, "-c", "import sys; sys.exit(7)"]).returncode)
"#,
    );
}

#[test]
fn fork_and_waitpid() {
    require_kvm!();
    same(
        "os.fork",
        r#"
import os, signal
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.write(w, b"from child")
    os._exit(9)
os.close(w)
print(os.read(r, 100))
p, st = os.waitpid(pid, 0)
print(p == pid, os.WIFEXITED(st), os.WEXITSTATUS(st))
pid = os.fork()
if pid == 0:
    os.kill(os.getpid(), signal.SIGKILL)
p, st = os.waitpid(pid, 0)
print(os.WIFSIGNALED(st), os.WTERMSIG(st))
kids = []
for i in range(5):
    pid = os.fork()
    if pid == 0:
        os._exit(i + 10)
    kids.append(pid)
codes = sorted(os.WEXITSTATUS(os.wait()[1]) for _ in kids)
print(codes)
try:
    os.wait()
except ChildProcessError:
    print("no more children")
pid = os.fork()
if pid == 0:
    import time
    time.sleep(5)
    os._exit(0)
print(os.waitpid(pid, os.WNOHANG))
os.kill(pid, signal.SIGSTOP)
p, st = os.waitpid(pid, os.WUNTRACED)
print(os.WIFSTOPPED(st), os.WSTOPSIG(st))
os.kill(pid, signal.SIGCONT)
p, st = os.waitpid(pid, os.WCONTINUED)
print(os.WIFCONTINUED(st))
os.kill(pid, signal.SIGTERM)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"#,
    );
}

#[test]
fn threading_with_locks_and_conditions() {
    require_kvm!();
    same(
        "threading",
        r#"
import threading, queue
counter = 0
lock = threading.Lock()
def add():
    global counter
    for _ in range(20000):
        with lock:
            counter += 1
ts = [threading.Thread(target=add) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("counter", counter)

cond = threading.Condition()
items = []
done = []
def consumer(i):
    got = 0
    while True:
        with cond:
            while not items:
                cond.wait()
            v = items.pop(0)
        if v is None:
            break
        got += v
    done.append(got)
cs = [threading.Thread(target=consumer, args=(i,)) for i in range(4)]
for c in cs: c.start()
for v in list(range(1, 1001)) + [None] * 4:
    with cond:
        items.append(v)
        cond.notify()
for c in cs: c.join()
print("sum", sum(done), "consumers", len(done))

b = threading.Barrier(8)
order = []
def phase(i):
    order.append(("a", i))
    b.wait()
    order.append(("b", i))
ts = [threading.Thread(target=phase, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("barrier ok", all(x[0] == "a" for x in order[:8]) and all(x[0] == "b" for x in order[8:]))

q = queue.Queue()
def producer(k):
    for j in range(100):
        q.put(k * 1000 + j)
ps = [threading.Thread(target=producer, args=(k,)) for k in range(8)]
for p in ps: p.start()
for p in ps: p.join()
print("queue", q.qsize(), sum(q.get() for _ in range(800)))
ev = threading.Event()
threading.Timer(0.1, ev.set).start()
print("event", ev.wait(5))
sem = threading.Semaphore(2)
active = []
peak = [0]
def limited():
    with sem:
        active.append(1)
        peak[0] = max(peak[0], len(active))
        threading.Event().wait(0.02)
        active.pop()
ts = [threading.Thread(target=limited) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("semaphore peak <= 2", peak[0] <= 2)
print("threads left", threading.active_count())
"#,
    );
}

#[test]
fn signals() {
    require_kvm!();
    same(
        "signal",
        r#"
import os, signal, time, threading
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
os.kill(os.getpid(), signal.SIGUSR1)
print("handled", got)
signal.signal(signal.SIGALRM, lambda s, f: got.append("alarm"))
signal.alarm(1)
time.sleep(3)
print("after alarm", got)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
n = 0
while got.count("alarm") < 5 and n < 1000:
    time.sleep(0.01); n += 1
signal.setitimer(signal.ITIMER_REAL, 0)
print("itimer ticks >= 5", got.count("alarm") >= 5)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
os.kill(os.getpid(), signal.SIGUSR2)
print("pending", signal.SIGUSR2 in signal.sigpending())
info = signal.sigtimedwait({signal.SIGUSR2}, 1)
print("waited", info.si_signo == signal.SIGUSR2, info.si_pid == os.getpid())
print("timeout", signal.sigtimedwait({signal.SIGUSR2}, 0.05))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})
def raise_later():
    time.sleep(0.1)
    os.kill(os.getpid(), signal.SIGUSR1)
threading.Thread(target=raise_later).start()
signal.pause()
print("pause returned", got[-1] == signal.SIGUSR1)
signal.signal(signal.SIGINT, signal.default_int_handler)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)
except KeyboardInterrupt:
    print("KeyboardInterrupt")
r, w = os.pipe()
signal.signal(signal.SIGUSR1, lambda s, f: None)
signal.siginterrupt(signal.SIGUSR1, False)
threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
threading.Timer(0.3, lambda: os.write(w, b"late")).start()
print("read across a signal", os.read(r, 10))
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    time.sleep(10)
    os._exit(0)
time.sleep(0.1)
os.kill(pid, signal.SIGTERM)
print("child", os.waitpid(pid, 0)[1] & 0x7f == signal.SIGTERM)
"#,
    );
}

#[test]
fn multiprocessing_fork_two_workers_through_pipes() {
    require_kvm!();
    same(
        "multiprocessing",
        r#"
import multiprocessing as mp, os
def die():
    os.kill(os.getpid(), 9)
def work(n, conn):
    conn.send((os.getpid() != parent, [i * i for i in range(n)]))
    conn.send(sum(range(n)))
    conn.close()
if __name__ == "__main__":
    parent = os.getpid()
    ctx = mp.get_context("fork")
    workers = []
    for n in (10, 20):
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=work, args=(n, w))
        p.start()
        w.close()
        workers.append((p, r))
    for p, r in workers:
        print(r.recv())
        print(r.recv())
        p.join()
        print("exitcode", p.exitcode)
    p = ctx.Process(target=os._exit, args=(3,))
    p.start(); p.join()
    print("exitcode", p.exitcode)
    p = ctx.Process(target=die)
    p.start(); p.join()
    print("exitcode", p.exitcode)
"#,
    );
}

/// multiprocessing.Pool: its locks are POSIX semaphores (sem_open), which
/// live in the sandbox's writable /dev/shm.
#[test]
fn multiprocessing_pool() {
    require_kvm!();
    same(
        "Pool",
        r#"
import multiprocessing as mp
if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        print(pool.map(abs, range(-10, 10)))
"#,
    );
}

/// Machine code built at run time with ctypes: calls through a system call
/// site in a writable and executable buffer, then in a buffer made
/// executable and later writable again (as JITs do), answer and keep the
/// bytes the program wrote, however often the sandbox saw them trap.
#[test]
fn ctypes_built_code() {
    require_kvm!();
    same(
        "ctypes code",
        r#"
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
RW, RX, RWX = mmap.PROT_READ | mmap.PROT_WRITE, mmap.PROT_READ | mmap.PROT_EXEC, 7
def code(nr):
    return bytes([0xb8, nr, 0, 0, 0, 0x0f, 0x05, 0xc3])
for prot in (RWX, RW):
    addr = libc.mmap(None, 4096, prot, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    ctypes.memmove(addr, code(39), 8)
    if prot == RW:
        assert libc.mprotect(addr, 4096, RX) == 0
    fn = ctypes.CFUNCTYPE(ctypes.c_long)(addr)
    assert all(fn() == os.getpid() for _ in range(20))
    if prot == RW:
        assert libc.mprotect(addr, 4096, RW) == 0
    print(prot, ctypes.string_at(addr, 8).hex())
    ctypes.memmove(addr, code(110), 8)
    if prot == RW:
        assert libc.mprotect(addr, 4096, RX) == 0
    assert all(fn() == os.getppid() for _ in range(20))
    if prot == RW:
        assert libc.mprotect(addr, 4096, RW) == 0
    print(prot, ctypes.string_at(addr, 8).hex())
"#,
    );
}

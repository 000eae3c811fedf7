"""Python's file and process machinery under WORK (argv[1], also TMPDIR):
tempfile, shutil.copytree/rmtree/move, multiprocessing.Pool, named POSIX
semaphores (sem_open, in /dev/shm), and os.replace of whole files by
several processes at once while others read the target."""

import filecmp
import multiprocessing
import multiprocessing.synchronize
import os
import shutil
import sys
import tempfile

import _multiprocessing

WORK = sys.argv[1]
os.makedirs(WORK, exist_ok=True)
os.chdir(WORK)


def step(name):
    print(f"== {name}", flush=True)


step("tempfile")
print("gettempdir is WORK:", tempfile.gettempdir() == WORK)
d = tempfile.mkdtemp(prefix="made-")
print("mkdtemp under WORK:", os.path.dirname(d) == WORK, "mode", oct(os.stat(d).st_mode & 0o777))
with tempfile.NamedTemporaryFile(dir=d, delete=True) as f:
    f.write(b"x" * 10000)
    f.flush()
    print("named temporary file size", os.path.getsize(f.name))
    name = f.name
print("removed on close:", not os.path.exists(name))
os.rmdir(d)
with tempfile.TemporaryFile() as f:
    f.write(b"anonymous")
    f.seek(0)
    print("TemporaryFile reads back", f.read())
with tempfile.TemporaryDirectory() as td:
    for i in range(20):
        with open(os.path.join(td, f"f{i}"), "w") as f:
            f.write(str(i) * i)
    os.mkdir(os.path.join(td, "sub"))
    print("TemporaryDirectory entries", len(os.listdir(td)))
print("TemporaryDirectory removed:", not os.path.exists(td))
fd, path = tempfile.mkstemp(suffix=".dat")
os.write(fd, b"mkstemp")
os.close(fd)
print("mkstemp mode", oct(os.stat(path).st_mode & 0o777))
os.unlink(path)

step("shutil")
src = os.path.join(WORK, "tree")
for sub in ("a/b/c", "a/d", "e"):
    os.makedirs(os.path.join(src, sub))
for i, rel in enumerate(["a/one.txt", "a/b/two.txt", "a/b/c/three.bin", "e/four.txt", "top.txt"]):
    with open(os.path.join(src, rel), "wb") as f:
        f.write(bytes(range(256)) * (i * 100 + 1))
os.symlink("a/one.txt", os.path.join(src, "link-to-one"))
os.chmod(os.path.join(src, "e/four.txt"), 0o640)
os.utime(os.path.join(src, "top.txt"), ns=(1_600_000_000_123_456_789, 1_600_000_000_987_654_321))
copy = shutil.copytree(src, os.path.join(WORK, "copy"), symlinks=True)
cmp = filecmp.dircmp(src, copy)


def differences(c):
    found = c.left_only + c.right_only + c.diff_files + c.funny_files
    for sub in c.subdirs.values():
        found += differences(sub)
    return found


print("copytree differences:", differences(cmp))
print("symlink kept:", os.readlink(os.path.join(copy, "link-to-one")))
print("mode kept:", oct(os.stat(os.path.join(copy, "e/four.txt")).st_mode & 0o777))
print("mtime kept:", os.stat(os.path.join(copy, "top.txt")).st_mtime_ns)
total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(copy) for f in fs
            if not os.path.islink(os.path.join(r, f)))
print("bytes copied", total)
shutil.move(os.path.join(copy, "a"), os.path.join(WORK, "moved-a"))
print("moved:", sorted(os.listdir(os.path.join(WORK, "moved-a"))), sorted(os.listdir(copy)))
shutil.rmtree(copy)
shutil.rmtree(os.path.join(WORK, "moved-a"))
print("after rmtree:", sorted(os.listdir(WORK)))


step("multiprocessing.Pool")


def square(n):
    return n * n


def write_part(i):
    with open(os.path.join(WORK, f"part{i}"), "w") as f:
        f.write(f"{i}\n" * (i + 1))
    return os.getpid()


ctx = multiprocessing.get_context("fork")
with ctx.Pool(4) as pool:
    print("sum of squares", sum(pool.map(square, range(1000))))
    pids = set(pool.map(write_part, range(16)))
    print("workers were other processes:", os.getpid() not in pids)
print("parts", sum(os.path.getsize(f"part{i}") for i in range(16)))


step("sem_open")


def add_under_lock(counter, n):
    for _ in range(n):
        with counter.get_lock():
            counter.value += 1


counter = ctx.Value("i", 0)  # its lock is a semaphore from sem_open
procs = [ctx.Process(target=add_under_lock, args=(counter, 500)) for _ in range(4)]
for p in procs:
    p.start()
for p in procs:
    p.join()
print("counter", counter.value, "exit codes", [p.exitcode for p in procs])

# A named semaphore kept by name, as sem_open makes it: a file in /dev/shm.
sem_name = "/cordon-test-" + os.path.basename(WORK)
sem = _multiprocessing.SemLock(multiprocessing.synchronize.SEMAPHORE, 0, 10, sem_name, False)
print("semaphore file in /dev/shm:", os.path.exists("/dev/shm/sem." + sem_name[1:]))


def post(s, times):
    for _ in range(times):
        s.release()


p = ctx.Process(target=post, args=(sem, 3))
p.start()
p.join()
taken = 0
while sem.acquire(False):
    taken += 1
print("posted by a child and taken by the parent:", taken)
_multiprocessing.sem_unlink(sem_name)
print("unlinked:", not os.path.exists("/dev/shm/sem." + sem_name[1:]))


step("os.replace under contention")
SIZE = 64 * 1024
WRITERS, ROUNDS, READS = 4, 40, 100


def writer(k):
    data = bytes([k + 1]) * SIZE
    for r in range(ROUNDS):
        tmp = f"target.{k}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, "target")


def reader(done, results):
    """Reads the target at least READS times, and on until the writers are
    done; counts reads that saw anything but one writer's whole file."""
    torn = seen = 0
    while seen < READS or not done.is_set():
        try:
            with open("target", "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        seen += 1
        if len(data) != SIZE or data.count(data[:1]) != SIZE:
            torn += 1
    results.put(torn)


with open("target", "wb") as f:
    f.write(bytes([1]) * SIZE)
results = ctx.Queue()
done = ctx.Event()
readers = [ctx.Process(target=reader, args=(done, results)) for _ in range(2)]
writers = [ctx.Process(target=writer, args=(k,)) for k in range(WRITERS)]
for p in readers + writers:
    p.start()
for p in writers:
    p.join()
done.set()
torn = [results.get() for _ in readers]
for p in readers:
    p.join()
print("exit codes", [p.exitcode for p in readers + writers])
print("torn reads", torn)
with open("target", "rb") as f:
    final = f.read()
print("final target is one writer's whole file:", len(final) == SIZE and final.count(final[:1]) == SIZE
      and 1 <= final[0] <= WRITERS)
print("left behind:", sorted(n for n in os.listdir(".") if n.startswith("target")))

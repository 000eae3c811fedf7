//! `--memory` bounds the host: whatever a program asks of the sandbox's
//! kernel (pipe buffers, mappings, untouched memory read, tasks), the
//! cordon process stays within the limit plus a fixed overhead, and running
//! out of memory looks as it does on Linux (ENOMEM, or SIGKILL from the OOM
//! killer). Each run is of `tests/c/memory_limits.c` in one of its modes;
//! the host process's peak resident size is its own accounting
//! (`ru_maxrss` of the reaped cordon process), a count rather than a time.

mod common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use common::{c_program, cordon, native};

/// The limit every run is under.
const MEMORY: &str = "256M";
const MEMORY_BYTES: u64 = 256 << 20;
/// What cordon itself may take beyond `--memory`: its code, the sentry's
/// fixed state and allocator slack. Everything a program can make it hold
/// is charged to the limit.
const OVERHEAD_BYTES: u64 = 64 << 20;

/// Far more than any of these runs takes: reaching it means a hang.
const HANG: Duration = Duration::from_secs(300);

/// Runs `cordon run --memory 256M -- PROGRAM MODE` and returns its output
/// and its peak resident size in bytes.
#[allow(clippy::zombie_processes, reason = "reaped by wait4, which also reports its peak size")]
fn run_watched(program: &str, mode: &str) -> (Output, u64) {
    let mut child = Command::new(cordon())
        .args(["run", "--memory", MEMORY, "--", program, mode])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    let collect = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = collect(child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let err = collect(child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + HANG;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: rusage is plain data that wait4 fills in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child, writing into the locals above.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break (status, usage);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("memory_limits {mode}: still running after {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = Output {
        status: ExitStatus::from_raw(status),
        stdout: out.join().expect("stdout"),
        stderr: err.join().expect("stderr"),
    };
    (output, usage.ru_maxrss as u64 * 1024)
}

/// Runs a mode in the sandbox, checks its exit status and output, and that
/// the host stayed within the limit plus the overhead.
fn check(mode: &str, expected_stdout: &str) {
    let program = c_program("memory_limits", "static");
    let (out, peak) = run_watched(program.to_str().expect("utf-8 path"), mode);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{mode}: exit status; stderr:\n{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected_stdout, "{mode}: stdout; stderr:\n{stderr}");
    assert!(
        peak <= MEMORY_BYTES + OVERHEAD_BYTES,
        "{mode}: the host process peaked at {} MiB, more than --memory {MEMORY} plus {} MiB",
        peak >> 20,
        OVERHEAD_BYTES >> 20
    );
}

/// As `check`, with the output the program gives natively (no limit
/// applies there: what it prints does not depend on one).
fn check_like_native(mode: &str) {
    let program = c_program("memory_limits", "static");
    let n = native(program.to_str().expect("utf-8 path"), &[mode], None);
    assert!(
        n.status.success(),
        "memory_limits {mode} fails natively, so the test itself is wrong:\n{}{}",
        String::from_utf8_lossy(&n.stdout),
        String::from_utf8_lossy(&n.stderr)
    );
    check(mode, &String::from_utf8_lossy(&n.stdout));
}

/// 1,500 pipes enlarged to 1 MiB and filled would hold 1.5 GiB: their
/// buffers are memory of the sandbox, so writes past the limit fail with
/// ENOMEM, and drained buffers are memory again.
#[test]
fn pipe_buffers_are_charged() {
    require_kvm!();
    check("pipes", "writes were refused for want of memory\npipes filled\n7 checks, 0 failed\n");
}

/// 1,500 unix socket pairs with 2 MiB send buffers filled both ways would
/// hold over 1 GiB: their queued messages are charged to the sandbox's
/// memory, so sends past the limit fail with ENOBUFS, what was queued reads
/// back, and closed sockets' buffers are memory again.
#[test]
fn socket_buffers_are_charged() {
    require_kvm!();
    check("sockets", "sends were refused for want of memory\nsocket pairs filled\n7 checks, 0 failed\n");
}

/// Ten threads each writing 180 MiB into one pipe: the data moves from
/// their buffers a page at a time, never copied whole into the kernel.
#[test]
fn large_pipe_writes_move_in_pages() {
    require_kvm!();
    check("pipe-writers", "10 writers moved 1800 MiB\n23 checks, 0 failed\n");
}

/// mmap stops with ENOMEM at vm.max_map_count (65,530) mappings, counted
/// as Linux counts them, and splits past the limit fail too; two million
/// calls are asked for.
#[test]
fn map_count_is_capped() {
    require_kvm!();
    check_like_native("maps");
}

/// Reading 8 GiB of untouched anonymous memory under a 256 MiB limit reads
/// zeros without using memory; writes then take frames of their own.
#[test]
fn untouched_memory_reads_the_zero_page() {
    require_kvm!();
    check_like_native("zero-read");
}

/// A 100 GiB MAP_NORESERVE mapping costs only the pages touched.
#[test]
fn sparse_mapping_costs_only_pages_touched() {
    require_kvm!();
    check_like_native("sparse");
}

/// A process allocating until memory runs out is killed by SIGKILL, as the
/// OOM killer kills, and its parent goes on.
#[test]
fn running_out_of_memory_is_sigkill() {
    require_kvm!();
    check("oom", "allocating child killed by signal 9\n1 checks, 0 failed\n");
}

/// execve refuses strings past Linux's bounds (one string over 128 KiB, or
/// all of them over a quarter of the stack limit, one string passed many
/// times counting each time) with E2BIG, so the sentry's copies of them are
/// bounded.
#[test]
fn exec_strings_are_bounded() {
    require_kvm!();
    check_like_native("exec-args");
}

/// POSIX timers past RLIMIT_SIGPENDING fail with EAGAIN.
#[test]
fn timers_are_bounded() {
    require_kvm!();
    check_like_native("timers");
}

/// A fork bomb with no task limit ends: once memory is used up, forks fail
/// with ENOMEM (or a process is killed for want of memory), every process
/// exits, and forking works again.
#[test]
fn a_fork_bomb_meets_the_memory_limit() {
    require_kvm!();
    check("fork-bomb", "the tree ran out of memory; every process ended\n3 checks, 0 failed\n");
}

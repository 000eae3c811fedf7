//! Stress: 1,000 fork + exec + wait of /bin/true, and 100,000 round trips
//! between two threads over a pipe, in the sandbox; each must complete
//! without error. While they run, the cordon process is watched from the
//! host: its thread count must stay bounded (a task thread that is not
//! released when its task ends would pile up) and its memory must not
//! grow without bound.

mod common;

use std::time::{Duration, Instant};

/// What was seen of a cordon run from the host.
struct Watched {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    max_threads: u64,
    /// Resident memory (KiB) early in the run and at its end.
    rss_first: u64,
    rss_last: u64,
}

fn status_field(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// Runs `cordon run -- prog args`, sampling the cordon process's threads
/// and resident memory every 20 ms; fails if it takes longer than `limit`.
fn watch(prog: &str, args: &[&str], limit: Duration) -> Watched {
    let started = Instant::now();
    let mut child = common::spawn_cordon(&[&[prog], args].concat());
    let pid = child.id();
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read_all(Box::new(out));
    let err = read_all(Box::new(err));
    let (mut max_threads, mut rss_first, mut rss_last) = (0, 0, 0);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if let Some(t) = status_field(pid, "Threads:") {
            max_threads = max_threads.max(t);
        }
        if let Some(r) = status_field(pid, "VmRSS:") {
            if rss_first == 0 && started.elapsed() > Duration::from_millis(500) {
                rss_first = r;
            }
            rss_last = r;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{prog} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Watched {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed: started.elapsed(),
        max_threads,
        rss_first,
        rss_last,
    }
}

fn check(w: &Watched, expect: &str) {
    eprintln!(
        "took {:.1} s; cordon threads at most {}; resident {} KiB early, {} KiB at the end",
        w.elapsed.as_secs_f64(),
        w.max_threads,
        w.rss_first,
        w.rss_last
    );
    assert_eq!(w.code, Some(0), "stderr:\n{}", w.stderr);
    assert!(w.stdout.contains(expect), "stdout:\n{}\nstderr:\n{}", w.stdout, w.stderr);
    assert!(w.stdout.contains("0 failed"), "stdout:\n{}", w.stdout);
    // One host thread per live task plus a few service threads: these
    // programs never have more than three tasks at once.
    assert!(w.max_threads <= 16, "cordon had {} threads", w.max_threads);
    // Memory of ended processes is given back: no growth by the size of
    // what the run went through (1,000 address spaces, 800 KB of pipe data).
    if w.rss_first > 0 {
        assert!(
            w.rss_last < w.rss_first + 128 * 1024,
            "resident memory grew from {} to {} KiB",
            w.rss_first,
            w.rss_last
        );
    }
}

#[test]
fn a_thousand_fork_exec_wait() {
    require_kvm!();
    let p = common::c_program("stress_fork_exec", "static");
    let w = watch(p.to_str().unwrap(), &["1000"], Duration::from_secs(600));
    check(&w, "1000 fork+exec, 100 spawn");
}

#[test]
fn pipe_ping_pong_between_two_threads() {
    require_kvm!();
    let p = common::c_program("stress_pingpong", "static");
    let w = watch(p.to_str().unwrap(), &["100000"], Duration::from_secs(600));
    check(&w, "100000 round trips");
}

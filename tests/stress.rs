//! Stress: 1,000 fork + exec + wait of /bin/true, 100,000 round trips
//! between two threads over a pipe, and 10,000 signals to a thread busy
//! with system calls, in the sandbox; each must complete
//! without error and without a leak. While they run, the cordon process is
//! watched from the host: its thread count must stay bounded (a task thread
//! that is not released when its task ends would pile up) and its memory
//! must not grow without bound. At the end, `--profile` tells what the
//! sandbox still holds: no task thread, no vCPU in use, no memory frame the
//! run did not start with, and no more host descriptors than a run of one
//! iteration leaves.

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

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
    /// The `--profile` report.
    profile: Value,
}

fn status_field(pid: u32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The sentry: the child of the `cordon` process (which stays behind as
/// its monitor), once it has been started.
fn sentry_of(cordon: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{cordon}/task/{cordon}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// Runs `cordon run -- prog args`, sampling the sentry's threads and
/// resident memory every 20 ms; fails if it takes longer than `limit`.
fn watch(prog: &str, args: &[&str], limit: Duration) -> Watched {
    let started = Instant::now();
    // One directory per run: the tests run side by side.
    let stem = std::path::Path::new(prog).file_name().unwrap().to_string_lossy().into_owned();
    let report = common::scratch_dir(&format!("stress-{stem}-{}", args.join("-"))).join("profile.json");
    let profile_opt = format!("--profile={}", report.display());
    let mut child = common::spawn_cordon_with(&[&profile_opt], &[&[prog], args].concat());
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
    let mut sentry = None;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        sentry = sentry.or_else(|| sentry_of(pid));
        let sampled = sentry.unwrap_or(pid);
        if let Some(t) = status_field(sampled, "Threads:") {
            max_threads = max_threads.max(t);
        }
        if let Some(r) = status_field(sampled, "VmRSS:")
            && sentry.is_some()
        {
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
        profile: std::fs::read_to_string(&report)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null),
    }
}

fn resource(w: &Watched, when: &str, what: &str) -> u64 {
    w.profile[when][what].as_u64().unwrap_or_else(|| panic!("no {when}.{what} in the profile: {}", w.profile))
}

/// Frames holding application memory: all in use but the supervisor
/// area's and page tables.
fn app_frames(w: &Watched, when: &str) -> u64 {
    resource(w, when, "frames_in_use") - resource(w, when, "supervisor_frames") - resource(w, when, "page_table_frames")
}

/// What a run holds at its end must not depend on how long it ran.
fn check_released(w: &Watched, baseline: &Watched) {
    assert_eq!(resource(w, "resources_at_exit", "task_threads"), 0, "task threads left");
    assert_eq!(resource(w, "resources_at_exit", "vcpus_in_use"), 0, "vCPUs still held");
    assert_eq!(
        app_frames(w, "resources_at_exit"),
        app_frames(w, "resources_at_start"),
        "memory frames not given back: {}",
        w.profile
    );
    assert_eq!(
        resource(w, "resources_at_exit", "host_fds"),
        resource(baseline, "resources_at_exit", "host_fds"),
        "host descriptors left beyond what one iteration leaves"
    );
}

fn check(w: &Watched, expect: &str) {
    eprintln!(
        "took {:.1} s; sentry threads at most {}; resident {} KiB early, {} KiB at the end",
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
    assert!(w.max_threads <= 16, "the sentry had {} threads", w.max_threads);
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
    let one = watch(p.to_str().unwrap(), &["1"], Duration::from_secs(60));
    check_released(&w, &one);
}

#[test]
fn pipe_ping_pong_between_two_threads() {
    require_kvm!();
    let p = common::c_program("stress_pingpong", "static");
    let w = watch(p.to_str().unwrap(), &["100000"], Duration::from_secs(600));
    check(&w, "100000 round trips");
    let one = watch(p.to_str().unwrap(), &["1"], Duration::from_secs(60));
    check_released(&w, &one);
}

/// 10,000 signals to a thread that loops through system calls, each sent
/// as soon as the one before is handled: a signal that arrives while the
/// thread is unblocking it must not be lost (the sender would wait for it
/// for good).
#[test]
fn signals_to_a_thread_leaving_its_handler() {
    require_kvm!();
    let p = common::c_program("stress_signals", "static");
    let w = watch(p.to_str().unwrap(), &["10000"], Duration::from_secs(600));
    check(&w, "10000 signals handled");
}

/// Pipelines of short-lived processes whose output is checked byte for
/// byte: `echo | head -c N | md5sum` for N = 0..300, three forks each, in
/// bash. A frame reused while a stale translation of it survives, or a copy
/// on write that lets one process see another's stores, shows up as a wrong
/// digest or a crash, not only as an exit status.
#[test]
fn pipelines_give_the_same_bytes_as_natively() {
    require_kvm!();
    let script = r#"text=$(seq 1 400 | tr '\n' ' ')
n=0
while [ $n -lt 300 ]; do
  echo "$text" | head -c $n | md5sum
  n=$((n+1))
done"#;
    let n = common::native("/bin/bash", &["-c", script], None);
    assert!(n.status.success(), "the script fails natively");
    assert_eq!(String::from_utf8_lossy(&n.stdout).lines().count(), 300);
    let s = common::sandbox(&[], "/bin/bash", &["-c", script], None);
    common::assert_same("md5 pipelines", &s, &n);
}

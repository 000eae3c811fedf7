//! Signals sent to the cordon process from outside go to the sandbox's
//! first process: a trap runs, or the default action ends it (cordon then
//! exits with 128 + the signal). When the first process exits, whatever it
//! left running in the background is killed and cordon exits promptly.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

/// A cordon run whose stdout is read line by line on a thread.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = common::spawn_cordon(args);
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// Waits for the next line of output.
    fn line(&self, within: Duration) -> String {
        self.lines.recv_timeout(within).expect("a line of output in time")
    }

    fn signal(&self, sig: Signal) {
        let pid = Pid::from_raw(self.child.id() as i32).expect("pid");
        kill_process(pid, sig).expect("kill cordon");
    }

    /// Waits for cordon to exit; fails (after killing it) if it takes
    /// longer than `within`. Returns the exit code and the rest of stdout.
    fn finish(mut self, within: Duration) -> (Option<i32>, Vec<String>, String) {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("cordon did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // Every task is gone: stdout reaches end of file at once.
        let mut rest = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(5)) {
                Ok(l) => rest.push(l),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("stdout still open after cordon exited"),
            }
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status.code(), rest, err)
    }
}

const TRAPPING: &str = r#"
trap 'echo got TERM; exit 3' TERM
trap 'echo got INT; exit 4' INT
trap 'echo got HUP; exit 5' HUP
echo ready
while :; do sleep 0.1; done
"#;

#[test]
fn a_trap_runs_and_sets_the_exit_status() {
    require_kvm!();
    for (sig, name, code) in [(Signal::TERM, "TERM", 3), (Signal::INT, "INT", 4), (Signal::HUP, "HUP", 5)] {
        let r = Running::start(&["/bin/sh", "-c", TRAPPING]);
        assert_eq!(r.line(Duration::from_secs(20)), "ready");
        r.signal(sig);
        let (status, rest, err) = r.finish(Duration::from_secs(10));
        assert_eq!(rest, vec![format!("got {name}")], "{name}: {err}");
        assert_eq!(status, Some(code), "{name}: {err}");
    }
}

#[test]
fn the_default_action_kills_with_128_plus_the_signal() {
    require_kvm!();
    for (sig, n) in [(Signal::TERM, 15), (Signal::INT, 2), (Signal::HUP, 1), (Signal::USR1, 10)] {
        let r = Running::start(&["/bin/sh", "-c", "echo ready; while :; do sleep 0.1; done"]);
        assert_eq!(r.line(Duration::from_secs(20)), "ready");
        r.signal(sig);
        let (status, rest, err) = r.finish(Duration::from_secs(10));
        assert!(rest.is_empty(), "{rest:?}");
        assert_eq!(status, Some(128 + n), "signal {n}: {err}");
    }
    // A program blocked in a system call, not a shell.
    let r = Running::start(&["/bin/sh", "-c", "echo ready; exec sleep 100"]);
    assert_eq!(r.line(Duration::from_secs(20)), "ready");
    std::thread::sleep(Duration::from_millis(200)); // let the exec happen
    r.signal(Signal::TERM);
    let (status, _, err) = r.finish(Duration::from_secs(10));
    assert_eq!(status, Some(143), "{err}");
}

#[test]
fn stop_and_continue_from_outside() {
    require_kvm!();
    // SIGTSTP stops the first process; SIGCONT resumes it; then TERM.
    let script = "echo ready; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done";
    let r = Running::start(&["/bin/sh", "-c", script]);
    assert_eq!(r.line(Duration::from_secs(20)), "ready");
    r.line(Duration::from_secs(5));
    r.signal(Signal::TSTP);
    std::thread::sleep(Duration::from_millis(300));
    while r.lines.try_recv().is_ok() {}
    std::thread::sleep(Duration::from_millis(300));
    assert!(r.lines.try_recv().is_err(), "output while stopped");
    r.signal(Signal::CONT);
    assert!(r.line(Duration::from_secs(5)).starts_with("tick"), "runs again after SIGCONT");
    r.signal(Signal::TERM);
    let (status, _, err) = r.finish(Duration::from_secs(10));
    assert_eq!(status, Some(143), "{err}");
}

#[test]
fn background_children_die_with_the_first_process() {
    require_kvm!();
    // Children that ignore the polite signals, sleep, or spin: all go
    // when the shell exits, and cordon exits at once with its status.
    let script = r#"
sleep 100 &
sh -c 'trap "" TERM HUP INT; while :; do sleep 0.05; done' &
sh -c 'while :; do :; done' &
sh -c 'sleep 100 & sleep 100 & wait' &
echo started
exit 7
"#;
    let started = Instant::now();
    let r = Running::start(&["/bin/sh", "-c", script]);
    assert_eq!(r.line(Duration::from_secs(20)), "started");
    let (status, rest, err) = r.finish(Duration::from_secs(10));
    assert_eq!(status, Some(7), "{err}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn a_first_process_killed_from_outside_takes_its_children() {
    require_kvm!();
    let script = "sleep 100 & sh -c 'trap \"\" TERM; while :; do sleep 0.05; done' & echo ready; wait";
    let r = Running::start(&["/bin/sh", "-c", script]);
    assert_eq!(r.line(Duration::from_secs(20)), "ready");
    r.signal(Signal::TERM);
    // finish() also checks that stdout, which every child holds, reaches
    // end of file: no task of the sandbox outlived it.
    let (status, _, err) = r.finish(Duration::from_secs(10));
    assert_eq!(status, Some(143), "{err}");
}

/// What the caller ignores and blocks, the program starts with, as it
/// would through execve: `nohup cordon run ...` gives a program that
/// survives SIGHUP, and a shell's background job one that ignores SIGINT.
#[test]
fn ignored_and_blocked_signals_are_inherited_as_through_execve() {
    use std::os::unix::process::CommandExt;
    require_kvm!();
    let with_caller_signals = |mut cmd: std::process::Command| {
        // SAFETY: the closure runs in the forked child before exec and only
        // makes async-signal-safe calls on its own memory.
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGUSR2] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGUSR1);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                Ok(())
            })
        };
        common::run_with(cmd, None)
    };
    let grep = ["-E", "^Sig(Ign|Blk)", "/proc/self/status"];
    let mut native = std::process::Command::new("/bin/grep");
    native.args(grep);
    let native = with_caller_signals(native);
    let mut sandboxed = std::process::Command::new(common::cordon());
    sandboxed.args(["run", "--", "/bin/grep"]).args(grep);
    let sandboxed = with_caller_signals(sandboxed);
    let text = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(text.contains("SigBlk:\t0000000000004200"), "natively: {text}");
    common::assert_same("the signals grep starts with", &sandboxed, &native);
    let script = ["-c", "kill -HUP $$; echo survived SIGHUP"];
    let mut native = std::process::Command::new("/bin/sh");
    native.args(script);
    let native = with_caller_signals(native);
    let mut sandboxed = std::process::Command::new(common::cordon());
    sandboxed.args(["run", "--", "/bin/sh"]).args(script);
    let sandboxed = with_caller_signals(sandboxed);
    assert_eq!(String::from_utf8_lossy(&native.stdout), "survived SIGHUP\n");
    common::assert_same("a shell sending itself SIGHUP", &sandboxed, &native);
}

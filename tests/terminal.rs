//! `cordon run -it`: an interactive bash on a sandbox terminal, driven
//! from a pty of the host's as a person at a terminal would drive it, and
//! the same session with bash run natively on such a pty. Both must show
//! the same command output: plain commands, line editing and history,
//! ^C of a foreground job, ^Z of one then `fg`, and a window resize.
//!
//! Nothing here waits for time to pass: each step waits for a marker the
//! shell prints (markers are computed, so the echo of the typed line
//! never matches them), with one generous limit to catch a hang.

mod common;

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Far more than the whole session takes: reaching it means a hang.
const LIMIT: Duration = Duration::from_secs(180);

/// A program on a fresh host pty that is its controlling terminal.
struct Session {
    /// Which run this is, for messages.
    what: &'static str,
    master: std::fs::File,
    child: Child,
    /// Everything read from the terminal so far.
    seen: Vec<u8>,
    /// How far `expect` has looked.
    pos: usize,
    deadline: Instant,
}

fn set_window(fd: &impl AsRawFd, rows: u16, cols: u16) {
    let ws = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCSWINSZ reads the winsize we own.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    assert_eq!(r, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
}

impl Session {
    fn start(what: &'static str, mut cmd: Command) -> Session {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes the two descriptors it opens; the other
        // arguments may be null.
        let r =
            unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are ours alone.
        let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        set_window(&master, 24, 80);
        common::on_controlling_terminal(&mut cmd, slave);
        let child = cmd.spawn().expect("spawn on the pty");
        Session { what, master: master.into(), child, seen: Vec::new(), pos: 0, deadline: Instant::now() + LIMIT }
    }

    fn transcript(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads until `marker` appears past what was looked at before;
    /// returns the text up to it, and looks on from its end.
    fn expect(&mut self, marker: &str) -> String {
        loop {
            if let Some(i) = find(&self.seen[self.pos..], marker.as_bytes()) {
                let text = String::from_utf8_lossy(&self.seen[self.pos..self.pos + i]).into_owned();
                self.pos += i + marker.len();
                return text;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{}: no {marker:?} in time; the terminal showed:\n{}",
                self.what,
                self.transcript()
            );
            let mut pfd = libc::pollfd { fd: self.master.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: polls one descriptor we own, described by `pfd`.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32) };
            if n <= 0 {
                continue;
            }
            let mut buf = [0u8; 4096];
            match std::io::Read::read(&mut self.master, &mut buf) {
                Ok(0) | Err(_) => {
                    panic!("{}: the terminal closed before {marker:?}; it showed:\n{}", self.what, self.transcript())
                }
                Ok(n) => self.seen.extend_from_slice(&buf[..n]),
            }
        }
    }

    fn send(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).expect("write to the terminal");
    }

    /// Reads to the end and returns the program's exit status.
    fn finish(mut self) -> (Option<i32>, String) {
        let mut buf = [0u8; 4096];
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{}: the program did not end; it showed:\n{}", self.what, self.transcript());
            let mut pfd = libc::pollfd { fd: self.master.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: as in `expect`.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(1000) as i32) };
            if n > 0 {
                match std::io::Read::read(&mut self.master, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => self.seen.extend_from_slice(&buf[..n]),
                }
            } else if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
        }
        let status = self.child.wait().expect("wait");
        (status.code(), self.transcript())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The shell's environment, the same both ways.
const ENV: &[(&str, &str)] = &[
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("TERM", "dumb"),
    ("HOME", "/"),
    ("PS1", "PROMPT> "),
    ("HISTFILE", "/dev/null"),
    ("INPUTRC", "/dev/null"),
    ("LANG", "C"),
];

const BASH: [&str; 4] = ["/bin/bash", "--norc", "--noprofile", "-i"];

/// Drives the session; returns what each step printed (line ends made
/// plain) and the exit status.
fn drive(mut s: Session) -> (Vec<String>, Option<i32>) {
    let mut outputs = Vec::new();
    let mut step = |s: &mut Session, keys: &str, end: &str| {
        s.send(keys);
        let text = s.expect(end);
        s.expect("PROMPT> ");
        outputs.push(text.replace("\r\n", "\n"));
    };
    s.expect("PROMPT> ");
    // Plain commands, the terminal's name and size.
    step(&mut s, "echo \"B$((1))\"; tty | sed 's/[0-9]*$/N/'; stty size; echo \"E$((1))\"\r", "E1");
    // Line editing (a typo erased) and history (the line before, again).
    step(&mut s, "echo \"B$((2))\"; echo abX\x7fc; echo \"E$((2))\"\r", "E2");
    s.send("\x1b[A\r");
    s.expect("E2");
    s.expect("PROMPT> ");
    // ^C ends the foreground job; bash reports 130.
    s.send("sh -c 'echo \"R$((1))\"; exec sleep 100'\r");
    s.expect("R1");
    s.send("\x03");
    s.expect("PROMPT> ");
    step(&mut s, "echo \"B$((3))\" $?; echo \"E$((3))\"\r", "E3");
    // ^Z stops a job; fg brings it back (it says so once it runs), ^C
    // ends it.
    s.send("bash -c 'trap \"echo C\\$((1))\" CONT; echo \"Z$((1))\"; while :; do sleep 0.1; done'\r");
    s.expect("Z1");
    s.send("\x1a");
    s.expect("Stopped");
    s.expect("PROMPT> ");
    step(&mut s, "jobs; echo \"E$((4))\"\r", "E4");
    s.send("fg\r");
    s.expect("C1");
    s.send("\x03");
    s.expect("PROMPT> ");
    step(&mut s, "echo \"B$((5))\" $?; jobs; echo \"E$((5))\"\r", "E5");
    // A resize reaches the shell's terminal and bash's idea of its size.
    set_window(&s.master, 30, 100);
    // Readline redraws its line for the new size: typing before that
    // shows in the redraw or not, by timing.
    s.expect("\rPROMPT> ");
    step(
        &mut s,
        "until [ \"$(stty size)\" = '30 100' ]; do sleep 0.1; done; stty size; echo \"$LINES $COLUMNS\"; echo \"E$((6))\"\r",
        "E6",
    );
    s.send("exit 3\r");
    let (status, _) = s.finish();
    (outputs, status)
}

#[test]
fn interactive_bash_on_a_sandbox_terminal() {
    require_kvm!();
    let mut native = Command::new(BASH[0]);
    native.args(&BASH[1..]).env_clear().envs(ENV.iter().copied()).current_dir("/");
    let (native_out, native_status) = drive(Session::start("native", native));

    let mut sandboxed = Command::new(common::cordon());
    sandboxed.args(["run", "-it", "--env-clear", "-w", "/"]);
    for (k, v) in ENV {
        sandboxed.arg("-e").arg(format!("{k}={v}"));
    }
    sandboxed.arg("--").args(BASH).env_clear().env("PATH", "/usr/bin:/bin");
    let (sandbox_out, sandbox_status) = drive(Session::start("sandbox", sandboxed));

    assert_eq!(native_status, Some(3), "bash natively: {native_out:?}");
    assert_eq!(sandbox_status, Some(3), "bash in the sandbox: {sandbox_out:?}");
    assert_eq!(sandbox_out, native_out);
    // And what they agree on is what was asked for.
    assert!(native_out[0].contains("\nB1\n/dev/pts/N\n24 80\n"), "{native_out:?}");
    assert!(native_out[1].contains("\nabc\n"), "{native_out:?}");
    assert!(native_out[2].contains("B3 130"), "{native_out:?}");
    assert!(native_out[3].contains("Stopped"), "{native_out:?}");
    assert!(native_out[4].contains("B5 130"), "{native_out:?}");
    assert!(native_out[5].contains("30 100\n30 100\n"), "{native_out:?}");
}

/// `-it` needs a terminal to read from, as docker's does.
#[test]
fn a_terminal_needs_a_terminal_for_input() {
    let out = Command::new(common::cordon())
        .args(["run", "-it", "--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .expect("run cordon");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "cordon: the input device is not a TTY\n");
}

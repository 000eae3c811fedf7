//! Choosing a platform by measurement: `--platform auto` and `cordon
//! platforms`.
//!
//! Each platform is calibrated (see `platform::calibrate`) in a child
//! process of its own: a platform leaves state behind in the process that
//! made it (the trap platform's factory and control mapping, the kvm
//! platform's signal handler), and one that crashes or hangs on a strange
//! host must not take cordon with it. The results are cached per host
//! under the user's cache directory, keyed by what decides them: the
//! kernel, the CPU, the KVM device and its kind, and the cordon build.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use platform::PlatformError;
use platform::calibrate::{self, Costs};
use serde::{Deserialize, Serialize};

/// The platforms, in the order they are listed and preferred on a tie.
pub const NAMES: [&str; 2] = ["kvm", "trap"];

/// How long a platform's calibration may take before it is given up as
/// hung: far beyond the milliseconds it needs even on a loaded host.
const CALIBRATION_LIMIT: Duration = Duration::from_secs(30);

/// What identifies a host for the cache: a calibration is re-used only
/// where every field is the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostKey {
    /// Kernel release and build.
    pub kernel: String,
    /// The CPU's model name.
    pub cpu: String,
    /// The KVM device, the module behind it and whether it opens.
    pub kvm: String,
    /// cordon's version and the identity of its executable: a new build
    /// may have made a platform faster.
    pub cordon: String,
}

/// One platform's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlatformCosts {
    pub name: String,
    #[serde(flatten)]
    pub status: Status,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    Available { round_trip_ns: u64, fault_ns: u64 },
    Unavailable { why: String },
}

/// Every platform's result on one host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub host: HostKey,
    pub platforms: Vec<PlatformCosts>,
}

impl Calibration {
    /// The platform auto picks: the available one whose system call round
    /// trip and first-touch fault cost least together (a program pays
    /// both, in numbers of the same order); the first listed on a tie.
    pub fn choice(&self) -> Option<&str> {
        self.platforms
            .iter()
            .filter_map(|p| match p.status {
                Status::Available { round_trip_ns, fault_ns } => {
                    Some((p.name.as_str(), round_trip_ns.saturating_add(fault_ns)))
                }
                Status::Unavailable { .. } => None,
            })
            .min_by_key(|(_, cost)| *cost)
            .map(|(name, _)| name)
    }

    /// Why no platform can run, one clause per platform.
    pub fn why_none(&self) -> String {
        let why: Vec<String> = self
            .platforms
            .iter()
            .map(|p| match &p.status {
                Status::Unavailable { why } => format!("{}: {why}", p.name),
                Status::Available { .. } => format!("{}: available", p.name),
            })
            .collect();
        why.join("; ")
    }

    /// One line per platform, as `cordon platforms` prints them.
    pub fn render(&self) -> String {
        let chosen = self.choice();
        let width = NAMES.iter().map(|n| n.len()).max().unwrap_or(0);
        let us = |ns: u64| ns as f64 / 1e3;
        let mut out = String::new();
        for p in &self.platforms {
            let line = match &p.status {
                Status::Available { round_trip_ns, fault_ns } => format!(
                    "{:<width$}  available    round trip {:>8.1} us  first-touch fault {:>8.1} us{}",
                    p.name,
                    us(*round_trip_ns),
                    us(*fault_ns),
                    if chosen == Some(p.name.as_str()) { "  <- auto" } else { "" }
                ),
                Status::Unavailable { why } => format!("{:<width$}  unavailable: {why}", p.name),
            };
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

/// The calibration for this host: the cached one when its key matches and
/// `fresh` is false, else measured now and cached. Forks: call it while
/// the process has one thread.
pub fn calibration(kvm_device: &Path, fresh: bool) -> Calibration {
    let host = host_key(kvm_device);
    let path = cache_file();
    if !fresh
        && let Some(cached) = path.as_deref().and_then(load)
        && cached.host == host
        && cached.platforms.iter().map(|p| p.name.as_str()).eq(NAMES)
    {
        return cached;
    }
    let measured = Calibration { platforms: NAMES.iter().map(|n| measure_in_child(n, kvm_device)).collect(), host };
    // A host where nothing runs may be one being set up: look again next
    // time rather than remember it.
    if measured.choice().is_some()
        && let Some(path) = path
        && let Err(e) = store(&path, &measured)
    {
        // The cache only saves time; without it cordon measures each run.
        tracing::debug!("platform calibration not cached in {}: {e}", path.display());
    }
    measured
}

/// `$XDG_CACHE_HOME/cordon/platforms.json`, else under `~/.cache`.
pub fn cache_file() -> Option<PathBuf> {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let dir = absolute(std::env::var_os("XDG_CACHE_HOME"))
        .or_else(|| absolute(std::env::var_os("HOME")).map(|h| h.join(".cache")))?;
    Some(dir.join("cordon").join("platforms.json"))
}

/// The cached calibration, if there is one that reads back whole.
fn load(path: &Path) -> Option<Calibration> {
    let text = std::fs::read(path).ok()?;
    match serde_json::from_slice(&text) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::debug!("{}: not a calibration, measuring again: {e}", path.display());
            None
        }
    }
}

/// Replaces the cache file whole, so that a concurrent reader sees the old
/// or the new one.
fn store(path: &Path, c: &Calibration) -> std::io::Result<()> {
    let dir = path.parent().expect("the cache file is in a directory");
    std::fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".platforms.json.{}", std::process::id()));
    let text = serde_json::to_vec_pretty(c).map_err(std::io::Error::other)?;
    let written = std::fs::write(&temp, text).and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// This host's identity for the cache.
pub fn host_key(kvm_device: &Path) -> HostKey {
    let uts = rustix::system::uname();
    let kernel = format!("{} {}", uts.release().to_string_lossy(), uts.version().to_string_lossy());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into());
    // The module says what kind of KVM it is: hardware VMX or SVM, or
    // PVM's software one, whose exits cost tens of microseconds.
    let module = ["kvm_pvm", "kvm_intel", "kvm_amd"]
        .into_iter()
        .find(|m| Path::new("/sys/module").join(m).exists())
        .unwrap_or("no kvm module");
    let access = match std::fs::OpenOptions::new().read(true).write(true).open(kvm_device) {
        Ok(_) => "usable".to_string(),
        Err(e) => e.to_string(),
    };
    let kvm = format!("{} ({module}): {access}", kvm_device.display());
    let exe = std::env::current_exe().and_then(std::fs::metadata).ok();
    let build = exe.map_or_else(
        || "unknown build".to_string(),
        |m| {
            use std::os::unix::fs::MetadataExt;
            format!("{} bytes, modified {}.{:09}", m.size(), m.mtime(), m.mtime_nsec())
        },
    );
    HostKey { kernel, cpu, kvm, cordon: format!("{} ({build})", env!("CARGO_PKG_VERSION")) }
}

fn measure(name: &str, kvm_device: &Path) -> Result<Costs, PlatformError> {
    match name {
        "kvm" => calibrate::calibrate_kvm(kvm_device),
        "trap" => calibrate::calibrate_trap(sentry::confine::UNPRIVILEGED_ID),
        other => Err(PlatformError::Unavailable(format!("no platform named {other}"))),
    }
}

/// Calibrates platform `name` in a child process and reads its result.
fn measure_in_child(name: &str, kvm_device: &Path) -> PlatformCosts {
    let status = match run_in_child(|| status_of(measure(name, kvm_device))) {
        Ok(s) => s,
        Err(why) => Status::Unavailable { why: format!("calibration failed: {why}") },
    };
    PlatformCosts { name: name.to_string(), status }
}

fn status_of(r: Result<Costs, PlatformError>) -> Status {
    match r {
        Ok(c) => Status::Available { round_trip_ns: c.round_trip_ns, fault_ns: c.fault_ns },
        Err(PlatformError::Unavailable(why)) => Status::Unavailable { why },
        Err(e) => Status::Unavailable { why: format!("calibration failed: {e}") },
    }
}

/// Runs `work` in a forked child and returns what it sends back through a
/// pipe; an error if the child dies, sends nothing readable or takes past
/// [`CALIBRATION_LIMIT`] (it is killed then).
fn run_in_child(work: impl FnOnce() -> Status) -> Result<Status, String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors of a new pipe.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors are new and ours.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the caller has one thread, so the child is a whole copy of
    // the process and may run any code; it leaves only through _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(read_end);
        // What the platform forks (the trap platform's factory and stubs)
        // stays this process's to end, orphans included.
        // SAFETY: plain call on this process.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
        // The child's result, whatever the platform did, or an exit
        // status the parent reports.
        let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            Ok(status) => {
                let text = serde_json::to_vec(&status).unwrap_or_default();
                let mut file = std::fs::File::from(write_end);
                i32::from(std::io::Write::write_all(&mut file, &text).is_err())
            }
            Err(_) => 2,
        };
        end_descendants();
        // SAFETY: ends the child without running the parent's exit
        // handlers or flushing its copies of the parent's buffers.
        unsafe { libc::_exit(code) }
    }
    drop(write_end);
    let text = read_until_eof(read_end, Instant::now() + CALIBRATION_LIMIT);
    if text.is_none() {
        // SAFETY: kills our own child, not yet reaped, so the pid is its.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut wstatus = 0;
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(pid, &mut wstatus, 0) };
    let Some(text) = text else {
        return Err(format!("took longer than {} s", CALIBRATION_LIMIT.as_secs()));
    };
    match serde_json::from_slice(&text) {
        Ok(status) => Ok(status),
        Err(_) if libc::WIFSIGNALED(wstatus) => {
            Err(format!("the calibrating process died of signal {}", libc::WTERMSIG(wstatus)))
        }
        Err(_) => Err(format!("the calibrating process exited with status {}", libc::WEXITSTATUS(wstatus))),
    }
}

/// Kills and reaps every process this one made or inherited as subreaper,
/// so that when it is reaped nothing of the calibration is left: no process
/// in the caller's process group, none counted against the user's process
/// limit while the sandbox runs.
fn end_descendants() {
    loop {
        let Some(children) = own_children() else { return };
        for pid in children {
            // SAFETY: signals a child of this process, not yet reaped, so
            // the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // SAFETY: reaps any child of ours; ECHILD once there is none.
        if unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
        {
            return;
        }
    }
}

/// The children of every thread of this process; None if the kernel does
/// not list them.
fn own_children() -> Option<Vec<i32>> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let list = std::fs::read_to_string(task.ok()?.path().join("children")).ok()?;
        pids.extend(list.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
    }
    Some(pids)
}

/// Everything read from `fd` until end of file, or None at `deadline`.
fn read_until_eof(fd: OwnedFd, deadline: Instant) -> Option<Vec<u8>> {
    let mut file = std::fs::File::from(fd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let mut p = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: polls one descriptor we own.
        let ready = unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
        if ready <= 0 {
            // Timed out (the deadline check above ends it) or interrupted.
            continue;
        }
        match file.read(&mut buf) {
            Ok(0) => return Some(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Whatever came is all there is; the caller judges it.
            Err(_) => return Some(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> HostKey {
        HostKey { kernel: "k".into(), cpu: "c".into(), kvm: "v".into(), cordon: "b".into() }
    }

    fn costs(name: &str, rt: u64, fault: u64) -> PlatformCosts {
        PlatformCosts { name: name.into(), status: Status::Available { round_trip_ns: rt, fault_ns: fault } }
    }

    #[test]
    fn auto_picks_the_cheapest_available_and_the_first_on_a_tie() {
        let c = Calibration { host: key(), platforms: vec![costs("kvm", 30_000, 40_000), costs("trap", 5_000, 9_000)] };
        assert_eq!(c.choice(), Some("trap"));
        let c = Calibration { host: key(), platforms: vec![costs("kvm", 1_000, 2_000), costs("trap", 5_000, 9_000)] };
        assert_eq!(c.choice(), Some("kvm"));
        let c = Calibration { host: key(), platforms: vec![costs("kvm", 2_000, 1_000), costs("trap", 1_000, 2_000)] };
        assert_eq!(c.choice(), Some("kvm"));
        let gone = PlatformCosts { name: "kvm".into(), status: Status::Unavailable { why: "no /dev/kvm".into() } };
        let c = Calibration { host: key(), platforms: vec![gone.clone(), costs("trap", 5_000, 9_000)] };
        assert_eq!(c.choice(), Some("trap"));
        let c = Calibration { host: key(), platforms: vec![gone] };
        assert_eq!(c.choice(), None);
        assert_eq!(c.why_none(), "kvm: no /dev/kvm");
    }

    #[test]
    fn a_calibration_reads_back_as_written() {
        let gone = PlatformCosts { name: "trap".into(), status: Status::Unavailable { why: "no seccomp".into() } };
        let c = Calibration { host: key(), platforms: vec![costs("kvm", 1, 2), gone] };
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Calibration>(&text).unwrap(), c);
    }

    #[test]
    fn a_child_leaves_no_process_behind() {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two descriptors of a new pipe.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors are new and ours.
        let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let status = run_in_child(move || {
            // A grandchild that would outlive the calibration, holding the
            // pipe's write end open.
            // SAFETY: the grandchild only waits to be killed.
            if unsafe { libc::fork() } == 0 {
                loop {
                    // SAFETY: waits for a signal.
                    unsafe { libc::pause() };
                }
            }
            Status::Unavailable { why: "done".into() }
        });
        assert_eq!(status, Ok(Status::Unavailable { why: "done".into() }));
        drop(write_end);
        // End of file only once every holder of the write end is gone.
        assert_eq!(read_until_eof(read_end, Instant::now() + Duration::from_secs(60)), Some(vec![]));
    }

    #[test]
    fn a_child_that_dies_is_an_error_not_a_result() {
        let e = run_in_child(|| std::process::abort()).unwrap_err();
        assert!(e.contains("signal 6"), "{e}");
    }
}

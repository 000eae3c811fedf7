//! A container's state directory: `ROOT/ID`, owner-only, holding
//!
//! - `state.json`: what the runtime recorded at create ([`Record`]);
//! - `control`: the sentry's control channel, a FIFO (see
//!   `sentry::control`);
//! - `control.sock`: the sentry's control socket, for exec, ps, stats
//!   (see `sentry::control::Request`);
//! - `created`: present from create until start, whose removal of it is
//!   what makes one start of the two that race win.
//!
//! The status is not recorded but seen: stopped once the container's
//! process (the pid engines wait on) is gone, created while `created` is
//! there, running otherwise.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

pub const STATE_FILE: &str = "state.json";
pub const CONTROL: &str = "control";
pub const CREATED: &str = "created";
pub const SOCKET: &str = "control.sock";

/// What `create` records of a container.
#[derive(Serialize, Deserialize, Clone)]
pub struct Record {
    pub id: String,
    pub bundle: PathBuf,
    /// The container's process on the host: what the pid file names.
    pub pid: i32,
    /// Its start time (clock ticks after boot, /proc/PID/stat), so that
    /// another process given the same pid later is not taken for it.
    pub pid_start: u64,
    /// When it was created, RFC 3339.
    pub created: String,
    pub annotations: HashMap<String, String>,
    /// The spec's hooks, as they were at create.
    pub hooks: Option<oci_spec::runtime::Hooks>,
    /// The user that created it.
    pub owner: u32,
    /// For a pod's container: the id of the pod's sandbox container, whose
    /// sentry runs it.
    #[serde(default)]
    pub sandbox: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Creating,
    Created,
    Running,
    Stopped,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Stopped => "stopped",
        }
    }
}

/// The runtime's root directory of states (`--root`).
pub fn default_root() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/run/cordon");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("cordon"),
        None => std::env::temp_dir().join(format!("cordon-{}", rustix::process::geteuid().as_raw())),
    }
}

/// A container id as runc accepts them: letters, digits and `_+-.`, not
/// starting with a dot; so it names one entry of the root.
pub fn check_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 1024
        && !id.starts_with('.')
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_+-.".contains(&b));
    if !ok {
        bail!("invalid container id {id:?}");
    }
    Ok(())
}

/// A container's state directory.
pub struct StateDir {
    pub dir: PathBuf,
}

impl StateDir {
    pub fn of(root: &Path, id: &str) -> Result<StateDir> {
        check_id(id)?;
        Ok(StateDir { dir: root.join(id) })
    }

    /// Makes the directory (and the root), owner-only; an existing one is
    /// a container of that id.
    pub fn make(root: &Path, id: &str) -> Result<StateDir> {
        let sd = StateDir::of(root, id)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .with_context(|| format!("--root {}", root.display()))?;
        match std::fs::DirBuilder::new().mode(0o700).create(&sd.dir) {
            Ok(()) => Ok(sd),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!("container {id} already exists"),
            Err(e) => Err(e).with_context(|| format!("{}", sd.dir.display())),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The state directory of container `id` beside this one (under the
    /// same root).
    pub fn sibling(&self, id: &str) -> Result<StateDir> {
        check_id(id)?;
        Ok(StateDir { dir: self.dir.with_file_name(id) })
    }

    /// Where `record`'s container is served: the state directory whose
    /// control socket reaches its sentry (its pod's sandbox's, for a pod's
    /// container), and the container's name in that sentry (None for the
    /// sentry's first container).
    pub fn served_at(&self, record: &Record) -> Result<(StateDir, Option<String>)> {
        match &record.sandbox {
            Some(sandbox) => Ok((self.sibling(sandbox)?, Some(record.id.clone()))),
            None => Ok((StateDir { dir: self.dir.clone() }, None)),
        }
    }

    /// Runs `f` with a path to the control socket short enough for a
    /// socket address: engines' state roots and 64-character ids make the
    /// full path longer than `sun_path`, so it is then reached through the
    /// directory's descriptor in /proc/self/fd.
    pub fn with_socket_path<R>(&self, f: impl FnOnce(&Path) -> std::io::Result<R>) -> Result<R> {
        let full = self.path(SOCKET);
        // sun_path's 108 bytes, one kept for the terminating NUL.
        if full.as_os_str().len() < 108 {
            return f(&full).context("the container's control socket");
        }
        let dir = rustix::fs::open(
            &self.dir,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .with_context(|| format!("{}", self.dir.display()))?;
        let short = PathBuf::from(format!("/proc/self/fd/{}/{SOCKET}", dir.as_raw_fd()));
        let r = f(&short).context("the container's control socket");
        drop(dir);
        r
    }

    /// The record of an existing container.
    pub fn load(&self) -> Result<Record> {
        let id = self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = match std::fs::read(self.path(STATE_FILE)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("container {id} does not exist"),
            Err(e) => return Err(e).with_context(|| format!("{}", self.path(STATE_FILE).display())),
        };
        serde_json::from_slice(&text).with_context(|| format!("{}", self.path(STATE_FILE).display()))
    }

    /// Writes the record whole or not at all.
    pub fn save(&self, record: &Record) -> Result<()> {
        let tmp = self.path(".state.json");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("{}", tmp.display()))?;
        std::io::Write::write_all(&mut f, &serde_json::to_vec(record)?)?;
        std::fs::rename(&tmp, self.path(STATE_FILE)).with_context(|| format!("{}", tmp.display()))?;
        Ok(())
    }

    pub fn status(&self, record: &Record) -> Status {
        if !process_is(record.pid, record.pid_start) {
            Status::Stopped
        } else if self.path(CREATED).exists() {
            Status::Created
        } else {
            Status::Running
        }
    }

    pub fn remove(&self) -> Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("{}", self.dir.display()))
            }
            _ => Ok(()),
        }
    }

    /// The spec's state of the container, as `state` prints it and hooks
    /// read it.
    pub fn oci_state(&self, record: &Record, status: Status) -> serde_json::Value {
        let mut v = serde_json::json!({
            "ociVersion": oci_spec::runtime::VERSION,
            "id": record.id,
            "status": status.name(),
            "pid": if status == Status::Stopped { 0 } else { record.pid },
            "bundle": record.bundle,
        });
        if !record.annotations.is_empty() {
            v["annotations"] = serde_json::json!(record.annotations);
        }
        v
    }
}

/// Every container id under `root`.
pub fn ids(root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join(STATE_FILE).exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    ids.sort();
    ids
}

/// The start time of live process `pid` (not a zombie), from
/// /proc/PID/stat.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name, which may hold anything but ends at the
    // last ')': the state, then fields 4 on; the start time is field 22.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z" | &"X" | &"x")) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// True if `pid` is the live process that started at `started`.
pub fn process_is(pid: i32, started: u64) -> bool {
    pid > 0 && start_time(pid) == Some(started)
}

/// Now, as RFC 3339 in UTC.
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z", rem / 3600, rem % 3600 / 60, rem % 60, now.subsec_nanos())
}

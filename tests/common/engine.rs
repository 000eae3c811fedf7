//! What the container engine tests (docker, podman) share: finding their
//! tools, private directories they leave nothing in, the image's root, and
//! a pty to drive `-it` through.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Far longer than any step takes: reaching it means a hang.
pub const LIMIT: Duration = Duration::from_secs(180);

/// The image the engine tests import and run.
pub const IMAGE: &str = "cordon-test:py";

/// Where a program must be for the tests to run; a missing one fails
/// under `CORDON_REQUIRE_KVM=1` and skips otherwise.
pub fn tools_present(tools: &[&str]) -> bool {
    let missing: Vec<&&str> = tools.iter().filter(|t| which(t).is_none()).collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("missing {missing:?} (scripts/install-deps installs them)");
    if std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1") {
        panic!("{why}");
    }
    eprintln!("skipping: {why}");
    false
}

pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&format!("{path}:/usr/sbin:/sbin"))
        .map(|d| d.join(tool))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

/// A directory under /var/tmp (dockerd's overlay2 needs a file system
/// that is not itself an overlay, and socket paths must stay short).
pub fn private_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/var/tmp/cordon-{name}-{}", std::process::id()));
    cleanup_dir(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Unmounts whatever is mounted under `dir` (deepest first) and removes it.
pub fn cleanup_dir(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut under: Vec<String> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| Path::new(m).starts_with(dir))
        .map(str::to_string)
        .collect();
    under.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in under {
        let _ = rustix::mount::unmount(m.as_str(), rustix::mount::UnmountFlags::DETACH);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The image's root as a tar archive: busybox (static) as /bin's tools,
/// and the host's python3 with the libraries it links and its standard
/// library (without its tests). Built once per test process.
pub fn image_tar() -> &'static Path {
    static TAR: OnceLock<PathBuf> = OnceLock::new();
    TAR.get_or_init(|| {
        let dir = super::scratch_dir("docker-image");
        let root = dir.join("rootfs");
        for d in ["bin", "usr/bin", "usr/lib", "etc", "tmp", "proc", "sys", "dev", "lib64", "lib/x86_64-linux-gnu"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let busybox = which("busybox").expect("busybox");
        std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
        for tool in ["sh", "true", "echo", "cat", "ls", "sleep", "id", "ps", "seq", "wc", "hostname", "tr", "tty"] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(tool)).unwrap();
        }
        let python = std::fs::canonicalize("/usr/bin/python3").expect("/usr/bin/python3");
        std::fs::copy(&python, root.join("usr/bin/python3")).unwrap();
        let ldd = Command::new("ldd").arg(&python).output().expect("ldd");
        for lib in String::from_utf8_lossy(&ldd.stdout).split_whitespace().filter(|w| w.starts_with('/')) {
            let real = std::fs::canonicalize(lib).unwrap();
            std::fs::copy(real, root.join(&lib[1..])).unwrap();
        }
        let stdlib = Command::new(&python)
            .args(["-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"])
            .output()
            .expect("python3");
        let stdlib = String::from_utf8(stdlib.stdout).unwrap().trim().to_string();
        let st = Command::new("cp").arg("-a").arg(&stdlib).arg(root.join("usr/lib")).status().unwrap();
        assert!(st.success(), "copying {stdlib}");
        let copied = root.join("usr/lib").join(Path::new(&stdlib).file_name().unwrap());
        for extra in ["test", "site-packages", "dist-packages"] {
            let _ = std::fs::remove_dir_all(copied.join(extra));
        }
        let tar = dir.join("image.tar");
        let st = Command::new("tar").arg("-C").arg(&root).arg("-cf").arg(&tar).arg(".").status().unwrap();
        assert!(st.success(), "tar of the image's root");
        tar
    })
}

/// A fresh pty: (master, slave).
pub fn pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    let ws = libc::winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes the two descriptors it opens; the name may be
    // null; ws is a valid winsize.
    let r = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are ours alone.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Reads the terminal until `marker` appears past what was seen before.
pub fn expect(master: &mut std::fs::File, seen: &mut Vec<u8>, marker: &str, what: &str) {
    let start = seen.len();
    let deadline = Instant::now() + LIMIT;
    while !seen[start..].windows(marker.len()).any(|w| w == marker.as_bytes()) {
        assert!(
            Instant::now() < deadline,
            "{what}: no {marker:?}; the terminal showed:\n{}",
            String::from_utf8_lossy(seen)
        );
        let mut pfd = libc::pollfd { fd: master.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: polls one descriptor we own.
        if unsafe { libc::poll(&mut pfd, 1, 1000) } <= 0 {
            continue;
        }
        let mut buf = [0u8; 4096];
        match std::io::Read::read(master, &mut buf) {
            Ok(0) | Err(_) => panic!("{what}: the terminal closed; it showed:\n{}", String::from_utf8_lossy(seen)),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// An engine's command line (docker's, podman's) pointed at the test's own
/// daemon or store.
pub trait Cli {
    /// The program, for messages.
    fn name(&self) -> &str;
    /// `ENGINE ARGS` against the test's engine, stdin closed.
    fn cmd(&self, args: &[&str]) -> Command;

    fn output(&self, args: &[&str]) -> Output {
        let child = self
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.name()));
        super::finish_within(child, LIMIT, &format!("{} {args:?}", self.name()))
    }

    /// Runs `ENGINE ARGS`, which must succeed.
    fn ok(&self, args: &[&str]) -> Output {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "{} {args:?}: {:?}\n{}{}",
            self.name(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn text(&self, args: &[&str]) -> String {
        String::from_utf8(self.ok(args).stdout).unwrap()
    }

    /// Polls `ENGINE logs NAME` until it shows `what`.
    fn wait_for_log(&self, name: &str, what: &str) {
        let deadline = Instant::now() + LIMIT;
        loop {
            let out = self.output(&["logs", name]);
            if String::from_utf8_lossy(&out.stdout).contains(what) {
                return;
            }
            assert!(Instant::now() < deadline, "{name} never logged {what:?}:\n{out:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Kills every process whose command line names `dir`: what an engine
/// started there and left running (shims and conmon are daemons of their
/// own).
pub fn kill_processes_naming(dir: &Path) {
    let dir = dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&dir)
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

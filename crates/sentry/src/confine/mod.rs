//! The sentry confines itself before any application code runs.
//!
//! `cordon run` starts as the caller's own process. [`isolate`] makes fresh
//! namespaces and forks: the parent stays behind as the *monitor*, a small
//! process that only passes signals on and reports how the sentry ended
//! (it gives up every privilege at once: root's monitor becomes nobody
//! with no capability); the child is the sentry, the first process of its
//! own PID namespace.
//! The sentry builds the sandbox while it still has the caller's rights
//! (it opens the KVM device, the memory file and the served root), then
//! [`Isolation::lock_down`] takes them away for good:
//!
//! - namespaces: user (only for a caller who is not root: it maps the
//!   caller's ids to themselves, so the sentry keeps them), mount, PID,
//!   network (but with `--network=host`), IPC and UTS. A kind the host
//!   refuses is done without, with one debug line (`RUST_LOG=debug`); the
//!   run goes on. Published ports' listeners are made before, in the
//!   host's network namespace, where they stay.
//! - a root of its own: a read-only tmpfs holding only `/rootfs`, a
//!   read-only (`nosuid`, `nodev`) copy of the served root's mount tree,
//!   `/binds/N`, a `nosuid`, `nodev` copy of each bind mount's source,
//!   read-only unless the bind is writable, `/proc`, the PID namespace's
//!   own procfs, read-only (host files are reopened through
//!   `/proc/self/fd`, which a read-only procfs still allows: the file
//!   reached is on its own mount), and a read-only copy of cordon's own
//!   executable at its path (a sentry bug's backtrace reads its function
//!   names there). The old root is detached; `..` from the
//!   served root leads only to that empty tmpfs. The KVM device and the
//!   memory file need no path: their descriptors are open by then.
//! - identity: run by root, the sentry becomes uid/gid 65534 (nobody) with
//!   no supplementary groups and keeps one capability, `CAP_DAC_READ_SEARCH`,
//!   so that a sandbox of root's can still read what root can read (a
//!   0600 file, a 0700 directory) of the read-only root it serves. That
//!   capability is also what `open_by_handle_at` needs to open any file of
//!   a file system by handle, past every root: the seccomp filter forbids
//!   that call (and `name_to_handle_at`). With a writable bind mount, root
//!   keeps root's *file-system* identity (fsuid and fsgid 0; the real and
//!   effective ids are still nobody's) and `CAP_DAC_OVERRIDE`,
//!   `CAP_FOWNER` and `CAP_CHOWN`: the sandbox's root writes in the bind
//!   what the caller could, and what it makes there belongs to root, as
//!   the caller's own files would. That reaches no further than the
//!   sentry's root does: everything in it but the writable binds is on a
//!   read-only mount (procfs included, so no sysctl either), and the
//!   seccomp filter still forbids every call that could reach another
//!   process or mount. A caller who is not root keeps its ids and holds
//!   no capability at all: it writes where it could outside. The bounding
//!   and ambient sets are emptied either way, and the sentry is not
//!   dumpable (no other process of its uid may ptrace it or read its
//!   memory). With `--network=host`, root's sentry keeps
//!   `CAP_NET_BIND_SERVICE` too: the sandbox's root may listen on a
//!   privileged port of the host, as root could.
//! - `PR_SET_NO_NEW_PRIVS`, and the seccomp allow-list of [`seccomp`]
//!   whose default action kills the sentry.
//!
//! The application's ids inside the sandbox are the caller's, captured
//! before any of this (see `SandboxConfig`); nothing here changes them.
//!
//! Descriptors: [`close_inherited_descriptors`] closes everything but
//! stdin, stdout and stderr first thing, so no descriptor a caller leaves
//! open reaches the monitor, the sentry or the application.

pub mod seccomp;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags,
    UnmountFlags,
};
use rustix::thread::{CapabilitySet, CapabilitySets, UnshareFlags};

/// The host identity a sentry started by root runs as: the traditional
/// `nobody`.
pub const UNPRIVILEGED_ID: u32 = 65534;

/// Where the served root appears in the sentry's own root.
const SERVED_ROOT: &str = "rootfs";

/// Where the sources of bind mounts (`-v`) appear in the sentry's own
/// root, numbered in command-line order.
const SERVED_BINDS: &str = "binds";

/// The source of a bind mount (`-v`), as the confinement needs it.
pub struct BindSource<'a> {
    pub path: &'a Path,
    /// The sandbox may write below it.
    pub writable: bool,
}

/// Why the sentry could not be confined.
#[derive(Debug, thiserror::Error)]
#[error("cannot confine the sentry: {what}: {err}")]
pub struct ConfineError {
    what: &'static str,
    err: std::io::Error,
}

fn failed<E: Into<std::io::Error>>(what: &'static str) -> impl FnOnce(E) -> ConfineError {
    move |e| ConfineError { what, err: e.into() }
}

/// Closes every descriptor above stderr. Called first thing, while
/// nothing of cordon's own is open yet.
pub fn close_inherited_descriptors() {
    // SAFETY: close_range only closes descriptors; none above 2 is in use
    // by anything of this process yet (this runs before any is opened).
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    if r != 0 {
        // Kernels before 5.9: close them one by one.
        // SAFETY: sysconf has no preconditions.
        let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(1024, 1 << 20) as i32;
        for fd in 3..max {
            // SAFETY: as above; closing a descriptor that is not open fails
            // harmlessly.
            unsafe { libc::close(fd) };
        }
    }
}

/// Which side of the fork the caller of [`isolate`] is on.
pub enum Role<T> {
    /// The monitor, once the sentry has ended: cordon exits with this
    /// status.
    Monitor(u8),
    /// The sentry, to build the sandbox and then [`Isolation::lock_down`],
    /// with what [`isolate`] was given for the sentry alone.
    Sentry(Isolation, T),
}

/// What the sentry does on the host's network; see [`seccomp`] for the
/// calls each allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostNetwork {
    /// Nothing: the sentry has a network namespace of its own, empty, and
    /// makes no socket.
    None,
    /// Published ports (`-p`): listening host sockets made before
    /// [`isolate`], which stay in the host's namespace, and the
    /// connections they accept. The sentry makes no socket itself.
    Published,
    /// `--network=host`: the sentry keeps the host's network namespace
    /// and makes TCP and UDP sockets there for the sandbox.
    Host,
}

/// The sentry's side of the confinement, between [`isolate`] and
/// [`Isolation::lock_down`].
pub struct Isolation {
    /// The host identity the sentry started with was root's.
    root: bool,
    /// The sentry has a user namespace of its own.
    user_ns: bool,
    /// The sentry's future root, a detached tmpfs holding the served root
    /// (None without a mount namespace).
    new_root: Option<OwnedFd>,
    /// `/proc` is the sentry's PID namespace's own procfs.
    own_proc: bool,
    /// A bind mount is writable: the sentry changes host files.
    writable_binds: bool,
    /// What the sentry does on the host's network.
    network: HostNetwork,
    /// The sentry serves a control socket (see `sentry::control`).
    control_socket: bool,
    /// The sentry's own root was built: all it holds is read-only but the
    /// writable binds.
    private_root: bool,
    /// Signals passed on by the monitor, one byte (the number) each; end
    /// of file when the monitor is gone.
    from_monitor: Option<OwnedFd>,
}

/// Makes the namespaces and forks the monitor off (see the module's
/// documentation). `rootfs` is the host directory the sandbox will serve;
/// `network` says whether the sentry keeps the host's network namespace
/// (only for `--network=host`); `sentry_only` is what the sentry alone
/// keeps (published ports' listeners): the monitor lets it go at once.
/// Must be called while the process has a single thread.
pub fn isolate<T>(
    rootfs: &Path,
    binds: &[BindSource],
    network: HostNetwork,
    sentry_only: T,
) -> Result<Role<T>, ConfineError> {
    let root = rustix::process::geteuid().is_root();
    // Blocked before the fork: the monitor waits for these, and the sentry
    // (the first process of a PID namespace, which drops signals it does
    // not handle or block) takes them from a signalfd.
    crate::sandbox::block_forwarded_signals();
    block(libc::SIGCHLD);

    let mut missing = Vec::new();
    let user_ns = !root && enter_user_namespace().map_err(|e| missing.push(("user", e))).is_ok();
    let mut made = |flag: UnshareFlags, name: &'static str| {
        // SAFETY: the process has one thread, and nothing in it depends on
        // the namespaces it leaves.
        match unsafe { rustix::thread::unshare_unsafe(flag) } {
            Ok(()) => true,
            Err(e) => {
                missing.push((name, e.into()));
                false
            }
        }
    };
    let mount_ns = made(UnshareFlags::NEWNS, "mount");
    let pid_ns = made(UnshareFlags::NEWPID, "PID");
    // Host sockets are made in the namespace the sentry is in when it
    // makes them: only `--network=host` needs the host's.
    if network != HostNetwork::Host {
        made(UnshareFlags::NEWNET, "network");
    }
    made(UnshareFlags::NEWIPC, "IPC");
    made(UnshareFlags::NEWUTS, "UTS");
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|(n, e)| format!("{n} ({e})")).collect();
        tracing::debug!("the sentry runs without these namespaces, which the host refused: {}", list.join(", "));
    }

    let (from_monitor, to_sentry) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(failed("a pipe to the sentry"))?;
    // SAFETY: the process has one thread, so the child starts with a
    // consistent copy of everything (no lock is held by another thread).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(ConfineError { what: "fork", err: std::io::Error::last_os_error() });
    }
    if pid > 0 {
        drop(from_monitor);
        drop(sentry_only);
        // The monitor needs no right at all: it waits, reads signals and
        // writes to a pipe.
        if let Err(e) = give_up_privileges(root, user_ns, CapabilitySet::empty(), false)
            .and_then(|()| rustix::thread::set_no_new_privs(true).map_err(failed("PR_SET_NO_NEW_PRIVS")))
        {
            tracing::debug!("the monitor keeps its privileges: {e}");
        }
        return Ok(Role::Monitor(monitor(pid, to_sentry)));
    }
    drop(to_sentry);
    die_with_monitor(&from_monitor);

    let mut isolation = Isolation {
        root,
        user_ns,
        new_root: None,
        own_proc: false,
        writable_binds: binds.iter().any(|b| b.writable),
        network,
        control_socket: false,
        private_root: false,
        from_monitor: Some(from_monitor),
    };
    // A host that cannot build the root (a kernel without the mount API's
    // detached trees, say) leaves the sentry on the host's, read-only
    // root as before.
    if mount_ns && let Err(e) = isolation.prepare_root(rootfs, binds, pid_ns) {
        tracing::debug!("the sentry keeps the host's root: {e}");
    }
    Ok(Role::Sentry(isolation, sentry_only))
}

/// Blocks `sig` in the calling thread (and the threads it makes later).
fn block(sig: i32) {
    // SAFETY: sigemptyset/sigaddset fill a local set; pthread_sigmask only
    // changes the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// A user namespace in which the caller's uid and gid map to themselves:
/// the sentry keeps its ids and gains capabilities only over its own
/// namespaces.
fn enter_user_namespace() -> std::io::Result<()> {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    // SAFETY: the process has one thread (unshare would refuse otherwise).
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER) }?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    // An unprivileged process may map its gid only once it gives up
    // setgroups (which could drop a group that denies it access).
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// The sentry dies with the monitor: killing cordon (even with SIGKILL)
/// ends the sandbox. Also checks the monitor did not die before this was
/// set.
fn die_with_monitor(from_monitor: &OwnedFd) {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let mut fds = [rustix::event::PollFd::new(from_monitor, rustix::event::PollFlags::IN)];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    if rustix::event::poll(&mut fds, Some(&zero)).is_ok() && fds[0].revents().contains(rustix::event::PollFlags::HUP) {
        // SAFETY: ends this process only; nothing of the sandbox exists yet.
        unsafe { libc::_exit(crate::internal_error::EXIT_STATUS) };
    }
}

/// Mounts a read-only copy of the host file `path` at the same path under
/// `root`, making the directories on the way.
fn expose_file(root: &OwnedFd, path: &Path) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let (Some(parent), Some(name)) = (path.strip_prefix("/").ok().and_then(Path::parent), path.file_name()) else {
        return Err(std::io::Error::other(format!("{}: not an absolute path to a file", path.display())));
    };
    let mut dir = rustix::io::dup(root)?;
    for part in parent.components() {
        match rustix::fs::mkdirat(&dir, part.as_os_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = rustix::fs::openat(
            &dir,
            part.as_os_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
    }
    drop(rustix::fs::openat(
        &dir,
        name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?);
    let file = rustix::mount::open_tree(
        rustix::fs::CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )?;
    mount_setattr(
        &file,
        MountAttrFlags::MOUNT_ATTR_RDONLY | MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
        false,
    )?;
    Ok(rustix::mount::move_mount(&file, "", &dir, name, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)?)
}

/// A detached copy of the whole mount tree at `path`, with no device or
/// set-id files, read-only unless `writable` (even for a sentry with
/// capabilities): what a sentry serves of a host directory. Needs
/// CAP_SYS_ADMIN over the caller's mount namespace.
pub fn served_copy(path: &Path, writable: bool) -> std::io::Result<OwnedFd> {
    let tree = rustix::mount::open_tree(
        rustix::fs::CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_RECURSIVE,
    )?;
    let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
    if !writable {
        attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
    }
    mount_setattr(&tree, attrs, true)?;
    Ok(tree)
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Sets mount attributes (`MOUNT_ATTR_*`) on the mount at `fd` (and, with
/// `recursive`, every mount below it).
fn mount_setattr(fd: &OwnedFd, set: MountAttrFlags, recursive: bool) -> std::io::Result<()> {
    let attr = MountAttr { attr_set: u64::from(set.bits()), attr_clr: 0, propagation: 0, userns_fd: 0 };
    let mut flags = libc::AT_EMPTY_PATH as u32;
    if recursive {
        flags |= libc::AT_RECURSIVE as u32;
    }
    // SAFETY: the path is an empty C string, attr a live mount_attr of the
    // size given; the kernel only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

impl Isolation {
    /// Builds the sentry's future root (not yet its root: the sandbox is
    /// built first, with the host's paths) and, in a PID namespace of its
    /// own, puts that namespace's procfs on `/proc`.
    fn prepare_root(&mut self, rootfs: &Path, binds: &[BindSource], pid_ns: bool) -> Result<(), ConfineError> {
        // Nothing mounted from here on reaches the host's mount table.
        rustix::mount::mount_change("/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)
            .map_err(failed("making the mount namespace private"))?;
        if pid_ns {
            // The host's /proc would show the host's processes; this one
            // shows only the sentry. Refused where the host's procfs is
            // partly hidden (a container's masked paths): then the host's.
            // Read-only: the sentry reads there and reopens files through
            // it, and never needs to write a procfs file (a sysctl).
            let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RDONLY;
            match rustix::mount::mount("proc", "/proc", "proc", flags, None) {
                Ok(()) => self.own_proc = true,
                Err(e) => tracing::debug!("the sentry keeps the host's /proc: mounting its own failed: {e}"),
            }
        }
        let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC).map_err(failed("tmpfs"))?;
        rustix::mount::fsconfig_set_string(&fs, "mode", "0755").map_err(failed("tmpfs"))?;
        rustix::mount::fsconfig_set_string(&fs, "size", "64k").map_err(failed("tmpfs"))?;
        rustix::mount::fsconfig_create(&fs).map_err(failed("tmpfs"))?;
        let attrs =
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV | MountAttrFlags::MOUNT_ATTR_NOEXEC;
        let new_root = rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, attrs).map_err(failed("tmpfs"))?;
        for dir in [SERVED_ROOT, SERVED_BINDS, "proc"] {
            rustix::fs::mkdirat(&new_root, dir, rustix::fs::Mode::from_raw_mode(0o755))
                .map_err(failed("the new root's directories"))?;
        }
        // A copy of the served root's whole mount tree, read-only.
        // (Not noexec: the sentry checks exec permission with faccessat.)
        let tree = served_copy(rootfs, false).map_err(failed("a read-only copy of the served root"))?;
        rustix::mount::move_mount(&tree, "", &new_root, SERVED_ROOT, MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)
            .map_err(failed("mounting the served root"))?;
        // Each bind source likewise, so that nothing the sandbox is shown
        // stays reachable only through the host's tree.
        let binds_dir = rustix::fs::openat(
            &new_root,
            SERVED_BINDS,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(failed("the new root's directories"))?;
        for (i, source) in binds.iter().enumerate() {
            let name = i.to_string();
            // Read-only binds stay so for the sentry itself, not only in
            // the sandbox's view.
            let tree = served_copy(source.path, source.writable).map_err(failed("a copy of a bind mount's source"))?;
            // A mount point of the source's kind: a directory, or an empty
            // file for a file.
            if source.path.is_dir() {
                rustix::fs::mkdirat(&binds_dir, name.as_str(), rustix::fs::Mode::from_raw_mode(0o755))
                    .map_err(failed("the new root's directories"))?;
            } else {
                let flags = rustix::fs::OFlags::CREATE | rustix::fs::OFlags::EXCL | rustix::fs::OFlags::WRONLY;
                rustix::fs::openat(&binds_dir, name.as_str(), flags | rustix::fs::OFlags::CLOEXEC, 0o644.into())
                    .map_err(failed("the new root's files"))?;
            }
            rustix::mount::move_mount(&tree, "", &binds_dir, name.as_str(), MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)
                .map_err(failed("mounting a bind mount's source"))?;
        }
        // The new root's /proc: another instance of the PID namespace's
        // procfs (the one on /proc goes with the host's tree), or a copy
        // of the host's.
        let proc = if self.own_proc {
            let fs = rustix::mount::fsopen("proc", FsOpenFlags::FSOPEN_CLOEXEC).map_err(failed("procfs"))?;
            rustix::mount::fsconfig_create(&fs).map_err(failed("procfs"))?;
            let proc_attrs = attrs | MountAttrFlags::MOUNT_ATTR_RDONLY;
            rustix::mount::fsmount(&fs, FsMountFlags::FSMOUNT_CLOEXEC, proc_attrs).map_err(failed("procfs"))?
        } else {
            // The host's /proc of this mount namespace, where host files
            // are reopened from: read-only from here on.
            let here = rustix::mount::open_tree(rustix::fs::CWD, "/proc", OpenTreeFlags::OPEN_TREE_CLOEXEC)
                .map_err(failed("/proc"))?;
            mount_setattr(&here, MountAttrFlags::MOUNT_ATTR_RDONLY, true).map_err(failed("making /proc read-only"))?;
            rustix::mount::open_tree(
                rustix::fs::CWD,
                "/proc",
                OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC | OpenTreeFlags::AT_RECURSIVE,
            )
            .map_err(failed("a copy of /proc"))?
        };
        rustix::mount::move_mount(&proc, "", &new_root, "proc", MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)
            .map_err(failed("mounting /proc"))?;
        // A sentry bug's backtrace (RUST_BACKTRACE) names functions from
        // cordon's own executable, found by the path it was started from.
        if let Err(e) = std::env::current_exe().and_then(|exe| expose_file(&new_root, &exe)) {
            tracing::debug!("backtraces of sentry bugs will show no function names: {e}");
        }
        mount_setattr(&new_root, MountAttrFlags::MOUNT_ATTR_RDONLY, false)
            .map_err(failed("making the new root read-only"))?;
        self.new_root = Some(new_root);
        self.private_root = true;
        Ok(())
    }

    /// Where the sandbox opens the served root `rootfs`: its copy in the
    /// sentry's future root (reached through that root's descriptor), or
    /// `rootfs` itself without a mount namespace.
    pub fn served_root(&self, rootfs: &Path) -> PathBuf {
        match &self.new_root {
            Some(fd) => PathBuf::from(format!("/proc/self/fd/{}/{SERVED_ROOT}", fd.as_raw_fd())),
            None => rootfs.to_path_buf(),
        }
    }

    /// Where the sandbox opens the source of the `index`th bind mount,
    /// `source`, as [`Isolation::served_root`] for the root.
    pub fn served_bind(&self, index: usize, source: &Path) -> PathBuf {
        match &self.new_root {
            Some(fd) => PathBuf::from(format!("/proc/self/fd/{}/{SERVED_BINDS}/{index}", fd.as_raw_fd())),
            None => source.to_path_buf(),
        }
    }

    /// The signals the monitor passes on (see `Sandbox::forward_signals_from`).
    /// The isolation keeps a copy, to check at [`Isolation::lock_down`]
    /// that the monitor is still there once the parent-death signal, which
    /// the change of identity clears, is set again.
    pub fn take_monitor_channel(&mut self) -> Option<OwnedFd> {
        self.from_monitor.as_ref().and_then(|fd| fd.try_clone().ok())
    }

    /// The sentry will serve a control socket made before [`isolate`]: its
    /// filter lets it accept connections and pass descriptors on them.
    pub fn serve_control_socket(&mut self) {
        self.control_socket = true;
    }

    /// Containers that join the sandbox later (a pod's) may bring writable
    /// bind mounts: the sentry is confined as for one of its own.
    pub fn expect_writable_binds(&mut self) {
        self.writable_binds = true;
    }

    /// Takes every right the sentry no longer needs, for good: its new root,
    /// then its identity and capabilities, then `PR_SET_NO_NEW_PRIVS` and
    /// the seccomp filter. Must be called while the process has a single
    /// thread (capabilities are per thread).
    pub fn lock_down(mut self) -> Result<(), ConfineError> {
        if let Some(new_root) = self.new_root.take() {
            self.enter_root(new_root)?;
        }
        self.drop_identity()?;
        rustix::thread::set_no_new_privs(true).map_err(failed("PR_SET_NO_NEW_PRIVS"))?;
        seccomp::install(self.writable_binds, self.network, self.control_socket)
            .map_err(|e| ConfineError { what: "installing the seccomp filter", err: e })?;
        Ok(())
    }

    /// Makes the new root the sentry's root; the host's tree is detached.
    fn enter_root(&self, new_root: OwnedFd) -> Result<(), ConfineError> {
        // pivot_root wants the new root attached somewhere; any directory
        // will do, and /proc exists on every host cordon runs on.
        rustix::mount::move_mount(&new_root, "", rustix::fs::CWD, "/proc", MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH)
            .map_err(failed("attaching the new root"))?;
        rustix::process::fchdir(&new_root).map_err(failed("entering the new root"))?;
        // The old root ends up stacked on the new one, at "."; detached,
        // the host's whole tree is out of reach.
        rustix::process::pivot_root(".", ".").map_err(failed("pivot_root"))?;
        rustix::mount::unmount(".", UnmountFlags::DETACH).map_err(failed("detaching the host's root"))?;
        rustix::process::chdir("/").map_err(failed("entering the new root"))?;
        Ok(())
    }

    /// Root becomes nobody with CAP_DAC_READ_SEARCH only, or with a
    /// writable bind, nobody with root's file-system identity and the
    /// capabilities to write as root; anyone else keeps its ids and holds
    /// no capability. See the module's documentation.
    fn drop_identity(&self) -> Result<(), ConfineError> {
        // Only within the root that bounds it: a sentry left on the host's
        // root keeps no right to write as root's.
        let root_writes = self.root && self.writable_binds && self.private_root;
        let mut keep = if root_writes {
            CapabilitySet::DAC_READ_SEARCH | CapabilitySet::DAC_OVERRIDE | CapabilitySet::FOWNER | CapabilitySet::CHOWN
        } else if self.root {
            CapabilitySet::DAC_READ_SEARCH
        } else {
            CapabilitySet::empty()
        };
        // On the host's network, the sandbox's root may listen on a
        // privileged port, as root could outside (the sentry asks the
        // caller's own capability first).
        if self.root && self.network == HostNetwork::Host {
            keep |= CapabilitySet::NET_BIND_SERVICE;
        }
        give_up_privileges(self.root, self.user_ns, keep, root_writes)?;
        // The change of ids cleared the parent-death signal.
        if let Some(from_monitor) = &self.from_monitor {
            die_with_monitor(from_monitor);
        }
        Ok(())
    }
}

/// Empties the bounding and ambient sets, makes `root` (the host's root
/// before this) nobody with no supplementary groups, keeping root's
/// file-system ids if `root_files`, keeps only the capabilities `keep`
/// (effective and permitted) and makes the process undumpable. `user_ns`:
/// the process has a user namespace of its own.
fn give_up_privileges(root: bool, user_ns: bool, keep: CapabilitySet, root_files: bool) -> Result<(), ConfineError> {
    // Needs CAP_SETPCAP: done while it is held (a caller who is not root,
    // without a user namespace, has none to give up).
    if root || user_ns {
        drop_bounding_set().map_err(failed("emptying the bounding set"))?;
    }
    rustix::thread::clear_ambient_capability_set().map_err(failed("emptying the ambient set"))?;
    if root {
        become_nobody(!keep.is_empty() || root_files)?;
        if root_files {
            keep_root_files()?;
        }
    }
    rustix::thread::set_capabilities(
        None,
        CapabilitySets { effective: keep, permitted: keep, inheritable: CapabilitySet::empty() },
    )
    .map_err(failed("dropping capabilities"))?;
    // A change of ids makes a process undumpable already; this covers the
    // caller who is not root too: no other process of its uid may ptrace
    // it or read its memory.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(failed("PR_SET_DUMPABLE"))?;
    Ok(())
}

/// Root becomes nobody, with no supplementary groups, keeping its
/// permitted capabilities if `keep_caps`. Root of a user namespace that
/// maps no uid 65534 or denies setgroups (a rootless container's) keeps
/// what it cannot change, with a debug line: it loses its capabilities all
/// the same.
fn become_nobody(keep_caps: bool) -> Result<(), ConfineError> {
    let mut kept = Vec::new();
    match rustix::thread::set_thread_groups(&[]) {
        Err(e @ rustix::io::Errno::PERM) => kept.push(format!("supplementary groups ({e})")),
        r => r.map_err(failed("dropping supplementary groups"))?,
    }
    let nobody_gid = rustix::process::Gid::from_raw(UNPRIVILEGED_ID);
    match rustix::thread::set_thread_res_gid(nobody_gid, nobody_gid, nobody_gid) {
        Err(e @ rustix::io::Errno::INVAL) => kept.push(format!("group id ({e})")),
        r => r.map_err(failed("changing the group id"))?,
    }
    // Changing uid from root clears every capability unless asked to keep
    // the permitted ones; those kept are chosen by the caller.
    rustix::thread::set_keep_capabilities(keep_caps).map_err(failed("PR_SET_KEEPCAPS"))?;
    let nobody_uid = rustix::process::Uid::from_raw(UNPRIVILEGED_ID);
    match rustix::thread::set_thread_res_uid(nobody_uid, nobody_uid, nobody_uid) {
        Err(e @ rustix::io::Errno::INVAL) => kept.push(format!("user id ({e})")),
        r => r.map_err(failed("changing the user id"))?,
    }
    rustix::thread::set_keep_capabilities(false).map_err(failed("PR_SET_KEEPCAPS"))?;
    if !kept.is_empty() {
        tracing::debug!("process {} keeps its {}", std::process::id(), kept.join(", "));
    }
    Ok(())
}

/// Gives back root's file-system ids (fsuid and fsgid 0) to a process that
/// became nobody keeping its permitted capabilities: files are then made
/// and checked as root's, while every other check sees nobody.
fn keep_root_files() -> Result<(), ConfineError> {
    let setid = CapabilitySet::SETUID | CapabilitySet::SETGID;
    let held = rustix::thread::capabilities(None).map_err(failed("reading capabilities"))?;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets { effective: setid, permitted: held.permitted, inheritable: CapabilitySet::empty() },
    )
    .map_err(failed("raising CAP_SETUID and CAP_SETGID"))?;
    // SAFETY: setfsgid and setfsuid change only the calling thread's
    // file-system ids (the sentry has one thread here).
    let (gid, uid) = unsafe {
        libc::setfsgid(0);
        libc::setfsuid(0);
        // Called with an invalid id, they change nothing and report the
        // current one.
        (libc::setfsgid(u32::MAX), libc::setfsuid(u32::MAX))
    };
    if gid != 0 || uid != 0 {
        return Err(ConfineError { what: "keeping root's file-system ids", err: std::io::Error::other("refused") });
    }
    Ok(())
}

/// Removes every capability from the bounding set: nothing the sentry
/// could ever exec (it never does) would regain one.
fn drop_bounding_set() -> std::io::Result<()> {
    for cap in 0.. {
        // SAFETY: PR_CAPBSET_DROP takes a capability number; past the last
        // one the kernel knows it fails with EINVAL, which ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            return if cap > 0 && e.raw_os_error() == Some(libc::EINVAL) { Ok(()) } else { Err(e) };
        }
    }
    Ok(())
}

/// The monitor: passes the signals cordon is sent on to the sentry
/// (`pid`) through `to_sentry`, until the sentry ends, and says how it
/// ended. A signal the terminal sends (Ctrl-C, a resize) reaches the
/// sentry itself, in the same process group, and is not passed on twice.
fn monitor(pid: libc::pid_t, to_sentry: OwnedFd) -> u8 {
    let mut set = crate::sandbox::forwarded_set();
    // SAFETY: adds to a set we own.
    unsafe { libc::sigaddset(&mut set, libc::SIGCHLD) };
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value to fill in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waits for a signal of `set`, all of them blocked in this
        // (single-threaded) process, and fills `info`, which we own.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig < 0 {
            continue;
        }
        if sig == libc::SIGCHLD {
            let mut status = 0;
            // SAFETY: waits for our own child without blocking; `status` is
            // ours to fill.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
                continue;
            }
            if libc::WIFEXITED(status) {
                return libc::WEXITSTATUS(status) as u8;
            }
            if libc::WIFSIGNALED(status) {
                return sentry_killed(libc::WTERMSIG(status));
            }
            continue;
        }
        if info.si_code == libc::SI_KERNEL {
            continue;
        }
        let _ = rustix::io::write(&to_sentry, &[sig as u8]);
    }
}

/// The sentry was killed by `sig`. SIGSYS is its seccomp filter at work: a
/// bug of cordon's, reported as one. Any other signal ends cordon the same
/// way, as if it had been sent to cordon itself.
fn sentry_killed(sig: i32) -> u8 {
    crate::internal_error::restore_terminals();
    if sig == libc::SIGSYS {
        crate::diag::line(format_args!(
            "cordon: internal error: the sentry made a host system call its seccomp filter forbids (killed by SIGSYS)"
        ));
        return crate::internal_error::EXIT_STATUS as u8;
    }
    // SAFETY: restores the default action of `sig`, keeps this process
    // from dumping core a second time and unblocks `sig` before raising it:
    // the process ends here, as the sentry did.
    unsafe {
        let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    (128 + sig) as u8
}

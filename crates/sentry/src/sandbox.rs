//! Starting a sandbox: platform, memory, file systems and the first process.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use memory::MemoryFile;
use platform::kvm::KvmPlatform;
use platform::trap::TrapPlatform;
use platform::{Platform, PlatformError, Registers};

use crate::fd::FdTable;
use crate::fs::dentry::MountFlags;
use crate::fs::host::HostFs;
use crate::fs::overlay::Overlay;
use crate::fs::stdio::HostStream;
use crate::fs::synthetic::SynthDir;
use crate::fs::tmpfs::Tmpfs;
use crate::fs::{Dentry, FileType, FsError, Lookup, Mount, OpenFile, OpenFlags, dev, proc, sys};
use crate::kernel::{Kernel, KernelConfig};
use crate::loader::{AuxFacts, LoadError};
use crate::mm::MemoryManager;
use crate::profile::{Report, Resources};
use crate::signal::{SigAction, SigHandlers, SigInfo, SigSet, code};
use crate::task::{
    Creds, ExitStatus, FsContext, INIT_PID, KernelProcSource, KernelSysSource, Rlimit, Task, TaskShared, ThreadGroup,
    all_cpus_mask, exec, run_task,
};
use crate::terminal::TerminalRelay;
use crate::tty::{Devpts, MasterFile};
use crate::vdso::{Clock, Vdso};

/// A host directory or file shown at a path of the sandbox (`-v`). Names
/// below it are resolved by the sentry, so nothing there leads back out to
/// the rest of the host: `..` at its top is the mount point's parent, and
/// symlinks resolve against the sandbox root. Writes, when allowed, go to
/// the host.
#[derive(Clone, Debug)]
pub struct Bind {
    pub host: PathBuf,
    /// Where the sentry opens `host`, when not at that path (a confined
    /// sentry reaches its own copy of it; see [`crate::confine`]).
    pub open_at: Option<PathBuf>,
    /// Absolute path inside the sandbox.
    pub at: Vec<u8>,
    /// The sandbox may only read it (`:ro`).
    pub read_only: bool,
}

/// What to run and how.
/// The platforms a sandbox can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformKind {
    /// A KVM guest whose page tables the sentry builds.
    Kvm,
    /// Host stub processes trapping system calls with seccomp.
    Trap,
}

#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Host directory that becomes `/`.
    pub rootfs: PathBuf,
    /// Serve the root as it is, read-only (EROFS on every change), instead
    /// of under an overlay whose changes stay in sandbox memory.
    pub read_only_root: bool,
    /// Where the sentry opens `rootfs`, when not at that path (a confined
    /// sentry reaches its own copy of it; see [`crate::confine`]).
    pub rootfs_open_at: Option<PathBuf>,
    /// The KVM device.
    pub kvm_device: PathBuf,
    /// The platform application code runs on.
    pub platform: PlatformKind,
    /// The program as the user named it.
    pub program: Vec<u8>,
    /// Arguments, the program name first.
    pub args: Vec<Vec<u8>>,
    /// Environment, as NAME=VALUE.
    pub env: Vec<Vec<u8>>,
    /// Working directory inside the sandbox.
    pub cwd: Vec<u8>,
    /// The first process's identity: the caller's, captured at start-up.
    pub creds: Creds,
    /// Paths of the root hidden from the program, where they exist: a
    /// directory shows as an empty read-only one, anything else as
    /// /dev/null, as OCI runtimes mask paths.
    pub masks: Vec<Vec<u8>>,
    /// Directories that must exist (the sandbox's HOME): made empty, in the
    /// sentry's view only, where the root lacks them.
    pub make_dirs: Vec<Vec<u8>>,
    /// Host directories and files mounted into the sandbox, after the
    /// masks: a bind over a masked path shows what the user chose.
    pub binds: Vec<Bind>,
    /// tmpfs mounts, made after the masks and before the binds.
    pub tmpfs: Vec<TmpfsSpec>,
    pub strace: bool,
    /// Rewrite system call sites where the platform gains from it.
    pub rewrite_sites: bool,
    /// Host name the sandbox reports.
    pub hostname: String,
    /// `--network`: loopback only, or the host's network.
    pub network: crate::net::NetworkMode,
    /// Bytes of memory the sandbox may use.
    pub memory: u64,
    /// vCPUs application code runs on at once (None: the platform's
    /// default).
    pub cpus: Option<u32>,
    /// Tasks (threads and processes) alive at once; a clone past it fails
    /// with EAGAIN. None: no limit.
    pub pids_limit: Option<u32>,
    /// Measure where time goes and report it at exit.
    pub profile: bool,
    /// For cordon's own tests: make a bug in the sentry on demand (see
    /// [`KernelConfig::test_panic_syscall`]).
    pub test_panic_syscall: bool,
    /// Give the program a sandbox pty as its standard descriptors and
    /// controlling terminal, relayed to the caller's (`-t`).
    pub terminal: bool,
    /// With `terminal`: relay what the caller types (`-i`).
    pub interactive: bool,
    /// The first process's file mode creation mask.
    pub umask: u32,
    /// Resource limits of the first process that differ from the default,
    /// by RLIMIT_* number.
    pub rlimits: Vec<(u32, Rlimit)>,
    /// The first process starts with `PR_SET_NO_NEW_PRIVS` set: no execve
    /// gains privileges.
    pub no_new_privs: bool,
    /// Signals the first process starts ignoring, and blocking: what the
    /// caller had, as execve keeps them (`nohup`, a shell's background
    /// job).
    pub ignored_signals: SigSet,
    pub blocked_signals: SigSet,
    /// The first process's /proc/self/oom_score_adj.
    pub oom_score_adj: i32,
    /// The file systems a container's configuration lays out, in place of
    /// the sentry's defaults and of `tmpfs` (None: the sentry's own /dev,
    /// /proc and /sys, then `tmpfs` and `binds`).
    pub container: Option<ContainerLayout>,
}

/// A container's file systems as its configuration (an OCI bundle's
/// `mounts`, `linux.devices` and `linux.readonlyPaths`) lays them out:
/// mounted in its order, each with its own flags, so that
/// /proc/self/mountinfo shows what runc's container shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerLayout {
    pub mounts: Vec<ContainerMount>,
    /// Device nodes made once the mounts are in place.
    pub devices: Vec<DeviceSpec>,
    /// Paths of the sandbox bound read-only over themselves, after the
    /// masks.
    pub read_only_paths: Vec<Vec<u8>>,
}

/// One mount of a container's configuration.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContainerMount {
    /// Absolute path inside the sandbox.
    pub at: Vec<u8>,
    /// What mountinfo shows as its source.
    pub source: String,
    pub kind: MountKind,
    /// ro, nosuid, nodev, noexec and the atime flags.
    pub flags: MountFlags,
}

/// What a container's mount is.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MountKind {
    /// A tmpfs of the sandbox's memory.
    Tmpfs {
        size: Option<u64>,
        mode: u32,
    },
    /// The `binds` entry of this index.
    Bind(usize),
    Proc,
    Sysfs,
    /// The sandbox's cgroup hierarchy (as cgroup2).
    Cgroup,
    /// A tmpfs at /dev holding the devices and links runc gives a container.
    Dev {
        size: Option<u64>,
        mode: u32,
    },
    /// The sandbox's ptys, with a `ptmx` of these permissions.
    Devpts {
        ptmx_mode: u32,
    },
    /// The POSIX message queues of the sandbox's IPC namespace.
    Mqueue,
}

/// A device node to make (`linux.devices`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceSpec {
    pub path: Vec<u8>,
    /// The S_IF* type and the permission bits.
    pub mode: u32,
    pub rdev: u64,
    pub uid: u32,
    pub gid: u32,
}

impl SandboxConfig {
    /// The configuration as the confined sentry opens it: the root and the
    /// bind mounts' sources through the copies `isolation` serves.
    pub fn served_by(self, isolation: &crate::confine::Isolation) -> SandboxConfig {
        let binds = self
            .binds
            .iter()
            .enumerate()
            .map(|(i, b)| Bind { open_at: Some(isolation.served_bind(i, &b.host)), ..b.clone() })
            .collect();
        SandboxConfig { rootfs_open_at: Some(isolation.served_root(&self.rootfs)), binds, ..self }
    }
}

/// Why a sandbox could not run the program.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    NotExecutable(String),
    #[error("{0}")]
    Platform(#[from] PlatformError),
    #[error("{0}")]
    Setup(String),
}

impl SandboxError {
    /// The exit status a shell would give: 127 not found, 126 not
    /// executable, 125 for a sandbox that cannot start.
    pub fn exit_code(&self) -> i32 {
        match self {
            SandboxError::NotFound(_) => 127,
            SandboxError::NotExecutable(_) => 126,
            SandboxError::Platform(_) | SandboxError::Setup(_) => 125,
        }
    }
}

const DEFAULT_PATH: &[u8] = b"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The value of NAME in an environment.
fn env_value<'a>(env: &'a [Vec<u8>], name: &[u8]) -> Option<&'a [u8]> {
    env.iter().find_map(|e| e.strip_prefix(name).and_then(|r| r.strip_prefix(b"=")))
}

/// A tmpfs to mount: where, its size limit beyond the sandbox's memory,
/// and the mode of its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmpfsSpec {
    pub at: Vec<u8>,
    pub size: Option<u64>,
    pub mode: u32,
}

/// A running sandbox's kernel with its first task, not yet started.
pub struct Sandbox {
    pub kernel: Arc<Kernel>,
    init: Task,
    profile: bool,
    resources_at_start: Resources,
    /// The real user id signals forwarded from outside are sent as.
    outside_uid: u32,
    /// Signals passed on by cordon's monitor process, if there is one.
    from_monitor: Option<OwnedFd>,
    /// The program's terminal, with `-t`.
    terminal: Option<Terminal>,
    /// The sandbox's ptys, for the terminals of processes started later.
    devpts: Arc<Devpts>,
    /// Bytes of memory it may use.
    memory: u64,
}

/// A sandbox pty wired to the caller's terminal.
struct Terminal {
    master: Arc<MasterFile>,
    /// The caller's terminal, read with `-i`.
    input: Option<OwnedFd>,
    /// Where the sandbox's terminal output goes (the caller's stdout).
    output: OwnedFd,
    /// The caller's descriptor that is a terminal, whose window size the
    /// pty follows.
    sized_by: Option<OwnedFd>,
}

/// How a sandbox run ended.
pub struct Outcome {
    pub status: ExitStatus,
    /// The profile, when asked for.
    pub report: Option<Report>,
}

fn host_fd_flags(fd: &OwnedFd) -> OpenFlags {
    let fl = rustix::fs::fcntl_getfl(fd).map(|f| f.bits()).unwrap_or(linux_raw_sys::general::O_RDWR);
    OpenFlags::from_bits_retain(fl) & (OpenFlags::WRONLY | OpenFlags::RDWR | OpenFlags::APPEND | OpenFlags::NONBLOCK)
}

impl Sandbox {
    /// Builds the sandbox and loads the program; nothing runs yet.
    pub fn new(config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        // Signals for the sandbox are taken by the forwarder, never by a
        // sentry thread: block them before any thread starts.
        block_forwarded_signals();
        let mf = Arc::new(MemoryFile::new(config.memory).map_err(|e| SandboxError::Setup(e.to_string()))?);
        let platform: Arc<dyn Platform> = match config.platform {
            PlatformKind::Kvm => {
                let kvm = KvmPlatform::with_device(&config.kvm_device, mf.clone())?;
                if let Some(n) = config.cpus {
                    kvm.set_vcpu_limit(n);
                }
                Arc::new(kvm)
            }
            PlatformKind::Trap => Arc::new(TrapPlatform::new(mf.clone(), crate::confine::UNPRIVILEGED_ID)?),
        };
        let host = HostFs::new(mf.clone()).map_err(|e| SandboxError::Setup(format!("/proc/self/fd: {e}")))?;
        let root = host
            .open_tree(config.rootfs_open_at.as_ref().unwrap_or(&config.rootfs), false)
            .map_err(|e| SandboxError::Setup(format!("{}: {e}", config.rootfs.display())))?;
        let facts = AuxFacts {
            uid: config.creds.uid.real,
            euid: config.creds.uid.effective,
            gid: config.creds.gid.real,
            egid: config.creds.gid.effective,
            secure: false,
            hwcap: crate::arch::hwcap(),
            hwcap2: 0,
            min_signal_stack: crate::arch::min_signal_stack(),
            clock_ticks: 100,
            vdso: None,
        };
        let cpus = config.cpus.map_or_else(crate::task::host_cpus, |n| n as usize);
        let clock =
            Clock::new(mf.clone(), platform.clone(), cpus as u32).map_err(|e| SandboxError::Setup(e.to_string()))?;
        // adjtimex reports it; the confined sentry may not ask.
        crate::syscalls::capture_host_clock_state();
        let facts = AuxFacts {
            vdso: Some(Arc::new(Vdso::new(&mf, &clock).map_err(|e| SandboxError::Setup(e.to_string()))?)),
            ..facts
        };
        let root_mount = root_mount(&mf, root, config.read_only_root, &config.rootfs.display().to_string())?;
        let kernel = Kernel::new(
            platform,
            mf.clone(),
            root_mount,
            KernelConfig {
                rootfs: config.rootfs.clone(),
                strace: config.strace,
                rewrite_sites: config.rewrite_sites,
                hostname: config.hostname.clone(),
                cpus: config.cpus.map_or_else(crate::task::host_cpus, |n| n as usize),
                cpu_limit: config.cpus,
                boot_id: crate::task::random_bytes(),
                test_panic_syscall: config.test_panic_syscall,
                network: config.network,
            },
            facts,
            clock,
        );
        let devpts = Devpts::new(Arc::downgrade(&kernel));
        let devfs = dev::new_devfs(crate::tty::dev_entries(&devpts));
        let _ = kernel.devfs.set(devfs.clone());
        let _ = kernel.devpts.set(devpts.clone());
        let _ = kernel.hostfs.set(host.clone());
        let root = kernel.root.clone();
        own_file_systems(&kernel, &root, config.container.as_ref())?;
        let owner = (config.creds.uid.effective, config.creds.gid.effective);
        match &config.container {
            Some(layout) => {
                let tree = Tree { kernel: &kernel, root: &root, host: &host, owner };
                tree.container_views(layout, &config.binds, &config.masks)?
            }
            None => Self::mount_views(&kernel, &host, config)?,
        }
        if config.profile {
            kernel.stats.enable();
            kernel.platform.enable_timing();
        }
        kernel.procs.lock().unwrap().set_pids_limit(config.pids_limit.map(|n| n as usize));
        let resources_at_start = Resources::now(&kernel);
        let (init, terminal) = Self::first_task(&kernel, config, &devpts)?;
        Ok(Sandbox {
            kernel,
            init,
            profile: config.profile,
            resources_at_start,
            outside_uid: config.creds.uid.real,
            from_monitor: None,
            terminal,
            devpts,
            memory: config.memory,
        })
    }

    /// Applies the masks, the directories to make and the binds, in that
    /// order.
    fn mount_views(kernel: &Arc<Kernel>, host: &Arc<HostFs>, config: &SandboxConfig) -> Result<(), SandboxError> {
        let shown = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
        let owner = (config.creds.uid.effective, config.creds.gid.effective);
        let tree = Tree { kernel, root: &kernel.root, host, owner };
        tree.mask(&config.masks, &config.make_dirs)?;
        for path in &config.make_dirs {
            let place = mount_point(kernel, &kernel.root, path, true)
                .map_err(|e| SandboxError::Setup(format!("{}: {e}", shown(path))))?;
            if let Some((dir, name, None)) = place {
                let home = Tmpfs::new_root(
                    kernel.mf.clone(),
                    0o755,
                    config.creds.uid.effective,
                    config.creds.gid.effective,
                    None,
                );
                kernel.mounts.mount(&dir, &name, Mount::new("tmpfs", "tmpfs", false, home));
            }
        }
        for t in &config.tmpfs {
            let what = format!("--tmpfs {}", shown(&t.at));
            let Some((dir, name, existing)) = mount_point(kernel, &kernel.root, &t.at, true)
                .map_err(|e| SandboxError::Setup(format!("{what}: {e}")))?
            else {
                continue;
            };
            if existing.is_some_and(|e| e.file_type() != FileType::Directory) {
                return Err(SandboxError::Setup(format!("{what}: {}", FsError::NotDirectory)));
            }
            // Owned by the sandbox's first user, as a runtime's tmpfs is by
            // the container's root.
            let root = Tmpfs::new_root(
                kernel.mf.clone(),
                t.mode,
                config.creds.uid.effective,
                config.creds.gid.effective,
                t.size,
            );
            kernel.mounts.mount(&dir, &name, Mount::new("tmpfs", "tmpfs", false, root));
        }
        for b in &config.binds {
            tree.bind(b, MountFlags::empty())?;
        }
        Ok(())
    }

    fn first_task(
        kernel: &Arc<Kernel>,
        config: &SandboxConfig,
        devpts: &Arc<Devpts>,
    ) -> Result<(Task, Option<Terminal>), SandboxError> {
        let root = kernel.root.clone();
        let cwd = {
            let r = crate::fs::Resolver {
                root: &root,
                cwd: &root,
                mounts: &kernel.mounts,
                creds: &config.creds,
                restrict: crate::fs::path::Restrict::empty(),
            };
            r.resolve(None, &config.cwd, Lookup { follow: true, directory: true }).map_err(|e| {
                SandboxError::Setup(format!("working directory {}: {e}", String::from_utf8_lossy(&config.cwd)))
            })?
        };
        let fs = Arc::new(Mutex::new(FsContext { root: root.clone(), cwd, umask: config.umask & 0o777 }));
        let files = Arc::new(FdTable::new(1024));
        let terminal = if config.terminal { Some(Self::terminal(kernel, config, devpts, &files)?) } else { None };
        for fd in (0..3).filter(|_| terminal.is_none()) {
            // SAFETY: borrowing the process's standard descriptor only to
            // duplicate it; a closed one fails the dup and is skipped.
            let host = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let Ok(dup) = rustix::io::fcntl_dupfd_cloexec(host.as_fd(), 3) else { continue };
            let flags = host_fd_flags(&dup);
            let f = OpenFile::new(Arc::new(HostStream::new(dup)), None, flags);
            files.install_at(fd, f, false).map_err(|e| SandboxError::Setup(e.to_string()))?;
        }
        let tid = kernel.allocate_tid();
        debug_assert_eq!(tid, INIT_PID);
        let mut dispositions = SigHandlers::default();
        for sig in (1..=crate::signal::NSIG as u32).filter(|s| config.ignored_signals.blockable().contains(*s)) {
            dispositions.set(sig, SigAction { handler: crate::signal::SIG_IGN, ..SigAction::default() });
        }
        let handlers = Arc::new(Mutex::new(dispositions));
        let tg = ThreadGroup::new(tid, handlers, 0, Default::default(), Arc::new(config.creds.clone()));
        for (resource, limit) in &config.rlimits {
            if let Some(slot) = tg.rlimits.lock().unwrap().0.get_mut(*resource as usize) {
                *slot = *limit;
            }
        }
        let shared = TaskShared::new(tid, tg.clone(), config.blocked_signals.blockable());
        *shared.affinity.lock().unwrap() = all_cpus_mask(kernel.config.cpus);
        // Set before the program is loaded: its execve gains nothing.
        shared.no_new_privs.store(config.no_new_privs, std::sync::atomic::Ordering::Relaxed);
        {
            let mut tree = kernel.procs.lock().unwrap();
            tree.add_process(&tg, None, tid, tid);
            tg.threads.lock().unwrap().push(shared.clone());
            tree.add_thread(&shared);
        }
        // The first process leads its session, with the pty as its
        // controlling terminal and its group in the foreground.
        if let Some(t) = &terminal {
            t.master.pty().set_session(tid, tid);
        }
        let mut task = fresh_task(kernel, shared, tg, fs, files)?;
        load_program(&mut task, &config.program, config.args.clone(), config.env.clone(), &config.creds)?;
        task.tg.info.lock().unwrap().oom_score_adj = config.oom_score_adj;
        Ok((task, terminal))
    }

    /// Makes the program's pty: its slave, at /dev/pts/N, becomes
    /// descriptors 0, 1 and 2; its window is the caller's terminal's size.
    fn terminal(
        kernel: &Arc<Kernel>,
        config: &SandboxConfig,
        devpts: &Arc<Devpts>,
        files: &FdTable,
    ) -> Result<Terminal, SandboxError> {
        let setup = |e: FsError| SandboxError::Setup(format!("a terminal for the program: {e}"));
        let master = devpts.open_master(config.creds.uid.fs).map_err(setup)?;
        let pty = master.pty().clone();
        pty.unlock();
        let path = format!("/dev/pts/{}", pty.index());
        let root = kernel.root.clone();
        let r = crate::fs::Resolver {
            root: &root,
            cwd: &root,
            mounts: &kernel.mounts,
            creds: &config.creds,
            restrict: crate::fs::path::Restrict::empty(),
        };
        let dentry = r.resolve(None, path.as_bytes(), Lookup::FOLLOW).map_err(setup)?;
        // A container's /dev has the terminal at /dev/console too, bound
        // over an empty file, as runc binds it.
        let container_dev = config
            .container
            .as_ref()
            .is_some_and(|l| l.mounts.iter().any(|m| matches!(m.kind, MountKind::Dev { .. }) && m.at == b"/dev"));
        if container_dev {
            let dev = r.resolve(None, b"/dev", Lookup::FOLLOW).map_err(setup)?;
            let ctx = crate::fs::Context::internal();
            let file = crate::fs::NewNode { mode: FileType::Regular.mode_bits() | 0o666, uid: 0, gid: 0, rdev: 0 };
            match dev.inode.create(&ctx, b"console", file) {
                Ok(_) | Err(FsError::Exists) => {}
                Err(e) => return Err(setup(e)),
            }
            kernel.mounts.mount(&dev, b"console", dentry.mount.bind_of(&dentry));
        }
        let slave = pty
            .open_slave(&crate::fs::Context::kernel(Arc::new(config.creds.clone())), OpenFlags::NOCTTY, None)
            .map_err(setup)?;
        let file = OpenFile::new(slave, Some(dentry), OpenFlags::RDWR | OpenFlags::LARGEFILE);
        for fd in 0..3 {
            files.install_at(fd, file.clone(), false).map_err(|e| SandboxError::Setup(e.to_string()))?;
        }
        let dup = |fd: i32| {
            // SAFETY: borrowing the process's standard descriptor only to
            // duplicate it.
            let host = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            rustix::io::fcntl_dupfd_cloexec(host, 3).ok()
        };
        let output = dup(1).ok_or_else(|| SandboxError::Setup("stdout: closed".into()))?;
        let sized_by = [0, 1]
            .into_iter()
            .find(|fd| {
                rustix::termios::isatty(
                    // SAFETY: as above, for the isatty check only.
                    unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) },
                )
            })
            .and_then(dup);
        if let Some(ws) = sized_by.as_ref().and_then(crate::terminal::window_size) {
            pty.set_window_size(ws);
        }
        let input = if config.interactive { dup(0) } else { None };
        Ok(Terminal { master, input, output, sized_by })
    }

    /// Takes the signals for the sandbox from cordon's monitor process,
    /// one byte (the signal's number) each, on `fd` (see
    /// [`crate::confine`]). Then only the signals a terminal sends are
    /// taken directly: others sent to the sentry's process group reach the
    /// monitor too, and are passed on once, by it.
    pub fn forward_signals_from(&mut self, fd: OwnedFd) {
        self.from_monitor = Some(fd);
    }

    /// Runs the program to completion: until the first process exits, when
    /// every other task is killed and every host thread joined. The
    /// sentry's first host threads start here.
    pub fn run(self) -> Outcome {
        self.run_with(None)
    }

    /// Runs as [`Sandbox::run`], but the first process starts only when
    /// told to on `control`, which also carries signals for the sandbox's
    /// processes (see [`crate::control`]): an OCI runtime's `start` and
    /// `kill`. A signal sent before the start is pending when the program
    /// starts, as for a process stopped before its first instruction;
    /// SIGKILL ends it unstarted.
    /// `socket`, a listening unix socket, is served for the requests of
    /// [`crate::control::Request`]: processes started inside, the list of
    /// processes, statistics, signals and shutdown.
    pub fn run_controlled(self, control: OwnedFd, socket: OwnedFd) -> Outcome {
        self.run_with(Some((control, socket)))
    }

    fn run_with(self, control: Option<(OwnedFd, OwnedFd)>) -> Outcome {
        let Sandbox { kernel, init, profile, resources_at_start, outside_uid, from_monitor, terminal, devpts, memory } =
            self;
        let started = std::time::Instant::now();
        kernel.start_services();
        // Made here, after the sentry gave up its rights (host threads
        // keep the identity of the thread that made them).
        let init_thread = kernel.new_task_thread(init.tid()).expect("a host thread for the first task");
        // With a terminal, a resize of the caller's resizes the program's
        // (which signals its foreground group) instead of being passed on.
        let resize = terminal.as_ref().map(|t| {
            let pty = t.master.pty().clone();
            let sized_by = t.sized_by.as_ref().and_then(|fd| fd.try_clone().ok());
            Box::new(move || {
                if let Some(ws) = sized_by.as_ref().and_then(crate::terminal::window_size) {
                    pty.set_window_size(ws);
                }
            }) as Box<dyn Fn() + Send>
        });
        let forwarder = Forwarder::start(kernel.clone(), outside_uid, from_monitor, resize);
        let relay = terminal.map(|t| TerminalRelay::start(t.master, t.input, t.output));
        let (controller, server) = match control {
            Some((fifo, socket)) => (
                Some(crate::control::Controller::start(kernel.clone(), outside_uid, fifo)),
                Some(crate::control::Server::start(kernel.clone(), devpts, outside_uid, memory, socket)),
            ),
            None => (None, None),
        };
        let start = controller.as_ref().map(|c| c.start_gate());
        let init_kernel = kernel.clone();
        init_thread.start(move || {
            // Without a start, the program never runs: it dies unstarted,
            // as a process killed before its first instruction.
            if let Some(gate) = start
                && !gate.wait()
            {
                let init_group = init_kernel.procs.lock().unwrap().group(INIT_PID);
                if let Some(tg) = init_group {
                    crate::task::send_to_group(&init_kernel, &tg, SigInfo::kernel(linux_raw_sys::general::SIGKILL));
                }
            }
            run_task(init)
        });
        let status = kernel.wait_init();
        // Containers that joined and never started end with the rest.
        if let Some(s) = &server {
            s.close();
        }
        kernel.shutdown();
        forwarder.stop();
        if let Some(c) = controller {
            c.stop();
        }
        if let Some(s) = server {
            s.stop();
        }
        if let Some(r) = relay {
            r.finish();
        }
        let report =
            profile.then(|| Report::collect(&kernel, started.elapsed(), resources_at_start, Resources::now(&kernel)));
        Outcome { status, report }
    }
}

/// A container's tree of mounts being laid out: its root, the host file
/// system its binds come from, and who owns the tmpfs mounts it makes.
#[derive(Clone, Copy)]
struct Tree<'a> {
    kernel: &'a Arc<Kernel>,
    root: &'a Arc<Dentry>,
    host: &'a Arc<HostFs>,
    owner: (u32, u32),
}

impl Tree<'_> {
    /// Mounts the host's `b.host` at `b.at`, with `flags` besides
    /// read-only.
    fn bind(&self, b: &Bind, flags: MountFlags) -> Result<(), SandboxError> {
        let Tree { kernel, root, host, .. } = *self;
        let shown = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
        let what = format!("-v {}:{}", b.host.display(), shown(&b.at));
        let inode = host
            .open_tree(b.open_at.as_ref().unwrap_or(&b.host), !b.read_only)
            .map_err(|e| SandboxError::Setup(format!("{what}: {e}")))?;
        let Some((dir, name, existing)) =
            mount_point(kernel, root, &b.at, true).map_err(|e| SandboxError::Setup(format!("{what}: {e}")))?
        else {
            return Ok(());
        };
        let is_dir = inode.file_type() == FileType::Directory;
        if let Some(e) = existing
            && (e.file_type() == FileType::Directory) != is_dir
        {
            let err = if is_dir { FsError::NotDirectory } else { FsError::IsDirectory };
            return Err(SandboxError::Setup(format!("{what}: {}: {err}", shown(&b.at))));
        }
        let root_path = std::os::unix::ffi::OsStrExt::as_bytes(b.host.as_os_str()).to_vec();
        let mount = Mount::new_subtree("hostfs", b.host.display().to_string(), b.read_only, inode, root_path);
        mount.set_flags(mount.flags() | flags);
        kernel.mounts.mount(&dir, &name, mount);
        Ok(())
    }

    /// Hides `masks`: a directory behind an empty tmpfs, anything else
    /// behind /dev/null, as OCI runtimes mask paths. A masked directory of
    /// `homes` is the owner's.
    fn mask(&self, masks: &[Vec<u8>], homes: &[Vec<u8>]) -> Result<(), SandboxError> {
        let Tree { kernel, root, .. } = *self;
        let shown = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
        for path in masks {
            let place = mount_point(kernel, root, path, false)
                .map_err(|e| SandboxError::Setup(format!("{}: {e}", shown(path))))?;
            if let Some((dir, name, Some(existing))) = place {
                let cover = if existing.file_type() == FileType::Directory {
                    // Hidden, but as writable as any directory of the root:
                    // an empty tmpfs, the user's own if it is the home.
                    let (uid, gid) = if homes.contains(path) { self.owner } else { (0, 0) };
                    Mount::new("tmpfs", "tmpfs", false, Tmpfs::new_root(kernel.mf.clone(), 0o755, uid, gid, None))
                } else {
                    Mount::new("devtmpfs", "masked", true, dev::null_device())
                };
                kernel.mounts.mount(&dir, &name, cover);
            }
        }
        Ok(())
    }

    /// A container's file systems: its mounts in their order, its devices,
    /// then the masks and the read-only paths, as runc lays them out.
    fn container_views(&self, layout: &ContainerLayout, binds: &[Bind], masks: &[Vec<u8>]) -> Result<(), SandboxError> {
        let Tree { kernel, root, .. } = *self;
        let shown = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
        let has_cgroup = layout.mounts.iter().any(|m| m.kind == MountKind::Cgroup);
        for m in &layout.mounts {
            let err = |e: FsError| SandboxError::Setup(format!("mount at {}: {e}", shown(&m.at)));
            let mount = |fs_type: &'static str, root: Arc<dyn crate::fs::Inode>, options: String| {
                let mount = Mount::new(fs_type, m.source.clone(), false, root);
                mount.set_flags(m.flags);
                mount.sb.set_options(options);
                mount
            };
            match &m.kind {
                MountKind::Bind(i) => {
                    let b = binds.get(*i).ok_or_else(|| err(FsError::Invalid))?;
                    self.bind(b, m.flags)?;
                }
                MountKind::Tmpfs { size, mode } => {
                    // Owned by the container's first user, as runc's
                    // tmpfs mounts are by the container's root.
                    let (uid, gid) = self.owner;
                    let fs = Tmpfs::new_root(kernel.mf.clone(), *mode, uid, gid, *size);
                    mount_at(kernel, root, &m.at, mount("tmpfs", fs, tmpfs_options(*size, *mode)))?;
                }
                MountKind::Dev { size, mode } => {
                    let fs: Arc<dyn crate::fs::Inode> = Tmpfs::new_root(kernel.mf.clone(), *mode, 0, 0, *size);
                    dev::populate_container_dev(&fs).map_err(err)?;
                    mount_at(kernel, root, &m.at, mount("tmpfs", fs, tmpfs_options(*size, *mode)))?;
                }
                MountKind::Devpts { ptmx_mode } => {
                    let devpts = kernel.devpts.get().ok_or_else(|| err(FsError::NoDevice))?;
                    let fs = crate::tty::pts_root(devpts, *ptmx_mode);
                    // The options the sandbox's ptys are made with.
                    let options = format!(",gid=5,mode=620,ptmxmode={:03o}", ptmx_mode & 0o777);
                    mount_at(kernel, root, &m.at, mount("devpts", fs, options))?;
                }
                MountKind::Mqueue => {
                    let fs = crate::ipc::mqueue::mqueue_root(&kernel.ipc.mq);
                    mount_at(kernel, root, &m.at, mount("mqueue", fs, String::new()))?;
                }
                MountKind::Proc => mount_proc(kernel, root, &m.at, mount("proc", new_procfs(kernel), String::new()))?,
                MountKind::Sysfs => {
                    let sysfs = mount("sysfs", new_sysfs(kernel).0, String::new());
                    mount_sys(kernel, root, &m.at, sysfs, !has_cgroup)?
                }
                MountKind::Cgroup => {
                    mount_at(kernel, root, &m.at, mount("cgroup2", new_sysfs(kernel).1, String::new()))?
                }
            }
        }
        let ctx = crate::fs::Context::internal();
        for d in &layout.devices {
            let what = |e: FsError| SandboxError::Setup(format!("linux.devices {}: {e}", shown(&d.path)));
            let Some((dir, name, existing)) = mount_point(kernel, root, &d.path, true).map_err(what)? else {
                continue;
            };
            // A node already there stays, as runc leaves it.
            if existing.is_some() {
                continue;
            }
            let node = crate::fs::NewNode { mode: d.mode, uid: d.uid, gid: d.gid, rdev: d.rdev };
            dir.inode.mknod(&ctx, &name, node).map_err(what)?;
        }
        self.mask(masks, &[])?;
        for path in &layout.read_only_paths {
            let what = |e: FsError| SandboxError::Setup(format!("linux.readonlyPaths {}: {e}", shown(path)));
            if let Some((dir, name, Some(existing))) = mount_point(kernel, root, path, false).map_err(what)? {
                let m = existing.mount.bind_of(&existing);
                m.set_flags(m.flags() | MountFlags::READ_ONLY | MountFlags::LOCK_READ_ONLY);
                kernel.mounts.mount(&dir, &name, m);
            }
        }
        Ok(())
    }
}

/// The mount of a container's root, the host directory `root`: as it is,
/// read-only, or under an overlay whose changes stay in sandbox memory.
/// `shown` names it in errors and mountinfo.
fn root_mount(
    mf: &Arc<MemoryFile>,
    root: Arc<dyn crate::fs::Inode>,
    read_only: bool,
    shown: &str,
) -> Result<Arc<Mount>, SandboxError> {
    if root.file_type() != FileType::Directory {
        return Err(SandboxError::Setup(format!("{shown}: not a directory")));
    }
    if read_only {
        return Ok(Mount::new("hostfs", shown, true, root));
    }
    let overlay = Overlay::over(root, mf.clone()).map_err(|e| SandboxError::Setup(format!("{shown}: {e}")))?;
    Ok(Mount::new("overlay", "overlay", false, overlay))
}

/// A container that joins a running sandbox, as a pod's containers join
/// the pod's: a tree of mounts of its own (its root, then its
/// configuration's mounts), in the sandbox's kernel, network and IPC.
#[derive(Clone, Debug)]
pub struct JoiningContainer {
    /// What errors and mountinfo call its root.
    pub rootfs: String,
    /// Where the sentry opens the root (a descriptor's name in
    /// /proc/self/fd: a confined sentry reaches no host path).
    pub rootfs_open_at: PathBuf,
    pub read_only_root: bool,
    /// Sources opened at their `open_at`, as the root.
    pub binds: Vec<Bind>,
    pub masks: Vec<Vec<u8>>,
    pub layout: ContainerLayout,
    /// Who owns the tmpfs mounts it makes: its first process's user.
    pub owner: (u32, u32),
}

/// Lays out a joining container's tree of mounts beside the sandbox's
/// other ones; returns its root. [`remove_container_tree`] takes it away.
pub fn container_tree(kernel: &Arc<Kernel>, c: &JoiningContainer) -> Result<Arc<Dentry>, SandboxError> {
    let host = kernel.hostfs.get().ok_or_else(|| SandboxError::Setup("the host file system is not served".into()))?;
    let root =
        host.open_tree(&c.rootfs_open_at, false).map_err(|e| SandboxError::Setup(format!("{}: {e}", c.rootfs)))?;
    let mount = root_mount(&kernel.mf, root, c.read_only_root, &c.rootfs)?;
    kernel.mounts.add_tree(mount.clone());
    let root = Dentry::root(mount);
    let laid_out = own_file_systems(kernel, &root, Some(&c.layout)).and_then(|()| {
        let tree = Tree { kernel, root: &root, host, owner: c.owner };
        tree.container_views(&c.layout, &c.binds, &c.masks)
    });
    match laid_out {
        Ok(()) => Ok(root),
        Err(e) => {
            remove_container_tree(kernel, &root);
            Err(e)
        }
    }
}

/// Takes a joined container's tree out of the sandbox (lazily, as a
/// detaching unmount: what still uses a file there keeps it).
pub fn remove_container_tree(kernel: &Kernel, root: &Arc<Dentry>) {
    let gone: Vec<u64> = kernel.mounts.detach_tree(root.mount.id).iter().map(|m| m.id).collect();
    crate::fs::dentry::release_recent_of(&gone);
}

/// Mounts `mount` at absolute `at`, making missing directories on the way.
/// A name of the root itself is mounted over without being looked up: a
/// host root's /proc or /sys (a host pseudo-file-system, which the host
/// file system refuses to look up) is covered whatever it is.
fn mount_at(kernel: &Kernel, root: &Arc<Dentry>, at: &[u8], mount: Arc<Mount>) -> Result<(), SandboxError> {
    let shown = String::from_utf8_lossy(at).into_owned();
    let comps: Vec<&[u8]> = at.split(|b| *b == b'/').filter(|c| !c.is_empty()).collect();
    if let [name] = comps[..] {
        kernel.mounts.mount(root, name, mount);
        return Ok(());
    }
    match mount_point(kernel, root, at, true) {
        Ok(Some((dir, name, _))) => {
            kernel.mounts.mount(&dir, &name, mount);
            Ok(())
        }
        Ok(None) => Err(SandboxError::Setup(format!("{shown}: no place to mount"))),
        Err(e) => Err(SandboxError::Setup(format!("{shown}: {e}"))),
    }
}

fn new_procfs(kernel: &Arc<Kernel>) -> Arc<dyn crate::fs::Inode> {
    proc::new_procfs(Arc::new(KernelProcSource { kernel: Arc::downgrade(kernel) })).0
}

/// A sysfs, and the cgroup hierarchy that goes at its fs/cgroup.
fn new_sysfs(kernel: &Arc<Kernel>) -> (Arc<dyn crate::fs::Inode>, Arc<dyn crate::fs::Inode>) {
    sys::new_sysfs(Arc::new(KernelSysSource { kernel: Arc::downgrade(kernel) }))
}

/// Mounts a procfs at `at`, and its `sys` read-only over it, as container
/// runtimes mount it: the sandbox reads the kernel's settings but changes
/// none.
fn mount_proc(kernel: &Arc<Kernel>, root: &Arc<Dentry>, at: &[u8], procfs: Arc<Mount>) -> Result<(), SandboxError> {
    mount_at(kernel, root, at, procfs)?;
    let sysctls = proc::new_procfs(Arc::new(KernelProcSource { kernel: Arc::downgrade(kernel) })).1;
    mount_at(kernel, root, &[at, b"/sys"].concat(), Mount::new("proc", "proc", true, sysctls))
}

/// Mounts a sysfs at `at`, and with `cgroup` the sandbox's cgroup
/// hierarchy read-only at its fs/cgroup: the sandbox reads its limits but
/// changes none.
fn mount_sys(
    kernel: &Arc<Kernel>,
    root: &Arc<Dentry>,
    at: &[u8],
    sysfs: Arc<Mount>,
    cgroup: bool,
) -> Result<(), SandboxError> {
    let hierarchy = new_sysfs(kernel).1;
    mount_at(kernel, root, at, sysfs)?;
    if cgroup {
        let cgroup = Mount::new("cgroup2", "cgroup2", true, hierarchy);
        mount_at(kernel, root, &[at, b"/fs/cgroup"].concat(), cgroup)?;
    }
    Ok(())
}

/// The sentry's own /dev, /proc and /sys in the tree at `root`, where a
/// container's configuration (`layout`) does not mount its own.
fn own_file_systems(
    kernel: &Arc<Kernel>,
    root: &Arc<Dentry>,
    layout: Option<&ContainerLayout>,
) -> Result<(), SandboxError> {
    let asks = |kind: &MountKind| {
        layout.is_some_and(|l| l.mounts.iter().any(|m| std::mem::discriminant(&m.kind) == std::mem::discriminant(kind)))
    };
    if !asks(&MountKind::Dev { size: None, mode: 0 }) {
        let devfs = kernel.devfs.get().cloned().ok_or_else(|| SandboxError::Setup("/dev: no devfs".into()))?;
        kernel.mounts.mount(root, b"dev", Mount::new("devtmpfs", "dev", false, devfs));
    }
    if !asks(&MountKind::Proc) {
        mount_proc(kernel, root, b"/proc", Mount::new("proc", "proc", false, new_procfs(kernel)))?;
    }
    if !asks(&MountKind::Sysfs) {
        let sysfs = Mount::new("sysfs", "sysfs", true, new_sysfs(kernel).0);
        mount_sys(kernel, root, b"/sys", sysfs, !asks(&MountKind::Cgroup))?;
    }
    Ok(())
}

/// A tmpfs's options as mountinfo shows them: its size unless the default,
/// its mode unless 1777.
fn tmpfs_options(size: Option<u64>, mode: u32) -> String {
    let mut s = String::new();
    if let Some(size) = size {
        s.push_str(&format!(",size={}k", size.div_ceil(1024)));
    }
    if mode & 0o7777 != 0o1777 {
        s.push_str(&format!(",mode={:o}", mode & 0o7777));
    }
    s
}

/// An empty read-only directory, in the sentry's view only.
fn empty_dir() -> Arc<Mount> {
    Mount::new("tmpfs", "tmpfs", true, SynthDir::new(Vec::new()))
}

/// Where a mount at absolute `path` goes: the directory to hold it, the
/// name in it, and what is there now if anything. A symlink there is
/// followed, so the mount covers what it points at, as Linux's does.
/// Directories missing on the way are made empty when `make` says (else
/// there is nowhere to mount: None); the root itself is no mount point.
type MountPlace = (Arc<Dentry>, Vec<u8>, Option<Arc<Dentry>>);

fn mount_point(kernel: &Kernel, root: &Arc<Dentry>, path: &[u8], make: bool) -> Result<Option<MountPlace>, FsError> {
    // The sandbox's own set-up may search anywhere.
    let creds = Creds::new(0, 0, Vec::new());
    let root = root.clone();
    let r = crate::fs::Resolver {
        root: &root,
        cwd: &root,
        mounts: &kernel.mounts,
        creds: &creds,
        restrict: crate::fs::path::Restrict::empty(),
    };
    let comps: Vec<&[u8]> = path.split(|b| *b == b'/').filter(|c| !c.is_empty()).collect();
    let Some((last, dirs)) = comps.split_last() else { return Err(FsError::Invalid) };
    let mut dir = root.clone();
    for c in dirs {
        dir = match r.resolve(Some(&dir), c, Lookup { follow: true, directory: true }) {
            Ok(d) => d,
            Err(FsError::NotFound) if make => {
                kernel.mounts.mount(&dir, c, empty_dir());
                r.child(&dir, c)?
            }
            Err(FsError::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    match r.resolve(Some(&dir), last, Lookup::FOLLOW) {
        Ok(d) => match d.parent() {
            Some(p) => Ok(Some((p.clone(), d.name().to_vec(), Some(d.clone())))),
            None => Err(FsError::Invalid),
        },
        Err(FsError::NotFound) => Ok(Some((dir, last.to_vec(), None))),
        Err(e) => Err(e),
    }
}

/// Signals sent to cordon that go to the sandbox's first process, as
/// `docker run` and `runsc` forward them.
const FORWARDED: [i32; 10] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGWINCH,
    libc::SIGCONT,
    libc::SIGTSTP,
];

pub fn forwarded_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

pub(crate) fn block_forwarded_signals() {
    let set = forwarded_set();
    // SAFETY: changes only the calling thread's mask; threads created later
    // inherit it.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// A host thread that takes signals sent to cordon and sends them to the
/// sandbox's first process. It waits on a signalfd, the monitor's pipe
/// (if there is a monitor) and an eventfd that stops it.
struct Forwarder {
    stop: OwnedFd,
    handle: std::thread::JoinHandle<()>,
}

impl Forwarder {
    /// Signals are sent as from outside the sandbox's pid namespace (pid
    /// 0) by `uid`.
    fn start(
        kernel: Arc<Kernel>,
        uid: u32,
        mut from_monitor: Option<OwnedFd>,
        resize: Option<Box<dyn Fn() + Send>>,
    ) -> Forwarder {
        use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
        let stop = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
        let stop_wait = stop.try_clone().expect("dup eventfd");
        let set = forwarded_set();
        // SAFETY: creates a new signalfd for a valid, initialised set.
        let sfd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
        assert!(sfd >= 0, "signalfd: {}", std::io::Error::last_os_error());
        // SAFETY: sfd is a fresh descriptor we own.
        let sfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(sfd) };
        let send = move |sig: u32| {
            let init = kernel.procs.lock().unwrap().group(INIT_PID);
            if let Some(init) = init {
                crate::task::send_to_group(&kernel, &init, SigInfo::user(sig, code::SI_USER, 0, uid));
            }
        };
        let handle = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let monitored = from_monitor.is_some();
                loop {
                    let mut fds = vec![PollFd::new(&stop_wait, PollFlags::IN), PollFd::new(&sfd, PollFlags::IN)];
                    if let Some(m) = &from_monitor {
                        fds.push(PollFd::new(m, PollFlags::IN));
                    }
                    if poll(&mut fds, None).is_err() {
                        continue;
                    }
                    if !fds[0].revents().is_empty() {
                        return;
                    }
                    let from_signalfd = !fds[1].revents().is_empty();
                    let from_pipe = fds.get(2).is_some_and(|f| !f.revents().is_empty());
                    drop(fds);
                    if from_signalfd {
                        let mut info = [0u8; 128];
                        if let Ok(128) = rustix::io::read(&sfd, &mut info) {
                            let sig = u32::from_le_bytes(info[0..4].try_into().unwrap());
                            let si_code = i32::from_le_bytes(info[8..12].try_into().unwrap());
                            if sig == libc::SIGWINCH as u32
                                && let Some(resize) = &resize
                            {
                                resize();
                            } else if !monitored || si_code == libc::SI_KERNEL {
                                send(sig);
                            }
                        }
                    }
                    if from_pipe && let Some(m) = &from_monitor {
                        let mut b = [0u8; 1];
                        match rustix::io::read(m, &mut b) {
                            Ok(1) => send(u32::from(b[0])),
                            // The monitor is gone (and the sentry with it,
                            // by its parent-death signal).
                            Ok(_) | Err(_) => from_monitor = None,
                        }
                    }
                }
            })
            .expect("spawn the signal forwarder");
        Forwarder { stop, handle }
    }

    fn stop(self) {
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}

/// Finds the program as a shell would: a name with a slash is a path;
/// otherwise each directory of PATH (in `env`) is tried.
fn find_program(task: &Task, prog: &[u8], env: &[Vec<u8>], creds: &Creds) -> Result<Vec<u8>, SandboxError> {
    let shown = String::from_utf8_lossy(prog).into_owned();
    if prog.is_empty() {
        return Err(SandboxError::NotFound(": command not found".into()));
    }
    if prog.contains(&b'/') {
        return Ok(prog.to_vec());
    }
    let path = env_value(env, b"PATH").unwrap_or(DEFAULT_PATH);
    let mut denied = false;
    for dir in path.split(|b| *b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let mut cand = dir.to_vec();
        cand.push(b'/');
        cand.extend_from_slice(prog);
        let found = task.with_resolver(|r| r.resolve(None, &cand, Lookup::FOLLOW));
        if let Ok(d) = found {
            if d.file_type() == FileType::Regular && d.inode.access(creds, crate::fs::MAY_EXEC).is_ok() {
                return Ok(cand);
            }
            denied = true;
        }
    }
    if denied {
        Err(SandboxError::NotExecutable(format!("{shown}: Permission denied")))
    } else {
        Err(SandboxError::NotFound(format!("{shown}: command not found")))
    }
}

/// Loads `program` (found as a shell would) into `task`, with the errors a
/// shell gives.
fn load_program(
    task: &mut Task,
    program: &[u8],
    args: Vec<Vec<u8>>,
    env: Vec<Vec<u8>>,
    creds: &Creds,
) -> Result<(), SandboxError> {
    let path = find_program(task, program, &env, creds)?;
    let shown = String::from_utf8_lossy(program).into_owned();
    exec::exec(task, &exec::ExecRequest::path(&path), args, env).map_err(|e| match e {
        LoadError::Lookup(FsError::NotFound) => SandboxError::NotFound(format!("{shown}: No such file or directory")),
        LoadError::Lookup(e) => {
            SandboxError::NotExecutable(format!("{shown}: {}", crate::errno::Errno::from(e).description()))
        }
        LoadError::NotExecutable => SandboxError::NotExecutable(format!("{shown}: Permission denied")),
        LoadError::BadFormat => {
            SandboxError::NotExecutable(format!("{shown}: cannot execute binary file: Exec format error"))
        }
        e => SandboxError::NotExecutable(format!("{shown}: {e}")),
    })
}

/// Where a process started in a running sandbox reads and writes.
pub enum ProcessStdio {
    /// Host descriptors that become its 0, 1 and 2 (None: closed).
    Files([Option<OwnedFd>; 3]),
    /// A terminal of the sandbox's own, relayed to this host terminal.
    Terminal(OwnedFd),
}

/// A process started in a running sandbox, and its terminal's relay.
pub struct StartedProcess {
    pub process: Arc<ThreadGroup>,
    relay: Option<TerminalRelay>,
}

impl StartedProcess {
    /// Waits for the process to end, reaps it (it has no parent in the
    /// sandbox: the runtime that started it is its parent, outside) and
    /// returns how it ended.
    pub fn wait(self, kernel: &Kernel) -> ExitStatus {
        let waiter = crate::waiter::Waiter::new();
        let status = {
            let _r = self.process.thread_events.register(&waiter);
            loop {
                {
                    let st = self.process.state.lock().unwrap();
                    if st.zombie {
                        break st.exit.expect("dead processes have a status");
                    }
                }
                waiter.sleep(None);
            }
        };
        kernel.procs.lock().unwrap().remove_process(self.process.tgid);
        if let Some(r) = self.relay {
            r.finish();
        }
        status
    }
}

/// Where a process started in a running sandbox goes.
pub struct ProcessPlace {
    /// The root of its container's tree of mounts.
    pub root: Arc<Dentry>,
    /// Its container's number (see `ThreadGroup::container`).
    pub container: u32,
    /// For a container's first process: what it waits on before its
    /// program runs (killed unstarted if the answer is no).
    pub start: Option<crate::control::StartGate>,
}

impl ProcessPlace {
    /// The sandbox's first container, started at once.
    pub fn first_container(kernel: &Kernel) -> ProcessPlace {
        ProcessPlace { root: kernel.root.clone(), container: 0, start: None }
    }
}

/// Starts a process in the running sandbox of `kernel`, as a runtime's
/// exec joins a container: the container's root, its own session, no
/// parent inside. The identity, limits and directory are `spec`'s.
pub fn start_process(
    kernel: &Arc<Kernel>,
    devpts: &Arc<Devpts>,
    spec: &crate::control::ProcessSpec,
    stdio: ProcessStdio,
    place: ProcessPlace,
) -> Result<StartedProcess, SandboxError> {
    use crate::auth::{Caps, Ids};
    let setup = |e: String| SandboxError::Setup(e);
    let [effective, permitted, inheritable, bounding, ambient] = spec.caps;
    let creds = Creds {
        uid: Ids::all(spec.uid),
        gid: Ids::all(spec.gid),
        groups: spec.groups.clone(),
        caps: Caps { effective, permitted, inheritable, bounding, ambient },
        securebits: 0,
    };
    let ProcessPlace { root, container, start } = place;
    let cwd = {
        let r = crate::fs::Resolver {
            root: &root,
            cwd: &root,
            mounts: &kernel.mounts,
            creds: &creds,
            restrict: crate::fs::path::Restrict::empty(),
        };
        r.resolve(None, spec.cwd.as_bytes(), Lookup { follow: true, directory: true })
            .map_err(|e| setup(format!("working directory {}: {e}", spec.cwd)))?
    };
    let fs = Arc::new(Mutex::new(FsContext { root: root.clone(), cwd, umask: spec.umask & 0o777 }));
    let files = Arc::new(FdTable::new(1024));
    let tid = kernel.allocate_tid();
    let handlers = Arc::new(Mutex::new(SigHandlers::default()));
    let tg = ThreadGroup::new(tid, handlers, 0, Default::default(), Arc::new(creds.clone()));
    tg.container.store(container, std::sync::atomic::Ordering::Relaxed);
    tg.info.lock().unwrap().oom_score_adj = spec.oom_score_adj;
    for (resource, cur, max) in &spec.rlimits {
        if let Some(slot) = tg.rlimits.lock().unwrap().0.get_mut(*resource as usize) {
            *slot = Rlimit { cur: *cur, max: *max };
        }
    }
    let shared = TaskShared::new(tid, tg.clone(), SigSet::EMPTY);
    *shared.affinity.lock().unwrap() = all_cpus_mask(kernel.config.cpus);
    shared.no_new_privs.store(spec.no_new_privs, std::sync::atomic::Ordering::Relaxed);
    let relay = match stdio {
        ProcessStdio::Files(fds) => {
            for (fd, host) in fds.into_iter().enumerate() {
                let Some(host) = host else { continue };
                let flags = host_fd_flags(&host);
                let f = OpenFile::new(Arc::new(HostStream::new(host)), None, flags);
                files.install_at(fd as i32, f, false).map_err(|e| setup(e.to_string()))?;
            }
            None
        }
        ProcessStdio::Terminal(host) => {
            let fail = |e: FsError| setup(format!("a terminal for the process: {e}"));
            let master = devpts.open_master(creds.uid.fs).map_err(fail)?;
            let pty = master.pty().clone();
            pty.unlock();
            let path = format!("/dev/pts/{}", pty.index());
            let r = crate::fs::Resolver {
                root: &root,
                cwd: &root,
                mounts: &kernel.mounts,
                creds: &creds,
                restrict: crate::fs::path::Restrict::empty(),
            };
            let dentry = r.resolve(None, path.as_bytes(), Lookup::FOLLOW).map_err(fail)?;
            let slave = pty
                .open_slave(&crate::fs::Context::kernel(Arc::new(creds.clone())), OpenFlags::NOCTTY, None)
                .map_err(fail)?;
            let file = OpenFile::new(slave, Some(dentry), OpenFlags::RDWR | OpenFlags::LARGEFILE);
            for fd in 0..3 {
                files.install_at(fd, file.clone(), false).map_err(|e| setup(e.to_string()))?;
            }
            if let Some(ws) = crate::terminal::window_size(&host) {
                pty.set_window_size(ws);
            }
            pty.set_session(tid, tid);
            let input = host.try_clone().map_err(|e| setup(e.to_string()))?;
            Some(TerminalRelay::start(master, Some(input), host))
        }
    };
    {
        let mut tree = kernel.procs.lock().unwrap();
        if tree.is_closed() {
            return Err(setup("the sandbox is ending".into()));
        }
        if tree.at_pids_limit() {
            return Err(setup("the sandbox is at its pids limit".into()));
        }
        tree.add_process(&tg, None, tid, tid);
        tg.threads.lock().unwrap().push(shared.clone());
        tree.add_thread(&shared);
    }
    let unlisted = || {
        let mut tree = kernel.procs.lock().unwrap();
        tree.remove_thread(tid);
        tree.remove_process(tid);
    };
    let made = (|| -> Result<Task, SandboxError> {
        let mut task = fresh_task(kernel, shared, tg.clone(), fs, files)?;
        let args: Vec<Vec<u8>> = spec.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let env = spec.env.iter().map(|e| e.as_bytes().to_vec()).collect();
        let program = args.first().cloned().unwrap_or_default();
        load_program(&mut task, &program, args, env, &creds)?;
        Ok(task)
    })();
    let task = match made {
        Ok(t) => t,
        Err(e) => {
            unlisted();
            if let Some(r) = relay {
                r.finish();
            }
            return Err(e);
        }
    };
    let thread = match kernel.new_task_thread(tid) {
        Ok(t) => t,
        Err(e) => {
            unlisted();
            return Err(setup(format!("a host thread for the process: {e}")));
        }
    };
    let started_kernel = kernel.clone();
    let process = tg.clone();
    thread.start(move || {
        if let Some(gate) = start
            && !gate.wait()
        {
            crate::task::send_to_group(&started_kernel, &process, SigInfo::kernel(linux_raw_sys::general::SIGKILL));
        }
        run_task(task)
    });
    Ok(StartedProcess { process: tg, relay })
}

/// The task of a process the sandbox starts itself (its first, or one
/// started beside it): a fresh address space and context, no program yet.
fn fresh_task(
    kernel: &Arc<Kernel>,
    shared: Arc<TaskShared>,
    tg: Arc<ThreadGroup>,
    fs: Arc<Mutex<FsContext>>,
    files: Arc<FdTable>,
) -> Result<Task, SandboxError> {
    let space = kernel.platform.new_address_space()?;
    let mm = Arc::new(MemoryManager::new(kernel.mf.clone(), space, 8 << 20));
    Ok(Task {
        kernel: kernel.clone(),
        shared,
        tg,
        mm,
        fs,
        files,
        regs: Registers::default(),
        ctx: kernel.platform.new_context()?,
        altstack: (0, 0, linux_raw_sys::general::SS_DISABLE),
        clear_child_tid: 0,
        robust_list: (0, 0),
        restart: None,
        restart_block: None,
        vfork_done: None,
        exit_code: None,
        last_trap: (0, 0, 0),
        orig_rax: 0,
        stepping: false,
    })
}

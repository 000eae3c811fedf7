//! Starting a sandbox: platform, memory, file systems and the first process.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use memory::MemoryFile;
use platform::kvm::KvmPlatform;
use platform::{Platform, PlatformError, Registers};

use crate::fd::FdTable;
use crate::fs::host::HostFs;
use crate::fs::stdio::HostStream;
use crate::fs::{FileType, FsError, Lookup, Mount, OpenFile, OpenFlags, dev, proc};
use crate::kernel::{Kernel, KernelConfig};
use crate::loader::{AuxFacts, LoadError};
use crate::mm::MemoryManager;
use crate::signal::SigSet;
use crate::task::{ExitStatus, FsContext, KernelProcSource, Task, ThreadGroup, exec, run_task};

/// What to run and how.
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// Host directory that becomes `/`.
    pub rootfs: PathBuf,
    /// The program as the user named it.
    pub program: Vec<u8>,
    /// Arguments, the program name first.
    pub args: Vec<Vec<u8>>,
    /// Environment, as NAME=VALUE.
    pub env: Vec<Vec<u8>>,
    /// Working directory inside the sandbox.
    pub cwd: Vec<u8>,
    pub strace: bool,
    /// Bytes of memory the sandbox may use.
    pub memory: u64,
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

/// A running sandbox's kernel with its first task, not yet started.
pub struct Sandbox {
    pub kernel: Arc<Kernel>,
    init: Task,
}

fn host_fd_flags(fd: &OwnedFd) -> OpenFlags {
    let fl = rustix::fs::fcntl_getfl(fd).map(|f| f.bits()).unwrap_or(linux_raw_sys::general::O_RDWR);
    OpenFlags::from_bits_retain(fl) & (OpenFlags::WRONLY | OpenFlags::RDWR | OpenFlags::APPEND | OpenFlags::NONBLOCK)
}

impl Sandbox {
    /// Builds the sandbox and loads the program; nothing runs yet.
    pub fn new(config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        let mf = Arc::new(MemoryFile::new(config.memory).map_err(|e| SandboxError::Setup(e.to_string()))?);
        let platform: Arc<dyn Platform> = Arc::new(KvmPlatform::new(mf.clone())?);
        let root = HostFs::mount_root(&config.rootfs, mf.clone())
            .map_err(|e| SandboxError::Setup(format!("{}: {e}", config.rootfs.display())))?;
        if root.file_type() != FileType::Directory {
            return Err(SandboxError::Setup(format!("{}: not a directory", config.rootfs.display())));
        }
        let hostname = rustix::system::uname().nodename().to_string_lossy().into_owned();
        let facts = AuxFacts {
            uid: rustix::process::getuid().as_raw(),
            euid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            egid: rustix::process::getegid().as_raw(),
            hwcap: crate::arch::hwcap(),
            hwcap2: 0,
            min_signal_stack: crate::arch::min_signal_stack(),
            clock_ticks: 100,
        };
        let kernel = Arc::new(Kernel::new(
            platform,
            mf.clone(),
            Mount::new("hostfs", config.rootfs.display().to_string(), true, root),
            KernelConfig { rootfs: config.rootfs.clone(), strace: config.strace, hostname },
            facts,
        ));
        kernel.mounts.mount(&kernel.root, b"dev", Mount::new("devtmpfs", "dev", false, dev::new_devfs()));
        let procfs = proc::new_procfs(Arc::new(KernelProcSource { kernel: Arc::downgrade(&kernel) }));
        kernel.mounts.mount(&kernel.root, b"proc", Mount::new("proc", "proc", false, procfs));

        let init = Self::first_task(&kernel, config)?;
        Ok(Sandbox { kernel, init })
    }

    fn first_task(kernel: &Arc<Kernel>, config: &SandboxConfig) -> Result<Task, SandboxError> {
        let root = kernel.root.clone();
        let cwd = {
            let r = crate::fs::Resolver { root: &root, cwd: &root, mounts: &kernel.mounts };
            r.resolve(None, &config.cwd, Lookup { follow: true, directory: true }).map_err(|e| {
                SandboxError::Setup(format!("working directory {}: {e}", String::from_utf8_lossy(&config.cwd)))
            })?
        };
        let fs = Arc::new(Mutex::new(FsContext { root: root.clone(), cwd, umask: 0o022 }));
        let files = Arc::new(FdTable::new(1024));
        for fd in 0..3 {
            // SAFETY: borrowing the process's standard descriptor only to
            // duplicate it; a closed one fails the dup and is skipped.
            let host = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let Ok(dup) = rustix::io::fcntl_dupfd_cloexec(host.as_fd(), 3) else { continue };
            let flags = host_fd_flags(&dup);
            let f = OpenFile::new(Arc::new(HostStream::new(dup)), None, flags);
            files.install_at(fd, f, false).map_err(|e| SandboxError::Setup(e.to_string()))?;
        }
        let tid = kernel.allocate_tid();
        let tg = ThreadGroup::new(tid);
        kernel.processes.insert(&tg);
        let space = kernel.platform.new_address_space()?;
        let mm = Arc::new(MemoryManager::new(kernel.mf.clone(), space, 8 << 20));
        let mut task = Task {
            kernel: kernel.clone(),
            tid,
            tg,
            mm,
            fs,
            files,
            regs: Registers::default(),
            ctx: kernel.platform.new_context()?,
            signal_mask: SigSet::EMPTY,
            altstack: (0, 0, linux_raw_sys::general::SS_DISABLE),
            clear_child_tid: 0,
            robust_list: (0, 0),
            exit: None,
        };
        let path = Self::find_program(&task, config)?;
        let shown = String::from_utf8_lossy(&config.program).into_owned();
        exec::exec(&mut task, &path, config.args.clone(), config.env.clone()).map_err(|e| match e {
            LoadError::Lookup(FsError::NotFound) => {
                SandboxError::NotFound(format!("{shown}: No such file or directory"))
            }
            LoadError::Lookup(e) => {
                SandboxError::NotExecutable(format!("{shown}: {}", crate::errno::Errno::from(e).description()))
            }
            LoadError::NotExecutable => SandboxError::NotExecutable(format!("{shown}: Permission denied")),
            LoadError::BadFormat => {
                SandboxError::NotExecutable(format!("{shown}: cannot execute binary file: Exec format error"))
            }
            e => SandboxError::NotExecutable(format!("{shown}: {e}")),
        })?;
        Ok(task)
    }

    /// Finds the program as a shell would: a name with a slash is a path;
    /// otherwise each directory of PATH is tried.
    fn find_program(task: &Task, config: &SandboxConfig) -> Result<Vec<u8>, SandboxError> {
        let prog = &config.program;
        let shown = String::from_utf8_lossy(prog).into_owned();
        if prog.is_empty() {
            return Err(SandboxError::NotFound(": command not found".into()));
        }
        if prog.contains(&b'/') {
            return Ok(prog.clone());
        }
        let path = env_value(&config.env, b"PATH").unwrap_or(DEFAULT_PATH);
        let mut denied = false;
        for dir in path.split(|b| *b == b':') {
            let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
            let mut cand = dir.to_vec();
            cand.push(b'/');
            cand.extend_from_slice(prog);
            let found = task.with_resolver(|r| r.resolve(None, &cand, Lookup::FOLLOW));
            if let Ok(d) = found {
                if d.file_type() == FileType::Regular && d.inode.access(1).is_ok() {
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

    /// Runs the program to completion.
    pub fn run(self) -> ExitStatus {
        let Sandbox { kernel, init } = self;
        let handle = std::thread::Builder::new()
            .name(format!("task-{}", init.tid))
            .spawn(move || run_task(init))
            .expect("spawn the first task's thread");
        let status =
            handle.join().unwrap_or(ExitStatus::Signaled { signal: linux_raw_sys::general::SIGKILL, core: false });
        drop(kernel);
        status
    }
}

//! A container's lifecycle, in the order the runtime-spec gives it:
//! create (the sandbox is built and its first process loaded, waiting),
//! start (the program runs), kill, and delete once stopped.
//!
//! `create` forks the container's process, the pid engines signal and wait
//! on: it becomes cordon's monitor and its child the sentry, exactly as for
//! `cordon run` (see `sentry::confine`), and exits with the sandbox's exit
//! status. The sentry says it is ready (or why not) on a pipe to `create`,
//! then waits for `start` on the control channel.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use oci_spec::runtime::Hook;
use sentry::confine::{self, HostNetwork, Role};
use sentry::control::{Message, Request};
use sentry::net::NetworkMode;
use sentry::sandbox::{Sandbox, SandboxConfig};

use super::spec::{Container, NetworkNamespace};
use super::state::{self, CONTROL, CREATED, Record, StateDir, Status};

/// What `create` is asked for besides the bundle.
pub struct CreateOptions<'a> {
    pub root: &'a Path,
    pub id: &'a str,
    pub bundle: PathBuf,
    pub pid_file: Option<&'a Path>,
    pub console_socket: Option<&'a Path>,
}

/// Creates the container; returns its process's pid. The caller's stdio
/// become the container's (unless it has a terminal).
pub fn create(opts: &CreateOptions, container: Container, spec: &oci_spec::runtime::Spec) -> Result<i32> {
    let hooks = spec.hooks().clone();
    if let Some(h) = &hooks {
        if h.create_container().as_ref().is_some_and(|v| !v.is_empty()) {
            bail!("hooks.createContainer: hooks inside the container are not supported (no host program runs there)");
        }
        if h.start_container().as_ref().is_some_and(|v| !v.is_empty()) {
            bail!("hooks.startContainer: hooks inside the container are not supported (no host program runs there)");
        }
    }
    let console = match (container.terminal, opts.console_socket) {
        (true, Some(socket)) => Some(console(socket, container.console_size)?),
        (true, None) => bail!("process.terminal needs --console-socket"),
        (false, _) => None,
    };
    let sd = StateDir::make(opts.root, opts.id)?;
    let joins = container.joins.clone();
    let made = (|| -> Result<i32> {
        if let Some(sandbox) = &joins {
            std::fs::write(sd.path(CREATED), b"").context("the state directory")?;
            let process = spec.process().as_ref().context("config.json: process is required")?;
            return super::join::create(&sd, sandbox, &container, process, console.map(|c| c.slave));
        }
        rustix::fs::mkfifoat(rustix::fs::CWD, sd.path(CONTROL), rustix::fs::Mode::from_raw_mode(0o600))
            .context("the control channel")?;
        std::fs::write(sd.path(CREATED), b"").context("the state directory")?;
        // Read and write: the sentry never sees end of file, and `kill`
        // and `start` never wait for it to open.
        let control = rustix::fs::open(
            sd.path(CONTROL),
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .context("the control channel")?;
        let socket = sd.with_socket_path(|p| std::os::unix::net::UnixListener::bind(p))?;
        let socket = OwnedFd::from(socket);
        let (ready_read, ready_write) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).context("a pipe to the container")?;
        // SAFETY: cordon has one thread here (nothing it ran before made
        // any), so the child starts with a consistent copy.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork");
        }
        if pid == 0 {
            drop(ready_read);
            let code = container_process(
                container.config,
                container.network_namespace.as_ref(),
                container.pod_sandbox,
                console,
                ready_write,
                (control, socket),
            );
            std::process::exit(code.into());
        }
        drop(ready_write);
        drop(control);
        drop(socket);
        drop(console);
        // Read until "ready", or end of file after why not. Not to end of
        // file first: the platform's host processes may hold the pipe too.
        let mut said = Vec::new();
        let mut from_container = std::fs::File::from(ready_read);
        while said != b"ready" {
            let mut buf = [0u8; 512];
            match std::io::Read::read(&mut from_container, &mut buf) {
                Ok(0) => break,
                Ok(n) => said.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("the container"),
            }
        }
        if said != b"ready" {
            let mut status = 0;
            // SAFETY: reaps our own child, which has ended or is ending.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            let why = String::from_utf8_lossy(&said).trim().to_string();
            if why.is_empty() {
                bail!("the sandbox did not start (exit status {})", libc::WEXITSTATUS(status));
            }
            bail!("{why}");
        }
        Ok(pid)
    })();
    let pid = match made {
        Ok(pid) => pid,
        Err(e) => {
            let _ = sd.remove();
            return Err(e);
        }
    };
    let record = Record {
        id: opts.id.to_string(),
        bundle: opts.bundle.clone(),
        pid,
        pid_start: state::start_time(pid).unwrap_or(0),
        created: state::now_rfc3339(),
        annotations: spec.annotations().clone().unwrap_or_default(),
        hooks,
        owner: rustix::process::geteuid().as_raw(),
        sandbox: joins,
    };
    let finish = (|| -> Result<()> {
        sd.save(&record)?;
        if let Some(path) = opts.pid_file {
            write_pid_file(path, pid)?;
        }
        let hooks = record.hooks.as_ref();
        let early = hooks.and_then(|h| h.prestart().clone()).into_iter().flatten();
        let early = early.chain(hooks.and_then(|h| h.create_runtime().clone()).into_iter().flatten());
        let state_json = sd.oci_state(&record, Status::Creating).to_string();
        for hook in early.collect::<Vec<_>>() {
            run_hook(&hook, &state_json).context("a createRuntime hook")?;
        }
        Ok(())
    })();
    if let Err(e) = finish {
        // As the spec orders: the container is stopped and deleted.
        kill_process(&record);
        let _ = sd.remove();
        return Err(e);
    }
    Ok(pid)
}

/// The pid file, written whole or not at all, as runc writes it.
fn write_pid_file(path: &Path, pid: i32) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    std::fs::write(&tmp, pid.to_string()).with_context(|| format!("--pid-file {}", path.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("--pid-file {}", path.display()))
}

/// The container's process: cordon's monitor, whose child is the sentry
/// (see the module's documentation). Returns its exit status.
fn container_process(
    mut config: SandboxConfig,
    network_namespace: Option<&NetworkNamespace>,
    pod_sandbox: bool,
    console: Option<Console>,
    ready: OwnedFd,
    control: (OwnedFd, OwnedFd),
) -> u8 {
    let fail = |ready: OwnedFd, code: i32, why: String| -> u8 {
        let _ = rustix::io::write(&ready, why.as_bytes());
        code as u8
    };
    // A session of its own, away from the caller's terminal and its
    // signals; with a terminal, the console is its controlling one.
    let _ = rustix::process::setsid();
    if let Some(c) = &console
        && let Err(e) = c.become_stdio()
    {
        return fail(ready, 125, format!("the console: {e}"));
    }
    // Joined before the sentry is forked off and confines itself: it keeps
    // the namespace it starts in, as for `--network=host`.
    let entered = match network_namespace {
        Some(NetworkNamespace::Join(path)) => join_network_namespace(path)
            .map_err(|e| format!("linux.namespaces: network namespace {}: {e}", path.display())),
        Some(NetworkNamespace::New) if rustix::process::geteuid().is_root() => {
            new_network_namespace().map_err(|e| format!("a network namespace: {e}"))
        }
        // A caller who is not root can make one only inside the user
        // namespace the sentry makes later, where no engine reaches it:
        // the sandbox's own loopback then, as `--network=none` has it.
        Some(NetworkNamespace::New) => {
            config.network = NetworkMode::None;
            Ok(())
        }
        None => Ok(()),
    };
    if let Err(why) = entered {
        return fail(ready, 125, why);
    }
    let network = match config.network {
        NetworkMode::Host => HostNetwork::Host,
        NetworkMode::None => HostNetwork::None,
    };
    let bind_sources: Vec<confine::BindSource> =
        config.binds.iter().map(|b| confine::BindSource { path: &b.host, writable: !b.read_only }).collect();
    let (mut isolation, (ready, (fifo, socket))) =
        match confine::isolate(&config.rootfs, &bind_sources, network, (ready, control)) {
            Ok(Role::Monitor(status)) => return status,
            Ok(Role::Sentry(isolation, fds)) => (isolation, fds),
            Err(e) => {
                // The pipe went with what isolate was given: said here instead.
                sentry::diag::line(format_args!("cordon: {e}"));
                return sentry::internal_error::EXIT_STATUS as u8;
            }
        };
    let config = config.served_by(&isolation);
    let mut sandbox = match Sandbox::new(&config) {
        Ok(s) => s,
        Err(e) => return fail(ready, e.exit_code(), e.to_string()),
    };
    if let Some(fd) = isolation.take_monitor_channel() {
        sandbox.forward_signals_from(fd);
    }
    isolation.serve_control_socket();
    if pod_sandbox {
        isolation.expect_writable_binds();
    }
    if let Err(e) = isolation.lock_down() {
        return fail(ready, sentry::internal_error::EXIT_STATUS, e.to_string());
    }
    let _ = rustix::io::write(&ready, b"ready");
    drop(ready);
    let outcome = sandbox.run_controlled(fifo, socket);
    if console.is_some() {
        sentry::internal_error::restore_terminals();
    }
    outcome.status.shell_code() as u8
}

/// Moves this (single-threaded) process into the network namespace at
/// `path`.
fn join_network_namespace(path: &Path) -> std::io::Result<()> {
    let ns =
        rustix::fs::open(path, rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC, rustix::fs::Mode::empty())?;
    rustix::thread::move_into_link_name_space(ns.as_fd(), Some(rustix::thread::LinkNameSpaceType::Network))?;
    Ok(())
}

/// Moves this (single-threaded) process into a new network namespace and
/// brings its loopback up, as runc does for a container's.
fn new_network_namespace() -> std::io::Result<()> {
    // SAFETY: the process has one thread, and nothing in it depends on the
    // network namespace it leaves.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
    let socket = rustix::net::socket(rustix::net::AddressFamily::INET, rustix::net::SocketType::DGRAM, None)?;
    // SAFETY: an all-zero ifreq is valid; the name fits its 16 bytes; both
    // ioctls read and fill that ifreq only.
    unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The container's terminal on the host: a pty whose master went to the
/// console socket, and whose slave the sandbox's own terminal is relayed
/// to (as `cordon run -it` relays it to the caller's).
struct Console {
    slave: OwnedFd,
}

impl Console {
    /// Makes the slave the process's controlling terminal and its stdin,
    /// stdout and stderr, in raw mode: the sandbox's pty does the line
    /// discipline.
    fn become_stdio(&self) -> std::io::Result<()> {
        let fd = self.slave.as_raw_fd();
        // SAFETY: ioctl, tcgetattr/tcsetattr and dup2 act on descriptors
        // we own (the slave, and 0 to 2 which it replaces); the termios is
        // ours.
        unsafe {
            if libc::ioctl(fd, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut t) == 0 {
                libc::cfmakeraw(&mut t);
                libc::tcsetattr(fd, libc::TCSANOW, &t);
            }
            for target in 0..3 {
                if libc::dup2(fd, target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// A pty whose master went to the console socket at `path`: its slave.
pub fn console_pty(path: &Path, size: Option<(u16, u16)>) -> Result<OwnedFd> {
    Ok(console(path, size)?.slave)
}

/// Makes a pty and sends its master to the console socket at `path`, as
/// runc does: one message whose data is the pty's name and whose
/// SCM_RIGHTS carry the master.
fn console(path: &Path, size: Option<(u16, u16)>) -> Result<Console> {
    let shown = || format!("--console-socket {}", path.display());
    let (mut master, mut slave) = (-1, -1);
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    if let Some((rows, cols)) = size {
        ws.ws_row = rows;
        ws.ws_col = cols;
    }
    // SAFETY: openpty fills two descriptors we then own; the name buffer
    // is not asked for; ws is a valid winsize.
    if unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) } != 0 {
        return Err(std::io::Error::last_os_error()).context("a pty for the console");
    }
    // SAFETY: both are fresh descriptors nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
    let name = rustix::termios::ttyname(&slave, Vec::new()).context("the console's name")?;
    let stream = std::os::unix::net::UnixStream::connect(path).with_context(shown)?;
    send_fd(&stream, name.as_bytes(), &master).with_context(shown)?;
    Ok(Console { slave })
}

/// Sends `data` with `fd` in SCM_RIGHTS on `stream`.
fn send_fd(stream: &std::os::unix::net::UnixStream, data: &[u8], fd: &OwnedFd) -> std::io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: an all-zero msghdr is valid; it is then pointed at the iovec
    // and control buffer above, which outlive the sendmsg; CMSG_FIRSTHDR
    // of a buffer of CMSG_SPACE(int) bytes is a header with room for one
    // descriptor.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut libc::c_int, raw);
        if libc::sendmsg(stream.as_raw_fd(), &msg, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Lets a created container's program run, then runs the poststart hooks.
pub fn start(sd: &StateDir) -> Result<()> {
    let record = sd.load()?;
    let status = sd.status(&record);
    if status != Status::Created {
        bail!("container {} is not in created state: {}", record.id, status.name());
    }
    // The start that removes the mark is the one that starts it.
    std::fs::remove_file(sd.path(CREATED))
        .with_context(|| format!("container {} is not in created state", record.id))?;
    match &record.sandbox {
        Some(_) => super::join::ask(sd, &record, Request::StartContainer { id: record.id.clone() })?,
        None => send(sd, Message::Start)?,
    }
    let state_json = sd.oci_state(&record, Status::Running).to_string();
    for hook in record.hooks.as_ref().and_then(|h| h.poststart().clone()).into_iter().flatten() {
        if let Err(e) = run_hook(&hook, &state_json) {
            // Not an error of the command, as the spec has it: said all the same.
            sentry::diag::line(format_args!("cordon: warning: a poststart hook failed: {e:#}"));
        }
    }
    Ok(())
}

/// Writes one message on the container's control channel.
fn send(sd: &StateDir, message: Message) -> Result<()> {
    let fifo = rustix::fs::open(
        sd.path(CONTROL),
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .context("the container's control channel")?;
    let bytes = message.encode();
    let n = rustix::io::write(&fifo, &bytes).context("the container's control channel")?;
    if n != bytes.len() {
        bail!("the container's control channel: short write");
    }
    Ok(())
}

/// Sends `signal` to the container's first process (with `all`, to every
/// process in it).
pub fn kill(sd: &StateDir, signal: i32, all: bool) -> Result<()> {
    let record = sd.load()?;
    let status = sd.status(&record);
    // runc's words for a container that has stopped ("container not
    // running"), which runc-based shims (containerd's, docker's) take for
    // a process already gone.
    let not_running = || anyhow::anyhow!("cannot signal container {}: container not running", record.id);
    if !matches!(status, Status::Created | Status::Running) {
        return Err(not_running());
    }
    if record.sandbox.is_some() {
        let container = Some(record.id.clone());
        let request = Request::Signal { signal: signal as u32, all, container };
        // Its sandbox let it go, or ended: it has stopped too.
        return super::join::ask(sd, &record, request).map_err(|_| not_running());
    }
    if signal == libc::SIGKILL && all {
        kill_process(&record);
        return Ok(());
    }
    send(sd, Message::Signal { signal: signal as u8, all })
}

/// Ends the container's process (and with it the sentry, its child, which
/// dies with it) and waits until both are gone.
pub fn kill_process(record: &Record) {
    let open = |pid: i32| {
        rustix::process::Pid::from_raw(pid)
            .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
    };
    let Some(pidfd) = open(record.pid) else { return };
    // Opened first, checked after: the descriptor is that process's even
    // if the pid is reused later.
    if !state::process_is(record.pid, record.pid_start) {
        return;
    }
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", record.pid)).unwrap_or_default();
    let sentries: Vec<OwnedFd> = children.split_whitespace().filter_map(|p| p.parse().ok()).filter_map(open).collect();
    let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
    for fd in std::iter::once(&pidfd).chain(&sentries) {
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let _ = rustix::event::poll(&mut fds, None);
    }
}

/// Removes a stopped container (with `force`, any: a created or running
/// one is killed first) and runs the poststop hooks.
pub fn delete(sd: &StateDir, force: bool) -> Result<()> {
    let record = match sd.load() {
        Ok(r) => r,
        Err(e) if force && !sd.dir.join(state::STATE_FILE).exists() => {
            // What a create that died half way left.
            if sd.dir.exists() {
                return sd.remove();
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    match sd.status(&record) {
        Status::Stopped => {}
        // runc deletes a created container: its program never ran.
        Status::Created | Status::Creating => kill_process(&record),
        Status::Running if force => kill_process(&record),
        Status::Running => bail!("cannot delete container {} that is not stopped: running", record.id),
    }
    sd.remove()?;
    let state_json = sd.oci_state(&record, Status::Stopped).to_string();
    for hook in record.hooks.as_ref().and_then(|h| h.poststop().clone()).into_iter().flatten() {
        if let Err(e) = run_hook(&hook, &state_json) {
            // Not an error of the command, as the spec has it: said all the same.
            sentry::diag::line(format_args!("cordon: warning: a poststop hook failed: {e:#}"));
        }
    }
    Ok(())
}

/// Runs a hook with the state on its stdin; an exit other than 0, or
/// running past its timeout, is its failure.
fn run_hook(hook: &Hook, state_json: &str) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let path = hook.path();
    let shown = path.display().to_string();
    let args = hook.args().clone().unwrap_or_default();
    let mut cmd = std::process::Command::new(path);
    if let Some((first, rest)) = args.split_first() {
        cmd.arg0(first).args(rest);
    }
    cmd.env_clear();
    for e in hook.env().iter().flatten() {
        if let Some((k, v)) = e.split_once('=') {
            cmd.env(k, v);
        }
    }
    cmd.stdin(std::process::Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("hook {shown}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its state is no failure.
        let _ = std::io::Write::write_all(&mut stdin, state_json.as_bytes());
    }
    let status = match hook.timeout() {
        Some(secs) if secs > 0 => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs as u64);
            loop {
                if let Some(s) = child.try_wait()? {
                    break s;
                }
                if std::time::Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("hook {shown}: timed out after {secs}s");
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        _ => child.wait()?,
    };
    if !status.success() {
        bail!("hook {shown}: {status}");
    }
    Ok(())
}

/// `run`: create, start, wait for the container's end, delete; the exit
/// status is the container's. Signals cordon is sent go to the container's
/// first process, as runc passes them on.
pub fn run(
    opts: &CreateOptions,
    container: Container,
    spec: &oci_spec::runtime::Spec,
    detach: bool,
) -> Result<ExitCode> {
    // Blocked before the container's process is forked: it unblocks what
    // it needs, and none is lost between here and the wait.
    let mut set = sentry::sandbox::forwarded_set();
    // SAFETY: sigaddset fills a set we own; pthread_sigmask changes only
    // this (single) thread's mask.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let pid = create(opts, container, spec)?;
    let sd = StateDir::of(opts.root, opts.id)?;
    if let Err(e) = start(&sd) {
        let _ = delete(&sd, true);
        return Err(e);
    }
    if detach {
        return Ok(ExitCode::SUCCESS);
    }
    let code = loop {
        // SAFETY: an all-zero siginfo_t is valid to fill; the set's
        // signals are all blocked in this single-threaded process.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig == libc::SIGCHLD {
            let mut status = 0;
            // SAFETY: waits for our own child without blocking.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                break if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status) as u8
                } else {
                    (128 + libc::WTERMSIG(status)) as u8
                };
            }
        } else if sig > 0 {
            let _ = kill(&sd, sig, false);
        }
    };
    delete(&sd, true)?;
    Ok(ExitCode::from(code))
}

/// A name or number of a signal, as `kill` takes it: `TERM`, `SIGTERM`,
/// `15`.
pub fn parse_signal(s: &str) -> Result<i32> {
    if let Ok(n) = s.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
        bail!("invalid signal {s}");
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let fixed = [
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("ILL", libc::SIGILL),
        ("TRAP", libc::SIGTRAP),
        ("ABRT", libc::SIGABRT),
        ("IOT", libc::SIGIOT),
        ("BUS", libc::SIGBUS),
        ("FPE", libc::SIGFPE),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("SEGV", libc::SIGSEGV),
        ("USR2", libc::SIGUSR2),
        ("PIPE", libc::SIGPIPE),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
        ("STKFLT", libc::SIGSTKFLT),
        ("CHLD", libc::SIGCHLD),
        ("CONT", libc::SIGCONT),
        ("STOP", libc::SIGSTOP),
        ("TSTP", libc::SIGTSTP),
        ("TTIN", libc::SIGTTIN),
        ("TTOU", libc::SIGTTOU),
        ("URG", libc::SIGURG),
        ("XCPU", libc::SIGXCPU),
        ("XFSZ", libc::SIGXFSZ),
        ("VTALRM", libc::SIGVTALRM),
        ("PROF", libc::SIGPROF),
        ("WINCH", libc::SIGWINCH),
        ("IO", libc::SIGIO),
        ("POLL", libc::SIGPOLL),
        ("PWR", libc::SIGPWR),
        ("SYS", libc::SIGSYS),
    ];
    if let Some((_, n)) = fixed.iter().find(|(n, _)| *n == name) {
        return Ok(*n);
    }
    // SIGRTMIN+N and SIGRTMAX-N, as Linux numbers them (34 to 64).
    let rt = |base: i32, rest: &str, sign: i32| -> Option<i32> {
        let off: i32 = if rest.is_empty() { 0 } else { rest.parse().ok()? };
        Some(base + sign * off).filter(|n| (34..=64).contains(n))
    };
    let found = if let Some(rest) = name.strip_prefix("RTMIN") {
        rt(34, rest.trim_start_matches('+'), 1)
    } else if let Some(rest) = name.strip_prefix("RTMAX") {
        rt(64, rest.trim_start_matches('-'), -1)
    } else {
        None
    };
    found.with_context(|| format!("unknown signal {s:?}"))
}

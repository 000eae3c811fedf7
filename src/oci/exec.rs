//! `exec`, `ps` and `events --stats`: requests on a running container's
//! control socket (see `sentry::control`).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use oci_spec::runtime::Process;
use sentry::control::{ProcessSpec, Reply, Request, receive_frame, send_frame};

use super::state::{StateDir, Status};

/// What `exec` is asked for besides the container.
pub struct ExecOptions {
    pub process: Option<PathBuf>,
    pub terminal: bool,
    pub console_socket: Option<PathBuf>,
    pub detach: bool,
    pub pid_file: Option<PathBuf>,
    pub cwd: Option<String>,
    pub env: Vec<String>,
    pub user: Option<String>,
    pub command: Vec<String>,
}

/// Connects to the control socket of the sentry that serves a running
/// container; returns the connection and the container's name in that
/// sentry (None for its first container).
fn connect(sd: &StateDir) -> Result<(UnixStream, Option<String>)> {
    let record = sd.load()?;
    if sd.status(&record) != Status::Running {
        bail!("container {} is not running", record.id);
    }
    let (served, name) = sd.served_at(&record)?;
    Ok((served.with_socket_path(|p| UnixStream::connect(p))?, name))
}

/// One request, made for the container's name in its sentry, and its one
/// answer.
fn ask(sd: &StateDir, request: impl FnOnce(Option<String>) -> Request) -> Result<Reply> {
    let (conn, name) = connect(sd)?;
    send_frame(conn.as_fd(), &request(name), &[]).context("the container's control socket")?;
    match receive_frame::<Reply>(conn.as_fd()).context("the container's control socket")? {
        Some((Reply::Error { message, .. }, _)) => bail!("{message}"),
        Some((reply, _)) => Ok(reply),
        None => bail!("the container closed its control socket"),
    }
}

/// The process to start: `--process FILE` whole, else the container's own
/// `process` with the command and the flags in its place.
fn process_spec(sd: &StateDir, opts: &ExecOptions) -> Result<(ProcessSpec, bool)> {
    let process: Process = match &opts.process {
        Some(path) => {
            let text = std::fs::read(path).with_context(|| format!("--process {}", path.display()))?;
            serde_json::from_slice(&text).with_context(|| format!("--process {}", path.display()))?
        }
        None => {
            let record = sd.load()?;
            let spec = super::spec::load(&record.bundle)?;
            let mut p = spec.process().clone().context("config.json: process is required")?;
            if opts.command.is_empty() {
                bail!("exec: no command given");
            }
            p.set_args(Some(opts.command.clone()));
            p.set_terminal(Some(opts.terminal));
            p
        }
    };
    let mut spec = super::spec::process(&process)?;
    if let Some(cwd) = &opts.cwd {
        spec.cwd = cwd.clone();
    }
    for e in &opts.env {
        let name = e.split('=').next().unwrap_or("");
        spec.env.retain(|x| x.split('=').next() != Some(name));
        spec.env.push(e.clone());
    }
    if let Some(user) = &opts.user {
        let (uid, gid) = user.split_once(':').unwrap_or((user, ""));
        spec.uid = uid.parse().with_context(|| format!("--user {user}: a numeric uid[:gid]"))?;
        if !gid.is_empty() {
            spec.gid = gid.parse().with_context(|| format!("--user {user}: a numeric uid[:gid]"))?;
        }
    }
    Ok((spec, process.terminal().unwrap_or(false) || opts.terminal))
}

/// Starts a process in the container; its exit status is the process's
/// (with `--detach`, a child of cordon's waits for it and exits so, and
/// the pid file names that child).
pub fn exec(sd: &StateDir, opts: &ExecOptions) -> Result<ExitCode> {
    let (spec, terminal) = process_spec(sd, opts)?;
    let (conn, container) = connect(sd)?;
    // The terminal's host side: a pty whose master goes to the console
    // socket, or the caller's own terminal.
    let mut raw_restore = None;
    let console = match (terminal, &opts.console_socket) {
        (true, Some(path)) => {
            let slave = super::container::console_pty(path, None)?;
            // Raw, as the container's console is: the sandbox's own pty
            // echoes and translates line ends, once.
            raw(slave.as_fd())?;
            Some(slave)
        }
        (true, None) => {
            if !rustix::termios::isatty(std::io::stdin()) {
                bail!("exec with a terminal needs --console-socket or a terminal on stdin");
            }
            raw_restore = Some(raw(std::io::stdin().as_fd())?);
            None
        }
        (false, _) => None,
    };
    let request = Request::Exec { process: spec, terminal, container };
    use rustix::stdio::{stderr, stdin, stdout};
    let stdio: Vec<BorrowedFd> = match &console {
        Some(slave) => vec![slave.as_fd()],
        None if terminal => vec![stdin()],
        None => vec![stdin(), stdout(), stderr()],
    };
    // The sentry has its own copies now: the slave here would keep the
    // terminal open after the process ends.
    let sent = send_frame(conn.as_fd(), &request, &stdio).context("the container's control socket");
    drop(stdio);
    drop(console);
    let outcome = (|| -> Result<ExitCode> {
        sent?;
        match receive_frame::<Reply>(conn.as_fd()).context("the container's control socket")? {
            Some((Reply::Started { .. }, _)) => {}
            Some((Reply::Error { message, status }, _)) => {
                sentry::diag::line(format_args!("cordon: exec: {message}"));
                return Ok(ExitCode::from(status as u8));
            }
            _ => bail!("the container closed its control socket"),
        }
        if opts.detach {
            let pid = stand_in(conn.into())?;
            if let Some(path) = &opts.pid_file {
                std::fs::write(path, pid.to_string()).with_context(|| format!("--pid-file {}", path.display()))?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(path) = &opts.pid_file {
            std::fs::write(path, std::process::id().to_string())
                .with_context(|| format!("--pid-file {}", path.display()))?;
        }
        Ok(ExitCode::from(wait_exited(conn.as_fd())))
    })();
    if let Some(t) = raw_restore {
        // SAFETY: puts back the terminal settings read before, on stdin.
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) };
    }
    outcome
}

/// Waits for the process's end on the connection; its status as a shell
/// gives it (255 if the sandbox ended without saying). Meanwhile the
/// signals this process receives are the process's: they are forwarded
/// (all but those no one can catch, and SIGCHLD, which is this process's
/// own business).
fn wait_exited(conn: BorrowedFd) -> u8 {
    let forwarded = match ForwardedSignals::block() {
        Ok(f) => f,
        Err(e) => {
            sentry::diag::line(format_args!("cordon: exec: signals will not be forwarded: {e}"));
            return match receive_frame::<Reply>(conn) {
                Ok(Some((Reply::Exited { status }, _))) => status as u8,
                _ => 255,
            };
        }
    };
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        let mut fds = [PollFd::new(&conn, PollFlags::IN), PollFd::new(&forwarded.fd, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return 255,
        }
        if !fds[1].revents().is_empty() {
            if let Some(signal) = forwarded.take() {
                let _ = send_frame(conn, &Request::SignalProcess { signal }, &[]);
            }
            continue;
        }
        if !fds[0].revents().is_empty() {
            return match receive_frame::<Reply>(conn) {
                Ok(Some((Reply::Exited { status }, _))) => status as u8,
                _ => 255,
            };
        }
    }
}

/// The signals an exec forwards, blocked and read from a signalfd.
struct ForwardedSignals {
    fd: OwnedFd,
}

impl ForwardedSignals {
    fn block() -> std::io::Result<ForwardedSignals> {
        use std::os::fd::FromRawFd;
        // SAFETY: sigset_t is plain data; sigfillset/sigdelset initialise
        // and change the local set only.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe {
            libc::sigfillset(&mut set);
            for never in [libc::SIGKILL, libc::SIGSTOP, libc::SIGCHLD] {
                libc::sigdelset(&mut set, never);
            }
        }
        // SAFETY: blocks signals for this (single-threaded) process; the
        // set is valid.
        if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor for the same valid set.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: signalfd returned a new descriptor that nothing else owns.
        Ok(ForwardedSignals { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// The next pending signal's number, if one is.
    fn take(&self) -> Option<u32> {
        let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
        match rustix::io::read(&self.fd, &mut info) {
            Ok(n) if n == info.len() => Some(u32::from_ne_bytes(info[..4].try_into().unwrap())),
            _ => None,
        }
    }
}

/// Forks the process that stands for one started in a sandbox on the host
/// (an exec'd one, or a pod's container's first): it waits for its end on
/// `conn`, forwarding the signals it gets, and exits with its status.
/// Returns its pid.
pub fn stand_in(conn: OwnedFd) -> Result<i32> {
    // SAFETY: cordon has one thread here, so the child starts with a
    // consistent copy.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        let _ = rustix::process::setsid();
        // The process has its stdio from the sentry. The caller may wait
        // for the end of the pipes it gave `exec` for its own output
        // (containerd's shim does, for an exec with a terminal): this
        // child, which outlives `exec`, must not hold them.
        if let Ok(null) = rustix::fs::open("/dev/null", rustix::fs::OFlags::RDWR, rustix::fs::Mode::empty()) {
            use std::os::fd::AsRawFd;
            for target in 0..3 {
                // SAFETY: dup2 replaces this process's descriptors 0 to 2,
                // which nothing in it uses any more, with /dev/null.
                unsafe { libc::dup2(null.as_raw_fd(), target) };
            }
        }
        std::process::exit(wait_exited(conn.as_fd()).into());
    }
    Ok(pid)
}

/// Puts the terminal `fd` in raw mode; returns its settings before.
pub fn raw(fd: BorrowedFd) -> Result<libc::termios> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcgetattr fills a termios we own; cfmakeraw changes a copy,
    // which tcsetattr reads.
    unsafe {
        let mut before: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd.as_raw_fd(), &mut before) != 0 {
            return Err(std::io::Error::last_os_error()).context("the terminal");
        }
        let mut t = before;
        libc::cfmakeraw(&mut t);
        libc::tcsetattr(fd.as_raw_fd(), libc::TCSANOW, &t);
        Ok(before)
    }
}

/// The container's processes, by their pids inside.
pub fn ps(sd: &StateDir, json: bool) -> Result<ExitCode> {
    let Reply::Ps { pids } = ask(sd, |container| Request::Ps { container })? else {
        bail!("the container answered ps with something else")
    };
    if json {
        println!("{}", serde_json::to_string(&pids)?);
    } else {
        println!("PID");
        for p in pids {
            println!("{p}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `events --stats`: one stats event, as runc prints it.
pub fn stats(sd: &StateDir, id: &str) -> Result<ExitCode> {
    let Reply::Stats { memory_bytes, memory_limit_bytes, pids, pids_limit } = ask(sd, |_| Request::Stats)? else {
        bail!("the container answered stats with something else")
    };
    let event = serde_json::json!({
        "type": "stats",
        "id": id,
        "data": {
            "memory": {"usage": {"usage": memory_bytes, "limit": memory_limit_bytes}},
            "pids": {"current": pids, "limit": pids_limit.unwrap_or(0)},
        },
    });
    println!("{event}");
    Ok(ExitCode::SUCCESS)
}

/// `events` without `--stats`: one line of JSON, as runc prints it, for
/// each process the container's sandbox kills for want of memory, until
/// the container ends.
pub fn events(sd: &StateDir, id: &str) -> Result<ExitCode> {
    use std::io::Write;
    let (conn, _) = connect(sd)?;
    send_frame(conn.as_fd(), &Request::Events, &[]).context("the container's control socket")?;
    loop {
        match receive_frame::<Reply>(conn.as_fd()) {
            Ok(Some((Reply::Oom, _))) => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", serde_json::json!({"type": "oom", "id": id}))?;
                out.flush()?;
            }
            Ok(Some((Reply::Error { message, .. }, _))) => bail!("{message}"),
            Ok(Some(_)) => bail!("the container answered events with something else"),
            // The sandbox ended: so do its events.
            Ok(None) | Err(_) => return Ok(ExitCode::SUCCESS),
        }
    }
}

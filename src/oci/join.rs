//! A pod's containers: the first container of a pod (its sandbox, in the
//! CRI's words) has a sentry of its own, as any container does; each of
//! the pod's other containers joins that sentry, as gVisor runs a pod in
//! one sentry, so that they share its network stack, IPC and limits.
//!
//! `create` of a joining container hands the sentry, over its control
//! socket, what it cannot open itself once confined: copies of the
//! container's root and of its bind mounts' sources (read-only ones stay
//! read-only for the sentry too), and its stdio. The sentry lays out the
//! container's own tree of mounts and loads its first process, which waits
//! for `start`. A child of cordon's stands for that process on the host,
//! as for an exec: engines wait on it, signal it, and read its exit status.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{Context, Result, bail};
use sentry::control::{BindSpec, ContainerSpec, Reply, Request, receive_frame, send_frame};

use super::spec::Container;
use super::state::{Record, StateDir, Status};

/// Loads the container into the sentry of `sandbox`, its pod's sandbox
/// container (under the same root as `sd`); returns the pid of the process
/// that stands for its first process. `console`: the host side of its
/// terminal, if it has one.
pub fn create(
    sd: &StateDir,
    sandbox: &str,
    container: &Container,
    process: &oci_spec::runtime::Process,
    console: Option<OwnedFd>,
) -> Result<i32> {
    let pod = sd.sibling(sandbox)?;
    let record = pod.load().with_context(|| format!("the pod's sandbox container {sandbox}"))?;
    if record.sandbox.is_some() {
        bail!("container {sandbox} is itself one of a pod's containers, not the pod's sandbox");
    }
    if pod.status(&record) != Status::Running {
        bail!("the pod's sandbox container {sandbox} is not running");
    }
    let config = &container.config;
    let layout = config.container.clone().context("a pod's container needs its mounts")?;
    let root = served(&config.rootfs, false).with_context(|| format!("root.path {}", config.rootfs.display()))?;
    let mut binds = Vec::new();
    let mut sources = Vec::new();
    for b in &config.binds {
        let source = b.host.display().to_string();
        sources.push(served(&b.host, !b.read_only).with_context(|| format!("mounts: bind of {source}"))?);
        binds.push(BindSpec { source, at: b.at.clone(), read_only: b.read_only });
    }
    let id = sd.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let spec = ContainerSpec {
        id,
        process: super::spec::process(process)?,
        terminal: container.terminal,
        rootfs: config.rootfs.display().to_string(),
        read_only_root: config.read_only_root,
        binds,
        masks: config.masks.clone(),
        layout,
    };
    if let Some(slave) = &console {
        // Raw, as a container's console is: the sandbox's own pty echoes
        // and translates line ends, once.
        super::exec::raw(slave.as_fd())?;
    }
    use rustix::stdio::{stderr, stdin, stdout};
    let mut fds: Vec<BorrowedFd> = std::iter::once(root.as_fd()).chain(sources.iter().map(|s| s.as_fd())).collect();
    match &console {
        Some(slave) => fds.push(slave.as_fd()),
        None => fds.extend([stdin(), stdout(), stderr()]),
    }
    if fds.len() > sentry::control::MAX_FRAME_FDS {
        bail!("mounts: {} bind mounts, more than a pod's container may have", config.binds.len());
    }
    let conn = pod.with_socket_path(|p| UnixStream::connect(p))?;
    send_frame(conn.as_fd(), &Request::CreateContainer { container: spec }, &fds)
        .context("the pod's sandbox's control socket")?;
    // The sentry has its own copies now: the terminal's slave here would
    // keep it open after the container ends.
    drop(fds);
    drop(console);
    match receive_frame::<Reply>(conn.as_fd()).context("the pod's sandbox's control socket")? {
        Some((Reply::Started { .. }, _)) => {}
        Some((Reply::Error { message, .. }, _)) => bail!("{message}"),
        _ => bail!("the pod's sandbox closed its control socket"),
    }
    super::exec::stand_in(conn.into())
}

/// What the sentry is given of host directory `path`: a detached,
/// read-only (unless `writable`) copy of its mount tree without device or
/// set-id files; where the caller may not copy mounts (a user without
/// privilege), the directory itself, which the sentry resolves names
/// beneath as it does any bind mount's.
fn served(path: &Path, writable: bool) -> std::io::Result<OwnedFd> {
    match sentry::confine::served_copy(path, writable) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(rustix::fs::open(
            path,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?),
        other => other,
    }
}

/// A request about a pod's container (`record`'s), made on its sandbox's
/// control socket, whatever the container's own state.
pub fn ask(sd: &StateDir, record: &Record, request: Request) -> Result<()> {
    let (pod, _) = sd.served_at(record)?;
    let conn = pod.with_socket_path(|p| UnixStream::connect(p))?;
    send_frame(conn.as_fd(), &request, &[]).context("the pod's sandbox's control socket")?;
    match receive_frame::<Reply>(conn.as_fd()).context("the pod's sandbox's control socket")? {
        Some((Reply::Done, _)) => Ok(()),
        Some((Reply::Error { message, .. }, _)) => bail!("{message}"),
        _ => bail!("the pod's sandbox closed its control socket"),
    }
}

//! A bundle's `config.json` (runtime-spec 1.x) mapped onto the sandbox's
//! configuration. What the spec allows and a sandbox cannot honour is an
//! error naming the field; what runc also tolerates without effect is
//! accepted and listed as ignored in the README.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use oci_spec::runtime::{LinuxNamespaceType, Mount, PosixRlimitType, Spec};
use sentry::auth::{CapSet, Caps};
use sentry::sandbox::{Bind, PlatformKind, SandboxConfig, TmpfsSpec};
use sentry::task::{Creds, Rlimit};

/// Fewest bytes of memory a sandbox runs with (as `--memory` requires).
const MIN_MEMORY: u64 = 64 << 20;

/// What a container is made from: its sandbox's configuration and what
/// the runtime does around it.
pub struct Container {
    pub config: SandboxConfig,
    /// `process.terminal`: the program gets a terminal.
    pub terminal: bool,
    /// `process.consoleSize`, as (rows, columns).
    pub console_size: Option<(u16, u16)>,
}

/// The CRI's annotation saying whether a container is a pod's sandbox or
/// one of the pod's containers.
const CRI_CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";

/// Reads `bundle/config.json`.
pub fn load(bundle: &Path) -> Result<Spec> {
    let path = bundle.join("config.json");
    Spec::load(&path).with_context(|| format!("{}", path.display()))
}

/// Maps `spec` onto a sandbox configuration; relative paths are the
/// bundle's.
pub fn container(spec: &Spec, bundle: &Path, platform: PlatformKind, kvm_device: &Path) -> Result<Container> {
    let root = spec.root().as_ref().context("config.json: root is required")?;
    let rootfs = bundle.join(root.path());
    let rootfs = rootfs.canonicalize().with_context(|| format!("root.path {}", rootfs.display()))?;
    if !rootfs.is_dir() {
        bail!("root.path {}: not a directory", rootfs.display());
    }
    let process = spec.process().as_ref().context("config.json: process is required")?;
    let args: Vec<Vec<u8>> = process.args().clone().unwrap_or_default().into_iter().map(String::into_bytes).collect();
    if args.is_empty() || args[0].is_empty() {
        bail!("process.args: a program is required");
    }
    if process.command_line().is_some() {
        bail!("process.commandLine is for Windows");
    }
    let cwd = process.cwd();
    if !cwd.is_absolute() {
        bail!("process.cwd {}: must be an absolute path", cwd.display());
    }
    // A pod's other containers belong in its sandbox's sentry, sharing its
    // network and IPC; a sentry of their own would split the pod silently.
    if spec.annotations().as_ref().and_then(|a| a.get(CRI_CONTAINER_TYPE)).is_some_and(|t| t == "container") {
        bail!("annotations: {CRI_CONTAINER_TYPE}=container: joining a pod's sandbox is not supported yet");
    }
    let env: Vec<Vec<u8>> = process.env().clone().unwrap_or_default().into_iter().map(String::into_bytes).collect();
    let user = process.user();
    if user.username().is_some() {
        bail!("process.user.username is for Windows");
    }
    let mut creds = Creds::new(user.uid(), user.gid(), user.additional_gids().clone().unwrap_or_default());
    creds.caps = capabilities(process.capabilities().as_ref())?;
    let mut rlimits = Vec::new();
    for r in process.rlimits().iter().flatten() {
        if r.soft() > r.hard() {
            bail!("process.rlimits {:?}: soft limit above the hard one", r.typ());
        }
        rlimits.push((rlimit_number(r.typ()), Rlimit { cur: r.soft(), max: r.hard() }));
    }
    let hostname = match spec.hostname() {
        Some(h) if !h.is_empty() => crate::parse_hostname(h).map_err(|e| anyhow::anyhow!("hostname: {e}"))?,
        // As runc leaves the UTS namespace's name: the host's.
        _ => rustix::system::uname().nodename().to_string_lossy().into_owned(),
    };
    let linux = spec.linux().as_ref();
    let mut network = sentry::net::NetworkMode::Host;
    for ns in linux.and_then(|l| l.namespaces().as_ref()).into_iter().flatten() {
        if let Some(path) = ns.path() {
            bail!("linux.namespaces: joining the {:?} namespace at {} is not supported", ns.typ(), path.display());
        }
        // The sandbox has its own of every kind; only the network's
        // absence means something: the runtime's (the host's) network.
        if ns.typ() == LinuxNamespaceType::Network {
            network = sentry::net::NetworkMode::None;
        }
    }
    let resources = linux.and_then(|l| l.resources().as_ref());
    let memory = match resources.and_then(|r| r.memory().as_ref()).and_then(|m| m.limit()) {
        Some(limit) if limit > 0 => {
            let limit = limit as u64;
            if limit < MIN_MEMORY {
                bail!("linux.resources.memory.limit {limit}: below the sandbox's 64 MiB minimum");
            }
            limit
        }
        _ => crate::host_memory(),
    };
    let pids_limit = resources
        .and_then(|r| r.pids().as_ref())
        .map(|p| p.limit())
        .filter(|l| *l > 0)
        .map(|l| u32::try_from(l).unwrap_or(u32::MAX));
    let cpus = resources.and_then(|r| r.cpu().as_ref()).and_then(|c| match (c.quota(), c.period()) {
        (Some(q), Some(p)) if q > 0 && p > 0 => Some((q as u64).div_ceil(p).clamp(1, 1024) as u32),
        _ => None,
    });
    let mut binds = Vec::new();
    let mut tmpfs = Vec::new();
    for m in spec.mounts().iter().flatten() {
        match mount(m, bundle)? {
            Some(Mapped::Bind(b)) => binds.push(b),
            Some(Mapped::Tmpfs(t)) => {
                tmpfs.retain(|x: &TmpfsSpec| x.at != t.at);
                tmpfs.push(t)
            }
            None => {}
        }
    }
    let mut masks = Vec::new();
    for p in linux.and_then(|l| l.masked_paths().as_ref()).into_iter().flatten() {
        masks.push(absolute("linux.maskedPaths", p)?);
    }
    for p in linux.and_then(|l| l.readonly_paths().as_ref()).into_iter().flatten() {
        let at = absolute("linux.readonlyPaths", p)?;
        // The sentry's /proc and /sys let the sandbox change nothing but
        // its own processes' settings: read-only already.
        if crate::is_under(&at, b"/proc") || crate::is_under(&at, b"/sys") {
            continue;
        }
        let host = rootfs.join(String::from_utf8_lossy(&at[1..]).as_ref());
        if let Ok(host) = host.canonicalize()
            && host.starts_with(&rootfs)
        {
            binds.push(Bind { host, open_at: None, at, read_only: true });
        }
    }
    let config = SandboxConfig {
        rootfs,
        read_only_root: root.readonly().unwrap_or(false),
        rootfs_open_at: None,
        kvm_device: kvm_device.to_path_buf(),
        platform,
        program: args[0].clone(),
        args,
        env,
        cwd: cwd.as_os_str().as_encoded_bytes().to_vec(),
        creds,
        masks,
        make_dirs: Vec::new(),
        binds,
        tmpfs,
        strace: false,
        rewrite_sites: true,
        hostname,
        network,
        memory,
        cpus,
        pids_limit,
        profile: false,
        test_panic_syscall: false,
        terminal: process.terminal().unwrap_or(false),
        interactive: process.terminal().unwrap_or(false),
        umask: user.umask().unwrap_or(0o022),
        rlimits,
        no_new_privs: process.no_new_privileges().unwrap_or(false),
    };
    Ok(Container {
        terminal: config.terminal,
        console_size: process.console_size().map(|b| (b.height() as u16, b.width() as u16)),
        config,
    })
}

/// A process to start in a running container (`exec`), from its
/// `process` object.
pub fn process(process: &oci_spec::runtime::Process) -> Result<sentry::control::ProcessSpec> {
    let args = process.args().clone().unwrap_or_default();
    if args.is_empty() || args[0].is_empty() {
        bail!("process.args: a program is required");
    }
    let cwd = process.cwd();
    if !cwd.is_absolute() {
        bail!("process.cwd {}: must be an absolute path", cwd.display());
    }
    let user = process.user();
    let caps = capabilities(process.capabilities().as_ref())?;
    let mut rlimits = Vec::new();
    for r in process.rlimits().iter().flatten() {
        if r.soft() > r.hard() {
            bail!("process.rlimits {:?}: soft limit above the hard one", r.typ());
        }
        rlimits.push((rlimit_number(r.typ()), r.soft(), r.hard()));
    }
    Ok(sentry::control::ProcessSpec {
        args,
        env: process.env().clone().unwrap_or_default(),
        cwd: cwd.to_string_lossy().into_owned(),
        uid: user.uid(),
        gid: user.gid(),
        groups: user.additional_gids().clone().unwrap_or_default(),
        caps: [caps.effective, caps.permitted, caps.inheritable, caps.bounding, caps.ambient],
        umask: user.umask().unwrap_or(0o022),
        rlimits,
        no_new_privs: process.no_new_privileges().unwrap_or(false),
    })
}

fn absolute(field: &str, p: &str) -> Result<Vec<u8>> {
    if !p.starts_with('/') {
        bail!("{field} {p}: must be an absolute path");
    }
    Ok(p.as_bytes().to_vec())
}

/// The capability sets of `process.capabilities` (none given: none held).
/// Ambient ones outside permitted and inheritable are dropped, as Linux
/// drops them.
fn capabilities(caps: Option<&oci_spec::runtime::LinuxCapabilities>) -> Result<Caps> {
    let Some(caps) = caps else { return Ok(Caps::default()) };
    let set = |field: &str, s: &Option<oci_spec::runtime::Capabilities>| -> Result<CapSet> {
        let mut bits: CapSet = 0;
        for c in s.iter().flatten() {
            let name = c.to_string();
            let n = sentry::auth::cap::by_name(&name)
                .with_context(|| format!("process.capabilities.{field}: unknown capability {name}"))?;
            bits |= 1 << n;
        }
        Ok(bits)
    };
    let permitted = set("permitted", caps.permitted())?;
    let inheritable = set("inheritable", caps.inheritable())?;
    Ok(Caps {
        effective: set("effective", caps.effective())? & permitted,
        permitted,
        inheritable,
        bounding: set("bounding", caps.bounding())?,
        ambient: set("ambient", caps.ambient())? & permitted & inheritable,
    })
}

fn rlimit_number(t: PosixRlimitType) -> u32 {
    use PosixRlimitType::*;
    match t {
        RlimitCpu => libc::RLIMIT_CPU,
        RlimitFsize => libc::RLIMIT_FSIZE,
        RlimitData => libc::RLIMIT_DATA,
        RlimitStack => libc::RLIMIT_STACK,
        RlimitCore => libc::RLIMIT_CORE,
        RlimitRss => libc::RLIMIT_RSS,
        RlimitNproc => libc::RLIMIT_NPROC,
        RlimitNofile => libc::RLIMIT_NOFILE,
        RlimitMemlock => libc::RLIMIT_MEMLOCK,
        RlimitAs => libc::RLIMIT_AS,
        RlimitLocks => libc::RLIMIT_LOCKS,
        RlimitSigpending => libc::RLIMIT_SIGPENDING,
        RlimitMsgqueue => libc::RLIMIT_MSGQUEUE,
        RlimitNice => libc::RLIMIT_NICE,
        RlimitRtprio => libc::RLIMIT_RTPRIO,
        RlimitRttime => libc::RLIMIT_RTTIME,
    }
}

enum Mapped {
    Bind(Bind),
    Tmpfs(TmpfsSpec),
}

/// Where the sentry's own file systems are, which a spec's mount of that
/// type at that place asks for.
const OWN_FILE_SYSTEMS: &[(&str, &str)] = &[
    ("proc", "/proc"),
    ("sysfs", "/sys"),
    ("devpts", "/dev/pts"),
    ("mqueue", "/dev/mqueue"),
    ("cgroup", "/sys/fs/cgroup"),
    ("cgroup2", "/sys/fs/cgroup"),
    // A runtime's /dev: the sentry's has the devices a container gets.
    ("tmpfs", "/dev"),
];

/// One of `mounts`: a bind or tmpfs of the sandbox's, nothing for a file
/// system the sentry has there already, an error for the rest.
fn mount(m: &Mount, bundle: &Path) -> Result<Option<Mapped>> {
    let dest = m.destination();
    let shown = dest.display();
    if !dest.is_absolute() {
        bail!("mounts: destination {shown}: must be an absolute path");
    }
    let at: Vec<u8> = clean(dest)?;
    let options = m.options().clone().unwrap_or_default();
    let has = |o: &str| options.iter().any(|x| x == o);
    let is_bind = m.typ().as_deref() == Some("bind") || has("bind") || has("rbind");
    if is_bind {
        let source = m.source().as_ref().with_context(|| format!("mounts: bind at {shown}: no source"))?;
        let source = bundle.join(source);
        let host = source.canonicalize().with_context(|| format!("mounts: bind at {shown}: {}", source.display()))?;
        return Ok(Some(Mapped::Bind(Bind { host, open_at: None, at, read_only: has("ro") })));
    }
    let typ = m.typ().as_deref().unwrap_or("");
    let at_str = String::from_utf8_lossy(&at).into_owned();
    if OWN_FILE_SYSTEMS.iter().any(|(t, d)| *t == typ && *d == at_str) {
        return Ok(None);
    }
    match typ {
        "tmpfs" | "shm" => {
            let mut spec = TmpfsSpec { at, size: None, mode: 0o1777 };
            for o in &options {
                match o.split_once('=') {
                    Some(("size", v)) => {
                        spec.size =
                            Some(crate::parse_byte_count(v).map_err(|e| anyhow::anyhow!("mounts: {shown}: {e}"))?)
                    }
                    Some(("mode", v)) => {
                        spec.mode = u32::from_str_radix(v, 8)
                            .ok()
                            .filter(|m| *m <= 0o7777)
                            .with_context(|| format!("mounts: {shown}: invalid mode {v}"))?
                    }
                    _ => {}
                }
            }
            Ok(Some(Mapped::Tmpfs(spec)))
        }
        "proc" | "sysfs" | "devpts" | "mqueue" | "cgroup" | "cgroup2" => {
            let home = OWN_FILE_SYSTEMS.iter().find(|(t, _)| *t == typ).map_or("", |(_, d)| d);
            bail!("mounts: {typ} at {shown}: the sandbox has its {typ} at {home} only")
        }
        "" => bail!("mounts: {shown}: no type, and not a bind mount"),
        other => bail!("mounts: {other} at {shown}: mounts of this type are not supported"),
    }
}

/// `path` with `.` and repeated slashes gone; `..` refused.
fn clean(path: &Path) -> Result<Vec<u8>> {
    let comps: Vec<&[u8]> =
        path.as_os_str().as_encoded_bytes().split(|b| *b == b'/').filter(|c| !c.is_empty() && *c != b".").collect();
    if comps.contains(&b"..".as_slice()) {
        bail!("mounts: destination {}: may not contain ..", path.display());
    }
    if comps.is_empty() {
        bail!("mounts: cannot mount over the root");
    }
    Ok(comps.iter().flat_map(|c| [b"/".as_slice(), c]).flatten().copied().collect())
}

/// The bundle directory as given: absolute, as the state records it.
pub fn bundle_dir(bundle: Option<&Path>) -> Result<PathBuf> {
    let dir = match bundle {
        Some(b) => b.to_path_buf(),
        None => std::env::current_dir().context("the current directory")?,
    };
    dir.canonicalize().with_context(|| format!("--bundle {}", dir.display()))
}

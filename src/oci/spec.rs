//! A bundle's `config.json` (runtime-spec 1.x) mapped onto the sandbox's
//! configuration. What the spec allows and a sandbox cannot honour is an
//! error naming the field; what runc also tolerates without effect is
//! accepted and listed as ignored in the README.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use oci_spec::runtime::{LinuxDevice, LinuxDeviceType, LinuxNamespaceType, Mount, PosixRlimitType, Spec};
use sentry::auth::{CapSet, Caps};
use sentry::fs::dentry::MountFlags;
use sentry::sandbox::{Bind, ContainerLayout, ContainerMount, DeviceSpec, MountKind, PlatformKind, SandboxConfig};
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
    /// The network namespace the sentry serves the sandbox's inet sockets
    /// from (None: the runtime's own, as for `--network=host`).
    pub network_namespace: Option<NetworkNamespace>,
    /// For a pod's container: the id of the pod's sandbox container, whose
    /// sentry it joins (sharing its network, IPC and limits) instead of
    /// getting one of its own.
    pub joins: Option<String>,
    /// It is a pod's sandbox container, whose sentry the pod's other
    /// containers join.
    pub pod_sandbox: bool,
}

/// The network namespace a container's sentry makes its host sockets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkNamespace {
    /// A new one with only its loopback up, as runc makes it: what an
    /// engine's prestart hook then gives an interface (docker's bridge).
    New,
    /// An existing one (`path`): an engine's, set up before `create`.
    Join(PathBuf),
}

/// The annotations saying whether a container is a pod's sandbox or one of
/// the pod's containers, and which pod's, as containerd's CRI plugin and
/// CRI-O set them: (type, its value for a pod's container, sandbox id).
const POD_ANNOTATIONS: [(&str, &str, &str); 2] = [
    ("io.kubernetes.cri.container-type", "container", "io.kubernetes.cri.sandbox-id"),
    ("io.kubernetes.cri-o.ContainerType", "container", "io.kubernetes.cri-o.SandboxID"),
];

/// True if `spec`'s container is a pod's sandbox container.
fn is_pod_sandbox(spec: &Spec) -> bool {
    let Some(annotations) = spec.annotations().as_ref() else { return false };
    POD_ANNOTATIONS.iter().any(|(kind, _, _)| annotations.get(*kind).is_some_and(|t| t == "sandbox"))
}

/// The id of the pod sandbox container that `spec`'s container belongs in,
/// if it is a pod's container.
fn pod_sandbox(spec: &Spec) -> Result<Option<String>> {
    let Some(annotations) = spec.annotations().as_ref() else { return Ok(None) };
    for (kind, container, sandbox) in POD_ANNOTATIONS {
        if annotations.get(kind).is_some_and(|t| t == container) {
            let id = annotations.get(sandbox).filter(|id| !id.is_empty());
            let id = id.with_context(|| format!("annotations: {kind}={container} without {sandbox}"))?;
            return Ok(Some(id.clone()));
        }
    }
    Ok(None)
}

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
    // network, IPC and limits.
    let joins = pod_sandbox(spec)?;
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
    let mut network_namespace = None;
    // A pod's container is in its sandbox's namespaces, which the engine
    // names by path: it shares that sentry's, which are those.
    let namespaces = linux.and_then(|l| l.namespaces().as_ref()).filter(|_| joins.is_none());
    for ns in namespaces.into_iter().flatten() {
        match (ns.typ(), ns.path()) {
            // An engine's network (a veth in its bridge, say): the sentry
            // serves the sandbox's inet sockets from inside it.
            (LinuxNamespaceType::Network, Some(path)) => {
                if !path.is_absolute() {
                    bail!("linux.namespaces: network namespace path {}: must be absolute", path.display());
                }
                network_namespace = Some(NetworkNamespace::Join(path.clone()));
            }
            (typ, Some(path)) => {
                bail!("linux.namespaces: joining the {typ:?} namespace at {} is not supported", path.display())
            }
            // The sandbox has its own of every other kind already. A new
            // network namespace is made for the sentry, which serves the
            // sandbox's inet sockets from it: engines move their
            // interfaces into it (docker from a prestart hook, given the
            // container's pid). Without one, the runtime's network.
            (LinuxNamespaceType::Network, None) => network_namespace = Some(NetworkNamespace::New),
            _ => {}
        }
    }
    // A pod's container lives within its sandbox's limits.
    let resources = linux.and_then(|l| l.resources().as_ref()).filter(|_| joins.is_none());
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
    let mut layout = ContainerLayout::default();
    for m in spec.mounts().iter().flatten() {
        layout.mounts.push(mount(m, bundle, &mut binds)?);
    }
    for d in linux.and_then(|l| l.devices().as_ref()).into_iter().flatten() {
        layout.devices.push(device(d)?);
    }
    let mut masks = Vec::new();
    for p in linux.and_then(|l| l.masked_paths().as_ref()).into_iter().flatten() {
        masks.push(absolute("linux.maskedPaths", p)?);
    }
    for p in linux.and_then(|l| l.readonly_paths().as_ref()).into_iter().flatten() {
        layout.read_only_paths.push(absolute("linux.readonlyPaths", p)?);
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
        tmpfs: Vec::new(),
        strace: false,
        rewrite_sites: true,
        hostname,
        network: sentry::net::NetworkMode::Host,
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
        // A container's process starts with every signal at its default
        // and none blocked, whatever the engine's own state.
        ignored_signals: sentry::signal::SigSet::EMPTY,
        blocked_signals: sentry::signal::SigSet::EMPTY,
        oom_score_adj: process.oom_score_adj().unwrap_or(0),
        container: Some(layout),
    };
    Ok(Container {
        terminal: config.terminal,
        console_size: process.console_size().map(|b| (b.height() as u16, b.width() as u16)),
        network_namespace,
        joins,
        pod_sandbox: is_pod_sandbox(spec),
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
        oom_score_adj: process.oom_score_adj().unwrap_or(0),
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

/// Where the sentry's own file systems go, which a spec's mount of that
/// type at that place asks for.
const OWN_FILE_SYSTEMS: &[(&str, &str, MountKind)] = &[
    ("proc", "/proc", MountKind::Proc),
    ("sysfs", "/sys", MountKind::Sysfs),
    ("devpts", "/dev/pts", MountKind::Devpts { ptmx_mode: 0 }),
    ("mqueue", "/dev/mqueue", MountKind::Mqueue),
    ("cgroup", "/sys/fs/cgroup", MountKind::Cgroup),
    ("cgroup2", "/sys/fs/cgroup", MountKind::Cgroup),
];

/// The per-mount flags `options` ask for; without an atime option, a
/// mount is relatime, as Linux makes it.
fn mount_flags(options: &[String]) -> MountFlags {
    let mut flags = MountFlags::empty();
    let mut atime_given = false;
    for o in options {
        flags |= match o.as_str() {
            "ro" => MountFlags::READ_ONLY,
            "nosuid" => MountFlags::NOSUID,
            "nodev" => MountFlags::NODEV,
            "noexec" => MountFlags::NOEXEC,
            "noatime" | "nodiratime" | "relatime" | "strictatime" => {
                atime_given = true;
                match o.as_str() {
                    "noatime" => MountFlags::NOATIME,
                    "nodiratime" => MountFlags::NODIRATIME,
                    "relatime" => MountFlags::RELATIME,
                    _ => MountFlags::empty(),
                }
            }
            _ => MountFlags::empty(),
        };
    }
    if !atime_given {
        flags |= MountFlags::RELATIME;
    }
    flags
}

/// One of `mounts` as the sandbox makes it: a bind (its source added to
/// `binds`), a tmpfs, or one of the sentry's own file systems at its
/// place; an error for the rest.
fn mount(m: &Mount, bundle: &Path, binds: &mut Vec<Bind>) -> Result<ContainerMount> {
    let dest = m.destination();
    let shown = dest.display();
    if !dest.is_absolute() {
        bail!("mounts: destination {shown}: must be an absolute path");
    }
    let at: Vec<u8> = clean(dest)?;
    let options = m.options().clone().unwrap_or_default();
    let has = |o: &str| options.iter().any(|x| x == o);
    let flags = mount_flags(&options);
    let source = m.source().as_ref().map(|s| s.display().to_string()).unwrap_or_default();
    let is_bind = m.typ().as_deref() == Some("bind") || has("bind") || has("rbind");
    if is_bind {
        let source = m.source().as_ref().with_context(|| format!("mounts: bind at {shown}: no source"))?;
        let source = bundle.join(source);
        let host = source.canonicalize().with_context(|| format!("mounts: bind at {shown}: {}", source.display()))?;
        binds.push(Bind { host: host.clone(), open_at: None, at: at.clone(), read_only: has("ro") });
        let kind = MountKind::Bind(binds.len() - 1);
        return Ok(ContainerMount { at, source: host.display().to_string(), kind, flags });
    }
    let typ = m.typ().as_deref().unwrap_or("");
    let at_str = String::from_utf8_lossy(&at).into_owned();
    if let Some((_, _, kind)) = OWN_FILE_SYSTEMS.iter().find(|(t, d, _)| *t == typ && *d == at_str) {
        let kind = match kind {
            MountKind::Devpts { .. } => {
                let ptmx_mode = options
                    .iter()
                    .find_map(|o| o.strip_prefix("ptmxmode="))
                    .map(|v| u32::from_str_radix(v, 8).ok().filter(|m| *m <= 0o777))
                    .unwrap_or(Some(0))
                    .with_context(|| format!("mounts: {shown}: invalid ptmxmode"))?;
                MountKind::Devpts { ptmx_mode }
            }
            other => other.clone(),
        };
        return Ok(ContainerMount { at, source, kind, flags });
    }
    match typ {
        "tmpfs" | "shm" => {
            let (mut size, mut mode) = (None, 0o1777);
            for o in &options {
                match o.split_once('=') {
                    Some(("size", v)) => {
                        size = Some(crate::parse_byte_count(v).map_err(|e| anyhow::anyhow!("mounts: {shown}: {e}"))?)
                    }
                    Some(("mode", v)) => {
                        mode = u32::from_str_radix(v, 8)
                            .ok()
                            .filter(|m| *m <= 0o7777)
                            .with_context(|| format!("mounts: {shown}: invalid mode {v}"))?
                    }
                    _ => {}
                }
            }
            // A tmpfs at /dev is a container's /dev: the devices and links
            // runc puts there come with it.
            let kind = if at == b"/dev" { MountKind::Dev { size, mode } } else { MountKind::Tmpfs { size, mode } };
            Ok(ContainerMount { at, source, kind, flags })
        }
        "proc" | "sysfs" | "devpts" | "mqueue" | "cgroup" | "cgroup2" => {
            let home = OWN_FILE_SYSTEMS.iter().find(|(t, _, _)| *t == typ).map_or("", |(_, d, _)| d);
            bail!("mounts: {typ} at {shown}: the sandbox has its {typ} at {home} only")
        }
        "" => bail!("mounts: {shown}: no type, and not a bind mount"),
        other => bail!("mounts: {other} at {shown}: mounts of this type are not supported"),
    }
}

/// One of `linux.devices`: a node of its type, number, permissions (0666
/// unless given) and owner.
fn device(d: &LinuxDevice) -> Result<DeviceSpec> {
    let path = absolute("linux.devices", &d.path().display().to_string())?;
    let kind = match d.typ() {
        LinuxDeviceType::C | LinuxDeviceType::U => libc::S_IFCHR,
        LinuxDeviceType::B => libc::S_IFBLK,
        LinuxDeviceType::P => libc::S_IFIFO,
        LinuxDeviceType::A => bail!("linux.devices {}: type a is for resources.devices only", d.path().display()),
    };
    let (major, minor) = (u32::try_from(d.major()), u32::try_from(d.minor()));
    let (Ok(major), Ok(minor)) = (major, minor) else {
        bail!("linux.devices {}: invalid device number", d.path().display())
    };
    let rdev = if kind == libc::S_IFIFO { 0 } else { libc::makedev(major, minor) };
    Ok(DeviceSpec {
        path,
        mode: kind | (d.file_mode().unwrap_or(0o666) & 0o7777),
        rdev,
        uid: d.uid().unwrap_or(0),
        gid: d.gid().unwrap_or(0),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mount_options_become_per_mount_flags() {
        let f = mount_flags(&opts(&["nosuid", "noexec", "nodev", "ro"]));
        let want = MountFlags::NOSUID | MountFlags::NOEXEC | MountFlags::NODEV | MountFlags::READ_ONLY;
        assert_eq!(f, want | MountFlags::RELATIME, "relatime unless an atime option says otherwise");
        assert_eq!(mount_flags(&opts(&["nosuid", "strictatime", "mode=755"])), MountFlags::NOSUID);
        assert_eq!(mount_flags(&opts(&["noatime"])), MountFlags::NOATIME);
    }

    fn one_mount(json: serde_json::Value) -> Result<ContainerMount> {
        let m: Mount = serde_json::from_value(json).unwrap();
        mount(&m, Path::new("/"), &mut Vec::new())
    }

    #[test]
    fn a_tmpfs_at_dev_is_a_containers_dev() {
        let m = one_mount(serde_json::json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}))
        .unwrap();
        assert_eq!(m.kind, MountKind::Dev { size: Some(64 << 20), mode: 0o755 });
        assert_eq!(m.source, "tmpfs");
        let m = one_mount(serde_json::json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm"})).unwrap();
        assert_eq!(m.kind, MountKind::Tmpfs { size: None, mode: 0o1777 });
    }

    #[test]
    fn devpts_and_mqueue_are_the_sentrys_at_their_places_only() {
        let m = one_mount(serde_json::json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts",
            "options": ["newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}))
        .unwrap();
        assert_eq!(m.kind, MountKind::Devpts { ptmx_mode: 0o666 });
        let m = one_mount(serde_json::json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue"}));
        assert_eq!(m.unwrap().kind, MountKind::Mqueue);
        assert!(one_mount(serde_json::json!({"destination": "/mq", "type": "mqueue", "source": "mqueue"})).is_err());
        let bad = serde_json::json!({"destination": "/dev/pts", "type": "devpts", "options": ["ptmxmode=999"]});
        assert!(one_mount(bad).is_err());
    }

    #[test]
    fn a_pods_container_names_its_sandbox() {
        let with = |annotations: serde_json::Value| -> Spec {
            serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2", "annotations": annotations})).unwrap()
        };
        let cri = with(serde_json::json!({
            "io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-id": "pod"}));
        assert_eq!(pod_sandbox(&cri).unwrap().as_deref(), Some("pod"));
        let crio = with(serde_json::json!({
            "io.kubernetes.cri-o.ContainerType": "container", "io.kubernetes.cri-o.SandboxID": "p2"}));
        assert_eq!(pod_sandbox(&crio).unwrap().as_deref(), Some("p2"));
        let sandbox = with(serde_json::json!({
            "io.kubernetes.cri.container-type": "sandbox", "io.kubernetes.cri.sandbox-id": "pod"}));
        assert_eq!(pod_sandbox(&sandbox).unwrap(), None, "the sandbox has a sentry of its own");
        assert_eq!(pod_sandbox(&with(serde_json::json!({}))).unwrap(), None);
        let orphan = with(serde_json::json!({"io.kubernetes.cri.container-type": "container"}));
        assert!(pod_sandbox(&orphan).is_err(), "a pod's container without its sandbox's id");
    }

    #[test]
    fn devices_keep_their_type_number_mode_and_owner() {
        let d: LinuxDevice = serde_json::from_value(serde_json::json!({"path": "/dev/test1", "type": "c",
            "major": 10, "minor": 666, "fileMode": 0o660, "uid": 1, "gid": 2}))
        .unwrap();
        let d = device(&d).unwrap();
        assert_eq!(d.mode, libc::S_IFCHR | 0o660);
        assert_eq!(d.rdev, libc::makedev(10, 666));
        assert_eq!((d.uid, d.gid), (1, 2));
        let p: LinuxDevice = serde_json::from_value(serde_json::json!({"path": "/dev/p", "type": "p"})).unwrap();
        let p = device(&p).unwrap();
        assert_eq!((p.mode, p.rdev), (libc::S_IFIFO | 0o666, 0));
        let a: LinuxDevice = serde_json::from_value(serde_json::json!({"path": "/dev/a", "type": "a"})).unwrap();
        assert!(device(&a).is_err());
    }
}

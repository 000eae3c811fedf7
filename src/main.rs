//! `cordon`: run unmodified Linux programs in a sandbox whose kernel is our
//! own.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use sentry::confine::{self, HostNetwork, Role};
use sentry::net::NetworkMode;
use sentry::net::publish::{self, PublishSpec};
use sentry::sandbox::{Bind, PlatformKind, Sandbox, SandboxConfig, TmpfsSpec};
use sentry::signal::SigSet;
use sentry::task::ExitStatus;
use sentry::{diag, internal_error};

mod install;
mod oci;
mod platforms;

#[derive(Parser)]
#[command(name = "cordon", version, about = "Run Linux programs in a KVM sandbox with a kernel of its own")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROGRAM inside a new sandbox.
    Run(Box<RunArgs>),
    /// List the platforms, what each costs here, and auto's choice.
    ///
    /// One line per platform: available, with its measured system call
    /// round trip and first-touch fault, or why not; `<- auto` marks the
    /// one `--platform auto` picks.
    Platforms(PlatformsArgs),
    /// Register cordon as a runtime of a container engine.
    ///
    /// `--docker` adds it to docker's daemon.json (merged with the keys and
    /// runtimes there); arguments after `--` are passed to cordon before
    /// each runtime command, e.g. `-- --platform=trap`. Restart dockerd
    /// (or send it SIGHUP) to use it: `docker run --runtime=cordon`.
    Install(install::InstallArgs),
}

#[derive(Args)]
struct PlatformsArgs {
    /// Measure again instead of using the costs cached for this host, and
    /// cache the new ones.
    #[arg(long)]
    calibrate: bool,
    /// KVM device to use.
    #[arg(long, value_name = "PATH", default_value = platform::kvm::DEFAULT_DEVICE)]
    kvm_device: PathBuf,
}

#[derive(Args)]
struct RunArgs {
    /// Host directory to use as the sandbox's root, shown whole (default:
    /// the host's /, with home directories, credentials and
    /// daemon state hidden).
    #[arg(long, value_name = "DIR")]
    rootfs: Option<PathBuf>,
    /// Keep the root read-only: every change fails with EROFS (default:
    /// writable, changes held in the sandbox's memory over the unchanged
    /// host tree).
    #[arg(long)]
    read_only: bool,
    /// Mount a host directory or file at an absolute path of the sandbox,
    /// writable unless `:ro` is given (repeatable); it shows even where the
    /// default root hides things.
    #[arg(short = 'v', long = "volume", value_name = "HOST:SANDBOX[:ro|:rw]")]
    volumes: Vec<OsString>,
    /// Mount a tmpfs (memory of the sandbox) at an absolute path, with
    /// options size=SIZE and mode=OCTAL (repeatable); /tmp, /dev/shm and
    /// /run are tmpfs already, and naming one replaces its options.
    #[arg(long = "tmpfs", value_name = "PATH[:size=N,mode=M]", value_parser = parse_tmpfs)]
    tmpfs: Vec<TmpfsSpec>,
    /// Start with no variables from the caller's environment at all.
    #[arg(long, conflicts_with = "env_all")]
    env_clear: bool,
    /// Pass the caller's whole environment (default: only PATH, LANG,
    /// LANGUAGE, LC_*, TERM and TZ, with HOME set inside the sandbox).
    #[arg(long)]
    env_all: bool,
    /// Set an environment variable, or pass the caller's NAME (repeatable).
    #[arg(short = 'e', long = "env", value_name = "NAME[=VALUE]")]
    env: Vec<OsString>,
    /// Working directory inside the sandbox (default: the caller's, when it
    /// exists inside the root, else /).
    #[arg(short = 'w', long = "workdir", value_name = "DIR")]
    workdir: Option<OsString>,
    /// Print each system call to stderr, as strace does.
    #[arg(long)]
    strace: bool,
    /// Leave the program's system call sites as they are, so that every
    /// call traps (on the trap platform, sites are otherwise rewritten to
    /// skip the trap after their first call); for measuring and debugging.
    #[arg(long)]
    no_rewrite: bool,
    /// Print cordon's own log (unsupported system calls, notices) to
    /// stderr; without it or --log, the program's streams are its own.
    #[arg(long)]
    debug: bool,
    /// Write cordon's own log to FILE.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// At exit, print where time went and what the sandbox held to stderr;
    /// with =FILE also write it to FILE as JSON (=json: JSON to stderr).
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "-")]
    profile: Option<OsString>,
    /// Host name the sandbox reports (uname).
    #[arg(long, value_name = "NAME", default_value = "cordon", value_parser = parse_hostname)]
    hostname: String,
    /// The network the sandbox's programs see: `none`, a network of its
    /// own with loopback only, or `host`, the host's.
    #[arg(long, value_name = "MODE", default_value = "none", value_parser = parse_network)]
    network: sentry::net::NetworkMode,
    /// Publish a port of the sandbox on the host (repeatable, docker's
    /// syntax): the host's IP (default: every IPv4 address) and HOSTPORT
    /// forward TCP connections, or UDP datagrams with /udp, to what
    /// listens on PORT inside. Not with --network=host.
    #[arg(short = 'p', long = "publish", value_name = "[IP:]HOSTPORT:PORT[/udp]", value_parser = parse_publish)]
    publish: Vec<PublishSpec>,
    /// Memory the sandbox may use, e.g. 4G or 512M (default: the host's RAM).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory: Option<u64>,
    /// Virtual CPUs that run application code at once (default: 3 per
    /// host CPU); other runnable threads take turns.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    cpus: Option<u32>,
    /// KVM device to use.
    #[arg(long, value_name = "PATH", default_value = platform::kvm::DEFAULT_DEVICE)]
    kvm_device: PathBuf,
    /// Platform that runs application code: kvm, trap (host stub
    /// processes under seccomp), or auto, the one measured fastest on
    /// this host (see `cordon platforms`). Default: $CORDON_PLATFORM, else
    /// auto.
    #[arg(long, value_name = "NAME", value_parser = parse_platform)]
    platform: Option<PlatformArg>,
    /// Most tasks (threads and processes) alive in the sandbox at once;
    /// fork and clone past it fail with EAGAIN (default: unlimited).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = clap::value_parser!(u32).range(1..))]
    pids_limit: Option<u32>,
    /// Add a capability to the container default that root in the sandbox
    /// holds (repeatable; docker's spelling: a name with or without CAP_,
    /// in any case, or ALL).
    #[arg(long = "cap-add", value_name = "CAP", value_parser = parse_capability)]
    cap_add: Vec<Capability>,
    /// Drop a capability from that set (repeatable; a name or ALL).
    #[arg(long = "cap-drop", value_name = "CAP", value_parser = parse_capability)]
    cap_drop: Vec<Capability>,
    /// Give the program a terminal of the sandbox's own, wired to the
    /// caller's (as its stdin, stdout, stderr and controlling terminal).
    #[arg(short = 't', long = "tty")]
    tty: bool,
    /// Keep stdin open: with -t, what the caller types goes to the
    /// program's terminal (the caller's terminal is put in raw mode).
    #[arg(short = 'i', long = "interactive")]
    interactive: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM [ARGS]...")]
    command: Vec<OsString>,
}

fn parse_network(s: &str) -> Result<sentry::net::NetworkMode, String> {
    match s {
        "none" => Ok(sentry::net::NetworkMode::None),
        "host" => Ok(sentry::net::NetworkMode::Host),
        _ => Err("the network is none or host".into()),
    }
}

/// A capability named on the command line, or every one (`ALL`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Capability {
    One(u32),
    All,
}

fn parse_capability(s: &str) -> Result<Capability, String> {
    if s.eq_ignore_ascii_case("ALL") {
        return Ok(Capability::All);
    }
    sentry::auth::cap::by_name(s).map(Capability::One).ok_or_else(|| format!("unknown capability \"{s}\""))
}

/// The capabilities the sandbox grants, as docker computes them from
/// --cap-add and --cap-drop: ALL added is every capability but those
/// dropped; ALL dropped is only those added; otherwise the container
/// default less those dropped, plus those added.
fn granted_capabilities(add: &[Capability], drop: &[Capability]) -> sentry::auth::CapSet {
    use sentry::auth::{ALL_CAPS, CONTAINER_DEFAULT, CapSet};
    let set = |list: &[Capability]| -> CapSet {
        list.iter().fold(0, |s, c| match c {
            Capability::One(n) => s | 1 << n,
            Capability::All => ALL_CAPS,
        })
    };
    if add.contains(&Capability::All) {
        ALL_CAPS & !set(drop)
    } else if drop.contains(&Capability::All) {
        set(add)
    } else {
        (CONTAINER_DEFAULT & !set(drop)) | set(add)
    }
}

fn parse_publish(s: &str) -> Result<PublishSpec, String> {
    PublishSpec::parse(s)
}

pub(crate) fn parse_hostname(s: &str) -> Result<String, String> {
    // Linux's HOST_NAME_MAX.
    if s.is_empty() || s.len() > 64 {
        return Err("a host name has 1 to 64 bytes".into());
    }
    Ok(s.to_string())
}

/// `--tmpfs PATH[:size=N,mode=M]`, as docker spells it.
fn parse_tmpfs(s: &str) -> Result<TmpfsSpec, String> {
    let (path, opts) = s.split_once(':').unwrap_or((s, ""));
    if !path.starts_with('/') {
        return Err(format!("'{path}' is not an absolute path"));
    }
    let mut spec = TmpfsSpec { at: path.as_bytes().to_vec(), size: None, mode: 0o1777 };
    for opt in opts.split(',').filter(|o| !o.is_empty()) {
        match opt.split_once('=') {
            Some(("size", v)) => spec.size = Some(parse_byte_count(v)?),
            Some(("mode", v)) => {
                spec.mode = u32::from_str_radix(v, 8)
                    .ok()
                    .filter(|m| *m <= 0o7777)
                    .ok_or_else(|| format!("invalid mode '{v}'"))?
            }
            _ => return Err(format!("unknown tmpfs option '{opt}' (known: size=, mode=)")),
        }
    }
    Ok(spec)
}

/// A byte count with an optional K, M, G or T suffix.
pub(crate) fn parse_byte_count(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("invalid size '{s}'"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size '{s}' is too large"))
}

/// The tmpfs mounts a sandbox has unless told otherwise, as a container
/// runtime gives them.
fn default_tmpfs() -> Vec<TmpfsSpec> {
    [("/tmp", 0o1777), ("/dev/shm", 0o1777), ("/run", 0o755)]
        .into_iter()
        .map(|(at, mode)| TmpfsSpec { at: at.as_bytes().to_vec(), size: None, mode })
        .collect()
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("invalid size '{s}'"))?;
    let bytes = n.checked_mul(mult).ok_or_else(|| format!("size '{s}' is too large"))?;
    if bytes < 64 << 20 {
        return Err(format!("size '{s}' is below the 64M minimum"));
    }
    Ok(bytes)
}

/// The host's physical memory, the default sandbox memory size.
pub(crate) fn host_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if n > 0 { n as u64 * pages } else { 4 << 30 }
}

fn build_config(args: RunArgs, platform: PlatformKind) -> Result<SandboxConfig> {
    // As docker refuses: a terminal fed from something that is not one.
    if args.tty && args.interactive && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        bail!("the input device is not a TTY");
    }
    // Masks hide the host's private places; a root the user chose is shown
    // as it is.
    let masking = args.rootfs.is_none();
    let rootfs = args.rootfs.unwrap_or_else(|| PathBuf::from("/"));
    let rootfs = rootfs.canonicalize().with_context(|| format!("--rootfs {}", rootfs.display()))?;
    if !rootfs.is_dir() {
        bail!("--rootfs {}: not a directory", rootfs.display());
    }
    let mut binds = args.volumes.iter().map(parse_volume).collect::<Result<Vec<_>>>()?;
    if args.network == NetworkMode::Host {
        if !args.publish.is_empty() {
            bail!("-p: with --network=host the sandbox's ports are the host's already");
        }
        binds.splice(0..0, host_network_files(&binds));
    }
    let home = sandbox_home(&rootfs, masking);
    let (masks, make_dirs) = if masking && home != b"/" {
        let mut masks = masked_paths();
        masks.push(home.clone());
        (masks, vec![home.clone()])
    } else if masking {
        (masked_paths(), Vec::new())
    } else {
        (Vec::new(), Vec::new())
    };
    let mut env: Vec<Vec<u8>> = if args.env_clear {
        Vec::new()
    } else if args.env_all {
        std::env::vars_os().map(|(k, v)| kv(&k, &v)).collect()
    } else {
        let mut env: Vec<Vec<u8>> =
            std::env::vars_os().filter(|(k, _)| passed_by_default(k.as_bytes())).map(|(k, v)| kv(&k, &v)).collect();
        env.push([b"HOME=".as_slice(), &home].concat());
        env
    };
    for e in &args.env {
        let b = e.as_bytes();
        let (name, value) = match b.iter().position(|c| *c == b'=') {
            Some(eq) => (&b[..eq], Some(b[eq + 1..].to_vec())),
            None => (b, None),
        };
        if name.is_empty() {
            bail!("-e {}: empty variable name", e.to_string_lossy());
        }
        // -e NAME passes the caller's value, if it has one, as docker does.
        let value = match value {
            Some(v) => v,
            None => match std::env::var_os(OsString::from_vec(name.to_vec())) {
                Some(v) => v.into_vec(),
                None => continue,
            },
        };
        env.retain(|x| !(x.starts_with(name) && x.get(name.len()) == Some(&b'=')));
        env.push([name, b"=", &value].concat());
    }
    let tmpfs = {
        let mut all = default_tmpfs();
        for t in args.tmpfs {
            all.retain(|d| d.at != t.at);
            all.push(t);
        }
        all
    };
    let cwd = match args.workdir {
        Some(w) => w.into_vec(),
        None => default_cwd(&rootfs, &masks, &binds, &tmpfs),
    };
    let command: Vec<Vec<u8>> = args.command.into_iter().map(OsString::into_vec).collect();
    Ok(SandboxConfig {
        rootfs,
        read_only_root: args.read_only,
        rootfs_open_at: None,
        kvm_device: args.kvm_device,
        platform,
        program: command[0].clone(),
        args: command,
        env,
        cwd,
        // The sandbox's first process has the caller's ids, whatever the
        // sentry's own become, and a container's capabilities, whatever
        // the caller's.
        creds: sentry::task::Creds::of_host(granted_capabilities(&args.cap_add, &args.cap_drop)),
        masks,
        make_dirs,
        binds,
        tmpfs,
        strace: args.strace,
        rewrite_sites: !args.no_rewrite,
        hostname: args.hostname,
        network: args.network,
        memory: args.memory.unwrap_or_else(host_memory),
        cpus: args.cpus,
        pids_limit: args.pids_limit,
        profile: args.profile.is_some(),
        test_panic_syscall: std::env::var_os(TEST_PANIC_VAR).is_some_and(|v| v == "1"),
        terminal: args.tty,
        interactive: args.interactive,
        umask: 0o022,
        ignored_signals: INHERITED_SIGNALS.get().map_or(SigSet::EMPTY, |s| s.0),
        blocked_signals: INHERITED_SIGNALS.get().map_or(SigSet::EMPTY, |s| s.1),
        rlimits: Vec::new(),
        no_new_privs: false,
        oom_score_adj: 0,
        container: None,
    })
}

/// What the default root hides: home directories, credentials, host keys
/// and the state of the host's daemons, as OCI runtimes' masked paths keep
/// them from a container.
const MASKED: &[&str] = &[
    "/root",
    "/home",
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/var/lib",
    "/var/log",
    "/var/mail",
    "/var/spool",
    "/var/backups",
];

/// Every masked path: the fixed ones and the host's private SSH host keys.
fn masked_paths() -> Vec<Vec<u8>> {
    let mut masks: Vec<Vec<u8>> = MASKED.iter().map(|p| p.as_bytes().to_vec()).collect();
    if let Ok(dir) = std::fs::read_dir("/etc/ssh") {
        let mut keys: Vec<Vec<u8>> = dir
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().as_bytes().ends_with(b"_key"))
            .map(|e| e.path().into_os_string().into_vec())
            .collect();
        keys.sort();
        masks.extend(keys);
    }
    masks
}

/// The environment variables passed from the caller by default: what
/// finding programs, locale and the terminal need, nothing that could be a
/// credential.
fn passed_by_default(name: &[u8]) -> bool {
    matches!(name, b"PATH" | b"LANG" | b"LANGUAGE" | b"TERM" | b"TZ") || name.starts_with(b"LC_")
}

/// HOME inside the sandbox: the caller's home path, which the default root
/// shows as an empty read-only directory; under --rootfs, the caller's
/// home if the tree has it, else /.
fn sandbox_home(rootfs: &std::path::Path, masking: bool) -> Vec<u8> {
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute() && h != "/");
    match home {
        Some(h) if masking || rootfs.join(h.strip_prefix("/").unwrap_or(&h)).is_dir() => {
            // One spelling, so the mask and the variable agree.
            let clean: PathBuf = h.components().collect();
            clean.into_os_string().into_vec()
        }
        _ => b"/".to_vec(),
    }
}

/// With `--network=host`, the host's name resolution: its
/// `/etc/resolv.conf` and `/etc/hosts`, the files they lead to (a
/// resolv.conf is often a link into the host's /run, which the sandbox
/// does not show), read-only, where the user mounts nothing else.
fn host_network_files(binds: &[Bind]) -> Vec<Bind> {
    ["/etc/resolv.conf", "/etc/hosts"]
        .into_iter()
        .filter(|at| !binds.iter().any(|b| b.at == at.as_bytes()))
        .filter_map(|at| {
            let host = std::fs::canonicalize(at).ok().filter(|h| h.is_file())?;
            Some(Bind { host, open_at: None, at: at.as_bytes().to_vec(), read_only: true })
        })
        .collect()
}

/// `-v HOST:SANDBOX[:ro|:rw]`, as docker writes it: writable unless `ro`.
fn parse_volume(v: &OsString) -> Result<Bind> {
    let shown = v.to_string_lossy();
    let parts: Vec<&[u8]> = v.as_bytes().split(|b| *b == b':').collect();
    let (host, at, read_only) = match parts.as_slice() {
        [host, at] => (*host, *at, false),
        [host, at, b"ro"] => (*host, *at, true),
        [host, at, b"rw"] => (*host, *at, false),
        [_, _, opt] => bail!("-v {shown}: unknown option '{}' (expected ro or rw)", String::from_utf8_lossy(opt)),
        _ => bail!("-v {shown}: expected HOST:SANDBOX[:ro|:rw]"),
    };
    if host.is_empty() {
        bail!("-v {shown}: empty host path");
    }
    let host = PathBuf::from(OsString::from_vec(host.to_vec()));
    let host = host.canonicalize().with_context(|| format!("-v {shown}: host path {}", host.display()))?;
    if at.first() != Some(&b'/') {
        bail!("-v {shown}: the sandbox path must be absolute");
    }
    let comps: Vec<&[u8]> = at.split(|b| *b == b'/').filter(|c| !c.is_empty()).collect();
    if comps.is_empty() {
        bail!("-v {shown}: cannot mount over the sandbox's root");
    }
    if comps.iter().any(|c| *c == b"." || *c == b"..") {
        bail!("-v {shown}: the sandbox path may not contain . or ..");
    }
    let at = comps.iter().flat_map(|c| [b"/".as_slice(), c]).flatten().copied().collect();
    Ok(Bind { host, open_at: None, at, read_only })
}

/// Set to 1 (by cordon's own tests only), it makes a system call number
/// that Linux leaves unused panic in the sentry, as a bug would.
const TEST_PANIC_VAR: &str = "CORDON_TEST_PANIC_SYSCALL";

fn kv(k: &OsString, v: &OsString) -> Vec<u8> {
    let mut e = k.as_bytes().to_vec();
    e.push(b'=');
    e.extend_from_slice(v.as_bytes());
    e
}

/// True if `path` is `prefix` or lies below it.
pub(crate) fn is_under(path: &[u8], prefix: &[u8]) -> bool {
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

/// The caller's working directory, if the sandbox has a directory at that
/// path (from the mount covering it, else from the root where no mask
/// hides it); else /. Of a bind and a tmpfs both covering it the deeper
/// one is the one seen; a tmpfs starts empty, so only its own top is there
/// (a cwd in the host's /tmp is not in the sandbox's).
fn default_cwd(rootfs: &std::path::Path, masks: &[Vec<u8>], binds: &[Bind], tmpfs: &[TmpfsSpec]) -> Vec<u8> {
    let Ok(cwd) = std::env::current_dir() else { return b"/".to_vec() };
    let path = cwd.as_os_str().as_bytes();
    cwd_in_sandbox(path, rootfs, masks, binds, tmpfs).unwrap_or_else(|| b"/".to_vec())
}

fn cwd_in_sandbox(
    path: &[u8],
    rootfs: &std::path::Path,
    masks: &[Vec<u8>],
    binds: &[Bind],
    tmpfs: &[TmpfsSpec],
) -> Option<Vec<u8>> {
    let relative = |p: &[u8]| PathBuf::from(OsString::from_vec(p.strip_prefix(b"/").unwrap_or(p).to_vec()));
    let bind = binds.iter().rev().find(|b| is_under(path, &b.at));
    let tmp = tmpfs.iter().filter(|t| is_under(path, &t.at)).max_by_key(|t| t.at.len());
    let shown = match (bind, tmp) {
        (_, Some(t)) if bind.is_none_or(|b| t.at.len() >= b.at.len()) => path.len() == t.at.len(),
        (Some(b), _) => b.host.join(relative(&path[b.at.len()..])).is_dir(),
        (None, _) => !masks.iter().any(|m| is_under(path, m)) && rootfs.join(relative(path)).is_dir(),
    };
    shown.then(|| path.to_vec())
}

/// Where the profile goes.
enum ProfileOut {
    Text,
    Json,
    /// The file is opened before the sentry confines itself.
    TextAndFile(PathBuf, std::fs::File),
}

fn run(args: RunArgs) -> Result<ExitCode> {
    let profile = match args.profile.as_ref().map(|p| (p.to_str(), p)) {
        None => None,
        Some((Some("-"), _)) => Some(ProfileOut::Text),
        Some((Some("json"), _)) => Some(ProfileOut::Json),
        Some((_, p)) => {
            let path = PathBuf::from(p);
            let file = std::fs::File::create(&path).with_context(|| format!("--profile {}", path.display()))?;
            Some(ProfileOut::TextAndFile(path, file))
        }
    };
    // Before the sandbox starts: auto may calibrate, in child processes
    // the sentry could not make once confined.
    let Some((platform, chosen_by)) = choose_platform(args.platform, &args.kvm_device)? else {
        return Ok(ExitCode::from(internal_error::EXIT_STATUS as u8));
    };
    let specs = args.publish.clone();
    let config = build_config(args, platform)?;
    // Published ports are had before the sandbox starts, in the host's
    // network namespace: one that cannot be had is an error now.
    let listeners = match publish::listen(&specs) {
        Ok(l) => l,
        Err(e) => {
            diag::line(format_args!("cordon: {e}"));
            return Ok(ExitCode::from(internal_error::EXIT_STATUS as u8));
        }
    };
    let network = match config.network {
        NetworkMode::Host => HostNetwork::Host,
        NetworkMode::None if !listeners.is_empty() => HostNetwork::Published,
        NetworkMode::None => HostNetwork::None,
    };
    let bind_sources: Vec<confine::BindSource> =
        config.binds.iter().map(|b| confine::BindSource { path: &b.host, writable: !b.read_only }).collect();
    let (mut isolation, listeners) = match confine::isolate(&config.rootfs, &bind_sources, network, listeners) {
        Ok(Role::Monitor(status)) => return Ok(ExitCode::from(status)),
        Ok(Role::Sentry(isolation, listeners)) => (isolation, listeners),
        Err(e) => {
            diag::line(format_args!("cordon: {e}"));
            return Ok(ExitCode::from(internal_error::EXIT_STATUS as u8));
        }
    };
    let config = config.served_by(&isolation);
    let mut sandbox = match Sandbox::new(&config) {
        Ok(s) => s,
        Err(e) => {
            diag::line(format_args!("cordon: {e}"));
            return Ok(ExitCode::from(e.exit_code() as u8));
        }
    };
    if let Some(fd) = isolation.take_monitor_channel() {
        sandbox.forward_signals_from(fd);
    }
    if let Err(e) = isolation.lock_down() {
        diag::line(format_args!("cordon: {e}"));
        return Ok(ExitCode::from(internal_error::EXIT_STATUS as u8));
    }
    // Forwarding threads start confined, as every thread made from here.
    publish::start(&sandbox.kernel.net, listeners);
    // The caller's terminal passes every key through while the program has
    // it; put back as it was however the run ends (a bug's exit and the
    // sentry's death by a signal put it back too: see `internal_error`).
    let raw = config.terminal && config.interactive && raw_mode();
    let outcome = sandbox.run();
    if raw {
        internal_error::restore_terminals();
    }
    let status = outcome.status;
    if let (Some(out), Some(mut report)) = (profile, outcome.report) {
        report.platform_chosen_by = Some(chosen_by);
        match out {
            ProfileOut::Text => diag::text(&report.render()),
            ProfileOut::Json => diag::line(format_args!("{}", serde_json::to_string_pretty(&report)?)),
            ProfileOut::TextAndFile(path, mut file) => {
                diag::text(&report.render());
                std::io::Write::write_all(&mut file, serde_json::to_string_pretty(&report)?.as_bytes())
                    .with_context(|| format!("--profile {}", path.display()))?;
            }
        }
    }
    if let ExitStatus::Signaled { signal, core } = status {
        // As a shell reports it; SIGINT and SIGPIPE pass silently.
        if signal != libc::SIGINT as u32 && signal != libc::SIGPIPE as u32 {
            let mut msg = sentry::signal::describe(signal);
            if core {
                msg.push_str(" (core dumped)");
            }
            diag::line(format_args!("{msg}"));
        }
    }
    Ok(ExitCode::from(status.shell_code() as u8))
}

/// Starts cordon's own log, before the sandbox is made so that it tells
/// how confinement went: to stderr with `--debug`, to FILE with `--log
/// FILE` (both with both), at debug level unless RUST_LOG chooses. With
/// neither flag it goes to stderr only when RUST_LOG asks for it.
fn start_log(args: &RunArgs) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};
    let file = match &args.log {
        Some(path) => Some(std::fs::File::create(path).with_context(|| format!("--log {}", path.display()))?),
        None => None,
    };
    let chosen = std::env::var_os("RUST_LOG").is_some();
    if !args.debug && file.is_none() && !chosen {
        return Ok(());
    }
    let filter = if chosen {
        EnvFilter::from_default_env()
    } else {
        EnvFilter::new("cordon=debug,sentry=debug,platform=debug,memory=debug")
    };
    let to_stderr = args.debug || file.is_none();
    let ansi = to_stderr && file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = match file {
        Some(f) if to_stderr => BoxMakeWriter::new(std::io::stderr.and(std::sync::Mutex::new(f))),
        Some(f) => BoxMakeWriter::new(std::sync::Mutex::new(f)),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi).init();
    Ok(())
}

/// Puts the caller's terminal (stdin) in raw mode, as docker does for
/// `-it`; false if it is not a terminal.
pub(crate) fn raw_mode() -> bool {
    // SAFETY: tcgetattr fills a termios we own; cfmakeraw changes it; and
    // tcsetattr reads it. A failure leaves the terminal as it was.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(0, &mut t) != 0 {
            return false;
        }
        libc::cfmakeraw(&mut t);
        libc::tcsetattr(0, libc::TCSANOW, &t) == 0
    }
}

/// A command-line error as one line: clap's message up to its usage
/// block, continuation lines (such as the names of missing arguments)
/// joined on.
pub(crate) fn one_line(e: &clap::Error) -> String {
    use clap::error::ErrorKind;
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "no command given (usage: cordon run [OPTIONS] -- PROGRAM [ARGS...]; see --help)".into();
    }
    let text = e.render().to_string();
    let parts: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
    let line = parts.join(" ");
    let line = line.trim_start_matches("error: ").trim_end_matches(':');
    if line.is_empty() { "invalid arguments".into() } else { line.into() }
}

/// The signals the caller left ignored and blocked, read before cordon
/// changes either: the program inherits them as through execve.
static INHERITED_SIGNALS: std::sync::OnceLock<(SigSet, SigSet)> = std::sync::OnceLock::new();

/// The calling thread's ignored and blocked signals. SIGPIPE is left out
/// of the ignored ones: Rust's runtime ignores it in every program before
/// main, so the caller's own disposition of it is lost.
fn inherited_signals() -> (SigSet, SigSet) {
    let mut ignored = SigSet::EMPTY;
    for sig in 1..=sentry::signal::NSIG as i32 {
        if sig == libc::SIGPIPE || sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // The system call itself: the C library's wrapper refuses the
        // signals it keeps for its threads (32 and 33), which a caller may
        // have ignored all the same. Its `struct sigaction`: handler,
        // flags, restorer, mask.
        let mut old = [0u64; 4];
        // SAFETY: queries one disposition into a local of the kernel's
        // layout; changes nothing.
        let r =
            unsafe { libc::syscall(libc::SYS_rt_sigaction, sig, std::ptr::null::<u64>(), old.as_mut_ptr(), 8usize) };
        if r == 0 && old[0] == libc::SIG_IGN as u64 {
            ignored.add(sig as u32);
        }
    }
    // SAFETY: reads the thread's mask into a zeroed local; changes nothing.
    let blocked = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut set);
        (1..=sentry::signal::NSIG as i32)
            .filter(|s| libc::sigismember(&set, *s) == 1)
            .fold(0u64, |m, s| m | 1 << (s - 1))
    };
    (ignored, SigSet(blocked).blockable())
}

fn main() -> ExitCode {
    INHERITED_SIGNALS.get_or_init(inherited_signals);
    // Before anything of cordon's own is open: no descriptor the caller
    // leaves open reaches the sentry or the application.
    confine::close_inherited_descriptors();
    internal_error::install();
    let argv: Vec<OsString> = std::env::args_os().collect();
    if oci::claims(&argv) {
        return oci::main(argv);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            diag::line(format_args!("cordon: {}", one_line(&e)));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Run(args) => start_log(&args).and_then(|()| run(*args)),
        Command::Install(args) => install::install(args).map(|()| ExitCode::SUCCESS),
        Command::Platforms(args) => {
            let calibration = platforms::calibration(&args.kvm_device, args.calibrate);
            print!("{}", calibration.render());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            diag::line(format_args!("cordon: {e:#}"));
            ExitCode::from(2)
        }
    }
}

/// A platform as `--platform` or CORDON_PLATFORM names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PlatformArg {
    Auto,
    Named(PlatformKind),
}

pub(crate) fn parse_platform(name: &str) -> Result<PlatformArg, String> {
    match name {
        "auto" => Ok(PlatformArg::Auto),
        "kvm" => Ok(PlatformArg::Named(PlatformKind::Kvm)),
        "trap" => Ok(PlatformArg::Named(PlatformKind::Trap)),
        other => Err(format!("unknown platform {other:?} (auto, kvm or trap)")),
    }
}

/// The platform to run on and what chose it: `--platform`, else
/// CORDON_PLATFORM, else auto's measurement. None, once said why, when
/// auto finds no platform that can run here.
pub(crate) fn choose_platform(
    platform: Option<PlatformArg>,
    kvm_device: &std::path::Path,
) -> Result<Option<(PlatformKind, &'static str)>> {
    let (arg, by) = match platform {
        Some(p) => (p, "--platform"),
        None => match std::env::var("CORDON_PLATFORM") {
            Ok(name) => {
                (parse_platform(&name).map_err(|e| anyhow::anyhow!("CORDON_PLATFORM: {e}"))?, "CORDON_PLATFORM")
            }
            Err(_) => (PlatformArg::Auto, "auto"),
        },
    };
    match arg {
        PlatformArg::Named(kind) => Ok(Some((kind, by))),
        PlatformArg::Auto => {
            let calibration = platforms::calibration(kvm_device, false);
            match calibration.choice().map(parse_platform) {
                Some(Ok(PlatformArg::Named(kind))) => {
                    tracing::debug!("platform {kind:?} chosen by auto:\n{}", calibration.render().trim_end());
                    Ok(Some((kind, "auto")))
                }
                _ => {
                    diag::line(format_args!("cordon: no platform can run on this host: {}", calibration.why_none()));
                    Ok(None)
                }
            }
        }
    }
}

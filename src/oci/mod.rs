//! `cordon` as an OCI runtime: the command line runc, crun and runsc
//! share (`create`, `start`, `state`, `kill`, `delete`, `run`, `list`,
//! `features`, `spec`, `ps`), so that container engines can drive it.

mod container;
mod exec;
mod join;
mod spec;
mod state;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use sentry::diag;

use self::container::CreateOptions;
use self::state::StateDir;

#[derive(Parser)]
#[command(name = "cordon", about = "cordon as an OCI runtime")]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// The runtime's global options, as runc takes them before the command.
#[derive(Args)]
struct Global {
    /// Directory of the containers' states (default: /run/cordon for
    /// root, else $XDG_RUNTIME_DIR/cordon).
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// File to which the runtime's errors are appended.
    #[arg(long, global = true, value_name = "FILE")]
    log: Option<PathBuf>,
    /// How they are written: text or json (one object a line, as
    /// containerd reads runc's).
    #[arg(long, global = true, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Accepted for engines that pass it: the sandbox's limits are its
    /// own, not a host cgroup's.
    #[arg(long, global = true)]
    systemd_cgroup: bool,
    /// Accepted for engines that pass it.
    #[arg(long, global = true)]
    debug: bool,
    /// Platform that runs application code: kvm, trap or auto (default:
    /// $CORDON_PLATFORM, else auto).
    #[arg(long, global = true, value_name = "NAME", value_parser = crate::parse_platform)]
    platform: Option<crate::PlatformArg>,
    /// KVM device to use.
    #[arg(long, global = true, value_name = "PATH", default_value = platform::kvm::DEFAULT_DEVICE)]
    kvm_device: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Create a container from a bundle; its program waits for `start`.
    Create(CreateArgs),
    /// Run the program of a created container.
    Start(IdArg),
    /// Print a container's state as the runtime-spec gives it (JSON).
    State(IdArg),
    /// Send a signal to a container's first process (default SIGTERM).
    Kill(KillArgs),
    /// Remove a stopped container (--force: any, killed first).
    Delete(DeleteArgs),
    /// Create and start a container and wait for its end (needs --bundle;
    /// without it, `cordon run` runs a program: see `cordon run --help`).
    Run(RunArgs),
    /// List the containers.
    List(ListArgs),
    /// Print what this runtime supports, as the runtime-spec's features.
    Features,
    /// Write a default config.json.
    Spec(SpecArgs),
    /// List a container's processes (their pids inside the sandbox).
    Ps(PsArgs),
    /// Start a process in a running container.
    Exec(ExecArgs),
    /// Print a container's statistics (--stats: once).
    Events(EventsArgs),
    /// Not supported: refused with an error (processes cannot be frozen).
    Pause(IdArg),
    /// Not supported: refused with an error (nothing is ever paused).
    Resume(IdArg),
    /// Not supported: refused with an error (resources are fixed at create).
    Update(UpdateArgs),
}

#[derive(Args)]
struct UpdateArgs {
    /// runc's options and the id, all refused.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    args: Vec<String>,
}

#[derive(Args)]
struct ExecArgs {
    /// A process.json giving the whole process (instead of COMMAND).
    #[arg(short, long, value_name = "FILE")]
    process: Option<PathBuf>,
    /// Give the process a terminal.
    #[arg(short, long)]
    tty: bool,
    /// Unix socket to which the master of the process's terminal is sent.
    #[arg(long, value_name = "PATH")]
    console_socket: Option<PathBuf>,
    /// Return once the process started; a child of cordon's stands for it
    /// on the host (the pid file names it) and exits with its status.
    #[arg(short, long)]
    detach: bool,
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Working directory inside the container.
    #[arg(long, value_name = "DIR")]
    cwd: Option<String>,
    /// Set an environment variable (repeatable).
    #[arg(short, long, value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// User as UID[:GID].
    #[arg(short, long, value_name = "UID[:GID]")]
    user: Option<String>,
    id: String,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND [ARGS]...")]
    command: Vec<String>,
}

#[derive(Args)]
struct EventsArgs {
    /// Print the statistics once and exit (without it: a line for each
    /// process killed for want of memory, until the container ends).
    #[arg(long)]
    stats: bool,
    id: String,
}

#[derive(Args)]
struct IdArg {
    id: String,
}

#[derive(Args)]
struct CreateArgs {
    /// The bundle directory (default: the current one).
    #[arg(short, long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// File to write the container process's pid to.
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Unix socket to which the master of the container's terminal is sent.
    #[arg(long, value_name = "PATH")]
    console_socket: Option<PathBuf>,
    /// Accepted: the sandbox's root is the sentry's, never the host's.
    #[arg(long)]
    no_pivot: bool,
    /// Accepted: the sandbox has no host keyring.
    #[arg(long)]
    no_new_keyring: bool,
    /// Descriptors past stdio to pass on: only 0 is supported.
    #[arg(long, value_name = "N", default_value_t = 0)]
    preserve_fds: u32,
    id: String,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    create: CreateArgs,
    /// Return once the container started, without waiting for its end.
    #[arg(short, long)]
    detach: bool,
}

#[derive(Args)]
struct KillArgs {
    /// Send to every process of the container.
    #[arg(short, long)]
    all: bool,
    id: String,
    #[arg(default_value = "SIGTERM")]
    signal: String,
}

#[derive(Args)]
struct DeleteArgs {
    #[arg(short, long)]
    force: bool,
    id: String,
}

#[derive(Args)]
struct ListArgs {
    #[arg(short, long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
    /// Only the ids.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args)]
struct SpecArgs {
    /// Where to write config.json (default: the current directory).
    #[arg(short, long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// Accepted: the default configuration needs no privilege in cordon.
    #[arg(long)]
    rootless: bool,
}

#[derive(Args)]
struct PsArgs {
    #[arg(short, long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
    id: String,
    /// Accepted as runc takes ps(1)'s options; the sandbox's processes
    /// are not the host's.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    ps_args: Vec<String>,
}

/// The runtime's commands; `run` only with `--bundle`, since `cordon run`
/// without it runs a program.
const COMMANDS: &[&str] = &[
    "create", "start", "state", "kill", "delete", "list", "features", "spec", "ps", "exec", "events", "pause",
    "resume", "update",
];

/// Global options that only the runtime's command line has.
const GLOBAL_FLAGS: &[&str] = &["--root", "--log-format", "--systemd-cgroup"];

/// The runtime's global options that take a value.
const GLOBAL_WITH_VALUE: &[&str] = &["--root", "--log", "--log-format", "--platform", "--kvm-device"];

/// True if `argv` is the runtime's command line rather than `cordon run`'s
/// or `cordon platforms`': its command, after any global options, is one
/// of the runtime's (`run` only with `--bundle` or a runtime-only global
/// option, since `cordon run` without them runs a program).
pub fn claims(argv: &[OsString]) -> bool {
    let args: Vec<&str> = argv.iter().skip(1).map(|a| a.to_str().unwrap_or("")).collect();
    let mut i = 0;
    let mut runtime_only = false;
    while let Some(a) = args.get(i).filter(|a| a.starts_with("--")) {
        let name = a.split('=').next().unwrap_or(a);
        runtime_only |= GLOBAL_FLAGS.contains(&name);
        i += if GLOBAL_WITH_VALUE.contains(&name) && !a.contains('=') { 2 } else { 1 };
    }
    match args.get(i) {
        Some(command) if COMMANDS.contains(command) => true,
        Some(&"run") => {
            let mut before_program = args[i + 1..].iter().take_while(|a| **a != "--");
            runtime_only || before_program.any(|a| *a == "--bundle" || *a == "-b" || a.starts_with("--bundle="))
        }
        _ => false,
    }
}

pub fn main(argv: Vec<OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            diag::line(format_args!("cordon: {}", crate::one_line(&e)));
            return ExitCode::from(2);
        }
    };
    let log = Log { file: cli.global.log.clone(), json: cli.global.log_format == "json" };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let msg = format!("{e:#}");
            log.error(&msg);
            diag::line(format_args!("cordon: {msg}"));
            ExitCode::from(1)
        }
    }
}

/// Where the runtime's errors go besides stderr (`--log`).
struct Log {
    file: Option<PathBuf>,
    json: bool,
}

impl Log {
    fn error(&self, msg: &str) {
        let Some(path) = &self.file else { return };
        let line = if self.json {
            serde_json::json!({"level": "error", "msg": msg, "time": state::now_rfc3339()}).to_string()
        } else {
            format!("{} error: {msg}", state::now_rfc3339())
        };
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{line}");
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    let g = cli.global;
    let root = g.root.clone().unwrap_or_else(state::default_root);
    match cli.command {
        // A one-line refusal (in --log too): engines show it to the user.
        Command::Pause(_) => bail!("pause is not supported: a sandbox's processes cannot be frozen yet"),
        Command::Resume(_) => bail!("resume is not supported: a sandbox's processes cannot be frozen yet"),
        Command::Update(_) => bail!("update is not supported: a container's resources are fixed when it is created"),
        Command::Create(args) => {
            let (opts, c, spec) = prepare(&g, &root, &args)?;
            container::create(&opts, c, &spec)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            let (opts, c, spec) = prepare(&g, &root, &args.create)?;
            container::run(&opts, c, &spec, args.detach)
        }
        Command::Start(a) => {
            container::start(&StateDir::of(&root, &a.id)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::State(a) => {
            let sd = StateDir::of(&root, &a.id)?;
            let record = sd.load()?;
            let status = sd.status(&record);
            println!("{}", serde_json::to_string_pretty(&sd.oci_state(&record, status))?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Kill(a) => {
            let signal = container::parse_signal(&a.signal)?;
            container::kill(&StateDir::of(&root, &a.id)?, signal, a.all)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Delete(a) => {
            let sd = StateDir::of(&root, &a.id)?;
            if a.force && !sd.dir.exists() {
                return Ok(ExitCode::SUCCESS);
            }
            container::delete(&sd, a.force)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::List(a) => list(&root, &a),
        Command::Features => {
            println!("{}", serde_json::to_string_pretty(&features())?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Spec(a) => {
            let path = a.bundle.as_deref().unwrap_or(Path::new(".")).join("config.json");
            if path.exists() {
                bail!("{} exists: remove it first", path.display());
            }
            let spec = oci_spec::runtime::Spec::default();
            std::fs::write(&path, serde_json::to_string_pretty(&spec)?)
                .with_context(|| format!("{}", path.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ps(a) => exec::ps(&StateDir::of(&root, &a.id)?, a.format == "json"),
        Command::Exec(a) => {
            let sd = StateDir::of(&root, &a.id)?;
            let opts = exec::ExecOptions {
                process: a.process,
                terminal: a.tty,
                console_socket: a.console_socket,
                detach: a.detach,
                pid_file: a.pid_file,
                cwd: a.cwd,
                env: a.env,
                user: a.user,
                command: a.command,
            };
            exec::exec(&sd, &opts)
        }
        Command::Events(a) => {
            let sd = StateDir::of(&root, &a.id)?;
            if a.stats { exec::stats(&sd, &a.id) } else { exec::events(&sd, &a.id) }
        }
    }
}

/// Reads the bundle and builds the container's configuration.
fn prepare<'a>(
    g: &Global,
    root: &'a Path,
    args: &'a CreateArgs,
) -> Result<(CreateOptions<'a>, spec::Container, oci_spec::runtime::Spec)> {
    state::check_id(&args.id)?;
    if args.preserve_fds != 0 {
        bail!("--preserve-fds: passing descriptors past stdio is not supported");
    }
    let bundle = spec::bundle_dir(args.bundle.as_deref())?;
    let oci = spec::load(&bundle)?;
    let Some((platform, _)) = crate::choose_platform(g.platform, &g.kvm_device)? else {
        bail!("no platform can run on this host");
    };
    let c = spec::container(&oci, &bundle, platform, &g.kvm_device)?;
    let opts = CreateOptions {
        root,
        id: &args.id,
        bundle,
        pid_file: args.pid_file.as_deref(),
        console_socket: args.console_socket.as_deref(),
    };
    Ok((opts, c, oci))
}

fn list(root: &Path, a: &ListArgs) -> Result<ExitCode> {
    let mut rows = Vec::new();
    for id in state::ids(root) {
        let sd = StateDir::of(root, &id)?;
        let Ok(record) = sd.load() else { continue };
        let status = sd.status(&record);
        rows.push((record, status));
    }
    if a.quiet {
        for (r, _) in &rows {
            println!("{}", r.id);
        }
    } else if a.format == "json" {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|(r, s)| {
                serde_json::json!({
                    "ociVersion": oci_spec::runtime::VERSION,
                    "id": r.id,
                    "pid": if *s == state::Status::Stopped { 0 } else { r.pid },
                    "status": s.name(),
                    "bundle": r.bundle,
                    "created": r.created,
                    "owner": user_name(r.owner),
                    "annotations": r.annotations,
                })
            })
            .collect();
        println!("{}", serde_json::to_string(&list)?);
    } else {
        println!("{:<12} {:<10} {:<10} {:<40} {:<30} OWNER", "ID", "PID", "STATUS", "BUNDLE", "CREATED");
        for (r, s) in &rows {
            let pid = if *s == state::Status::Stopped { 0 } else { r.pid };
            println!(
                "{:<12} {:<10} {:<10} {:<40} {:<30} {}",
                r.id,
                pid,
                s.name(),
                r.bundle.display(),
                r.created,
                user_name(r.owner)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.get(2) == Some(&uid.to_string().as_str())).then(|| f[0].to_string())
        })
        .unwrap_or_else(|| format!("#{uid}"))
}

/// The runtime-spec's features document for this runtime.
fn features() -> serde_json::Value {
    let caps: Vec<String> = sentry::auth::cap::NAMES.iter().map(|n| format!("CAP_{n}")).collect();
    serde_json::json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": ["prestart", "createRuntime", "poststart", "poststop"],
        "mountOptions": ["bind", "rbind", "ro", "rw", "size", "mode"],
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "user", "uts"],
            "capabilities": caps,
            "cgroup": {"v1": false, "v2": false, "systemd": false, "systemdUser": false},
            "seccomp": {"enabled": false},
            "apparmor": {"enabled": false},
            "selinux": {"enabled": false},
        },
        "annotations": {
            "org.opencontainers.runtime-spec.features.runtime": "cordon",
            "dev.cordon.version": env!("CARGO_PKG_VERSION"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::claims;

    fn argv(s: &str) -> Vec<std::ffi::OsString> {
        std::iter::once("cordon").chain(s.split_whitespace()).map(Into::into).collect()
    }

    #[test]
    fn the_runtime_claims_its_commands_only() {
        for line in [
            "create --bundle b id",
            "--root /r --log /l --log-format json create --bundle b --pid-file p id",
            "--platform trap state id",
            "--root=/r kill id TERM",
            "run --bundle b id",
            "--root /r run id",
            "--systemd-cgroup delete -f id",
        ] {
            assert!(claims(&argv(line)), "{line}");
        }
        for line in ["run -- true", "run --rootfs / -- sh -c x", "platforms", "--version", "", "run -- run --bundle x"]
        {
            assert!(!claims(&argv(line)), "{line}");
        }
    }
}

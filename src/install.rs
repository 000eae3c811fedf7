//! `cordon install --docker`: registers cordon as a runtime in docker's
//! daemon.json, merged into what the file holds already.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

/// Where dockerd reads its configuration unless told otherwise.
const DOCKER_CONFIG: &str = "/etc/docker/daemon.json";

#[derive(Args)]
pub struct InstallArgs {
    /// Register cordon with docker (its daemon.json).
    #[arg(long)]
    docker: bool,
    /// The daemon.json to write (default /etc/docker/daemon.json).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// The runtime's name, as `docker run --runtime NAME` gives it.
    #[arg(long, value_name = "NAME", default_value = "cordon")]
    runtime: String,
    /// The cordon binary the entry runs (default: this one).
    #[arg(long, value_name = "PATH")]
    path: Option<PathBuf>,
    /// Arguments the engine passes cordon before each command, such as
    /// `--platform=trap`.
    #[arg(last = true, value_name = "RUNTIME_ARGS")]
    runtime_args: Vec<OsString>,
}

pub fn install(args: InstallArgs) -> Result<()> {
    if !args.docker {
        bail!("install: say which engine to register with (--docker)");
    }
    if args.runtime.is_empty() {
        bail!("install: --runtime: a name is required");
    }
    let path = match args.path {
        Some(p) => p,
        None => std::env::current_exe().context("install: the path of this cordon")?,
    };
    let path = path.canonicalize().with_context(|| format!("install: {}", path.display()))?;
    let runtime_args = args
        .runtime_args
        .into_iter()
        .map(|a| a.into_string().map_err(|a| anyhow::anyhow!("install: {a:?}: not UTF-8")))
        .collect::<Result<Vec<String>>>()?;
    let config = args.config.unwrap_or_else(|| PathBuf::from(DOCKER_CONFIG));
    let old = match std::fs::read(&config) {
        Ok(text) if text.iter().all(u8::is_ascii_whitespace) => None,
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("{}", config.display())),
    };
    let merged =
        merge(old.as_deref(), &args.runtime, &path, &runtime_args).with_context(|| format!("{}", config.display()))?;
    write(&config, &merged)?;
    println!("{}: runtime {:?} is {}", config.display(), args.runtime, path.display());
    Ok(())
}

/// `old` (a daemon.json's text, if any) with `runtimes.NAME` set to run
/// `path` with `runtime_args`; every other key and runtime kept.
fn merge(old: Option<&[u8]>, name: &str, path: &Path, runtime_args: &[String]) -> Result<Vec<u8>> {
    let mut top: serde_json::Value = match old {
        Some(text) => serde_json::from_slice(text).context("not valid JSON")?,
        None => serde_json::json!({}),
    };
    let Some(top_map) = top.as_object_mut() else { bail!("not a JSON object") };
    let runtimes = top_map.entry("runtimes").or_insert_with(|| serde_json::json!({}));
    let Some(runtimes) = runtimes.as_object_mut() else { bail!("runtimes: not a JSON object") };
    let mut entry = serde_json::json!({ "path": path.to_string_lossy() });
    if !runtime_args.is_empty() {
        entry["runtimeArgs"] = serde_json::json!(runtime_args);
    }
    runtimes.insert(name.to_string(), entry);
    let mut text = serde_json::to_vec_pretty(&top)?;
    text.push(b'\n');
    Ok(text)
}

/// Replaces `path`'s contents whole (a reader never sees half a file),
/// keeping an existing file's mode; makes its directory if need be.
fn write(path: &Path, text: &[u8]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let shown = || format!("{}", path.display());
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(shown)?;
    let name = path.file_name().with_context(shown)?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.cordon-install"));
    std::fs::write(&tmp, text).with_context(shown)?;
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644);
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).with_context(shown)?;
    std::fs::rename(&tmp, path).with_context(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_has_the_runtime_alone() {
        let text = merge(None, "cordon", Path::new("/usr/local/bin/cordon"), &[]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v, serde_json::json!({"runtimes": {"cordon": {"path": "/usr/local/bin/cordon"}}}));
    }

    #[test]
    fn other_keys_and_runtimes_are_kept() {
        let old = br#"{"debug": true, "runtimes": {"runsc": {"path": "/usr/bin/runsc"}, "cordon": {"path": "/old"}}}"#;
        let args = vec!["--platform=trap".to_string()];
        let text = merge(Some(old), "cordon", Path::new("/bin/cordon"), &args).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "debug": true,
                "runtimes": {
                    "runsc": {"path": "/usr/bin/runsc"},
                    "cordon": {"path": "/bin/cordon", "runtimeArgs": ["--platform=trap"]},
                },
            })
        );
    }

    #[test]
    fn a_file_that_is_not_an_object_is_refused() {
        assert!(merge(Some(b"[1]"), "cordon", Path::new("/c"), &[]).is_err());
        assert!(merge(Some(b"{\"runtimes\": 3}"), "cordon", Path::new("/c"), &[]).is_err());
        assert!(merge(Some(b"{oops"), "cordon", Path::new("/c"), &[]).is_err());
    }
}

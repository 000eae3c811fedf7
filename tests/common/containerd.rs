//! What the containerd tests share: a containerd of the test's own (its
//! config, root, state and sockets in a directory under /var/tmp, so it
//! never meets another containerd on the host) with cordon's shim beside
//! it, Go programs of this tree built into the target directory, and OCI
//! image tarballs written from a root the test makes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Far longer than any step takes: reaching it means a hang.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Go, and cordon's shim built with it, if containerd and the programs a
/// containerd test needs (`tools`) are all there; else None (after saying
/// why) if the test should skip. With CORDON_REQUIRE_KVM=1 a missing one
/// is a failure.
pub fn tools(tools: &[&str]) -> Option<(PathBuf, PathBuf)> {
    let required = std::env::var("CORDON_REQUIRE_KVM").as_deref() == Ok("1");
    let missing = |what: &str| {
        assert!(!required, "{what} (scripts/install-deps), and CORDON_REQUIRE_KVM=1");
        eprintln!("skipping: {what}");
        None
    };
    if !rustix::process::geteuid().is_root() {
        return missing("containerd needs root");
    }
    for tool in ["containerd", "ctr", "containerd-shim-runc-v2", "runc"].iter().chain(tools) {
        if on_path(tool).is_none() {
            return missing(&format!("{tool} is missing"));
        }
    }
    if !Path::new("/bin/busybox").is_file() {
        return missing("/bin/busybox (busybox-static) is missing");
    }
    let Some(go) = on_path("go").or_else(|| Some(PathBuf::from("/usr/local/go/bin/go")).filter(|p| p.is_file())) else {
        return missing("go is missing");
    };
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    let shim = SHIM.get_or_init(|| go_build(&go, "shim", "containerd-shim-cordon-v2"));
    Some((go, shim.clone()))
}

pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|p| p.is_file()))
}

/// Runs the command, which must succeed, and returns its stdout.
pub fn run(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Builds the Go program in the tree's directory `module` (its own module)
/// into the target directory as `name`; Go's module and build caches make
/// it quick after the first time.
pub fn go_build(go: &Path, module: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("go-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    run(
        Command::new(go)
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .env("CGO_ENABLED", "0")
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(module)),
        &format!("go build {module}"),
    );
    out
}

/// A root for an image in `dir`: the host's busybox-static as /bin/busybox
/// with `applets` linked to it, and a passwd and group naming root.
pub fn busybox_root(dir: &Path, applets: &[&str]) -> PathBuf {
    let rootfs = dir.join("rootfs");
    for d in ["bin", "etc", "tmp", "proc", "sys", "dev"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    for applet in applets {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/:/bin/sh\n").unwrap();
    std::fs::write(rootfs.join("etc/group"), "root:x:0:\n").unwrap();
    rootfs
}

/// An OCI image tarball (image layout) named `name`, in `dir`: one
/// uncompressed layer of `rootfs`, with `entrypoint` and `cmd`.
pub fn image_tar(dir: &Path, rootfs: &Path, name: &str, entrypoint: &[&str], cmd: &[&str]) -> PathBuf {
    let layout = dir.join("layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let layer = dir.join("layer.tar");
    run(
        Command::new("tar")
            .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0", "-C"])
            .arg(rootfs)
            .arg("-cf")
            .arg(&layer)
            .arg("."),
        "tar the layer",
    );
    // Each blob is stored under its digest; returns (digest, size).
    let blob = |data: Vec<u8>| -> (String, usize) {
        let tmp = dir.join("blob");
        std::fs::write(&tmp, &data).unwrap();
        let sum = String::from_utf8(run(Command::new("sha256sum").arg(&tmp), "sha256sum")).unwrap();
        let digest = sum.split_whitespace().next().unwrap().to_string();
        std::fs::rename(&tmp, blobs.join(&digest)).unwrap();
        (format!("sha256:{digest}"), data.len())
    };
    let (layer_digest, layer_size) = blob(std::fs::read(&layer).unwrap());
    let mut run_config = serde_json::json!({"Env": ["PATH=/bin"], "Cmd": cmd});
    if !entrypoint.is_empty() {
        run_config["Entrypoint"] = entrypoint.into();
    }
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux", "config": run_config,
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    });
    let (config_digest, config_size) = blob(serde_json::to_vec(&config).unwrap());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer_size}],
    });
    let (manifest_digest, manifest_size) = blob(serde_json::to_vec(&manifest).unwrap());
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest, "size": manifest_size,
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": "test"},
        }],
    });
    std::fs::write(layout.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(layout.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let tarball = dir.join("image.tar");
    run(
        Command::new("tar").arg("-C").arg(&layout).arg("-cf").arg(&tarball).args(["oci-layout", "index.json", "blobs"]),
        "tar the image",
    );
    tarball
}

/// A containerd of the test's own, stopped with everything it started when
/// dropped.
pub struct Containerd {
    pub dir: PathBuf,
    daemon: Child,
    /// The namespace the test's `ctr` commands use.
    pub namespace: String,
}

impl Containerd {
    /// Starts containerd in a fresh directory named after `name`, with
    /// `cri` as its CRI plugin's configuration (TOML, `{dir}` standing for
    /// the directory), cordon's shim on its PATH and cordon beside it, and
    /// `cordon.toml` there for the shim: this tree's cordon, its state in
    /// the directory, on the tests' platform. `prepare` writes whatever
    /// else containerd must find in the directory when it starts.
    pub fn start(name: &str, shim: &Path, cri: &str, prepare: impl FnOnce(&Path)) -> Containerd {
        let dir = PathBuf::from(format!("/var/tmp/cordon-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        // containerd finds a runtime's shim on its PATH; the shim finds
        // cordon beside itself.
        std::fs::copy(shim, dir.join("bin/containerd-shim-cordon-v2")).unwrap();
        std::os::unix::fs::symlink(super::cordon(), dir.join("bin/cordon")).unwrap();
        let d = dir.display().to_string();
        let config = format!(
            "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
             [grpc]\n  address = \"{d}/containerd.sock\"\n\
             [ttrpc]\n  address = \"{d}/containerd.sock.ttrpc\"\n{}",
            cri.replace("{dir}", &d)
        );
        std::fs::write(dir.join("config.toml"), config).unwrap();
        std::fs::write(
            dir.join("cordon.toml"),
            format!(
                "binary_name = \"{d}/bin/cordon\"\nroot = \"{d}/cordon-root\"\nplatform = \"{}\"\n",
                super::platform()
            ),
        )
        .unwrap();
        prepare(&dir);
        let path = format!("{d}/bin:{}", std::env::var("PATH").unwrap_or_default());
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let daemon = Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start containerd");
        let c = Containerd { dir, daemon, namespace: format!("cordon-test-{}", std::process::id()) };
        let deadline = Instant::now() + LIMIT;
        while !c.ctr(&["version"]).output().is_ok_and(|o| o.status.success()) {
            assert!(Instant::now() < deadline, "containerd did not come up: {}", c.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }

    /// Imports an image tarball into the namespace.
    pub fn import(&self, namespace: &str, image: &Path) {
        run(self.ctr(&["--namespace", namespace, "images", "import"]).arg(image), "ctr images import");
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    /// `ctr ARGS` against this containerd, in the test's namespace unless
    /// ARGS name another.
    pub fn ctr(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address").arg(self.socket()).args(["--namespace", &self.namespace]).args(args);
        cmd
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Tasks first, while containerd can still end them cleanly.
        let tasks = self.ctr(&["task", "ls", "-q"]).output().map(|o| o.stdout).unwrap_or_default();
        for id in String::from_utf8_lossy(&tasks).lines().filter(|l| !l.is_empty()) {
            let _ = self.ctr(&["task", "kill", "-s", "KILL", id]).output();
            let _ = self.ctr(&["task", "delete", "--force", id]).output();
        }
        let containers = self.ctr(&["containers", "ls", "-q"]).output().map(|o| o.stdout).unwrap_or_default();
        for id in String::from_utf8_lossy(&containers).lines().filter(|l| !l.is_empty()) {
            let _ = self.ctr(&["containers", "rm", id]).output();
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        // Whatever is left that this containerd started (its shims, and the
        // containers' processes, whose command lines name its directory),
        // then its mounts.
        super::engine::kill_processes_naming(&self.dir);
        super::engine::cleanup_dir(&self.dir);
        // runc's cgroups for the namespace's containers.
        remove_cgroups(&self.namespace);
    }
}

/// Removes the cgroup `name` (under every hierarchy's root) and the empty
/// cgroups under it: what runc made for a containerd namespace's
/// containers, or for a CRI's pods, which containerd and the CRI plugin
/// leave behind.
pub fn remove_cgroups(name: &str) {
    fn remove(dir: &Path) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove(&entry.path());
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    let root = Path::new("/sys/fs/cgroup");
    let hierarchies = std::fs::read_dir(root).into_iter().flatten().flatten().map(|e| e.path());
    for base in std::iter::once(root.to_path_buf()).chain(hierarchies) {
        let dir = base.join(name);
        if dir.is_dir() {
            remove(&dir);
        }
    }
}

//! A Kubernetes pod in cordon: containerd's CRI plugin driven over its
//! socket as kubelet drives it for a pod whose RuntimeClass names the
//! runtime handler `cordon`, and the same pod with the handler `runc`,
//! the two compared.
//!
//! The client is `tests/cri` (Go, on `k8s.io/cri-api`), built here: it
//! runs a pod sandbox with a CNI network, a server and a client container
//! that talk over localhost, ExecSync into both, stops the containers,
//! stops and removes the pod, and prints what it saw. The containerd is
//! the test's own (tests/common/containerd.rs), with a CNI network of its
//! own (a bridge named for the test, no gateway or masquerading, its IP
//! allocations in the test's directory), its pods' network namespaces
//! under its state directory, and the pause and busybox images imported
//! offline from tarballs the test writes. Everything is removed at the
//! end, failed or not (and the test checks it): pods, shims, network
//! namespaces, the bridge, the pods' cgroups, mounts.

mod common;

use common::containerd::{Containerd, LIMIT, busybox_root, image_tar};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The containers' image.
const IMAGE: &str = "docker.io/library/cordon-cri-busybox:test";

/// The pods' sandbox image: the pause program of tests/c alone.
const PAUSE: &str = "docker.io/library/cordon-cri-pause:test";

/// The pods' network. No address of it is reached from the host: the
/// bridge has none, and the pod's containers talk over localhost.
const SUBNET: &str = "172.31.249.0/24";

/// A containerd serving the CRI with the runtime handlers `runc` and
/// `cordon`; when dropped, its pods are stopped and removed as kubelet
/// removes them, then containerd with all it started, then the bridge.
struct Node {
    containerd: Option<Containerd>,
    client: PathBuf,
    bridge: String,
    /// The cgroup the pods' go under, as kubelet's /kubepods.
    cgroup: String,
}

impl Node {
    fn start(shim: &Path, client: PathBuf) -> Node {
        let bridge = format!("cdcri{}", std::process::id());
        let cgroup = format!("cordon-cri-{}", std::process::id());
        let cri = format!(
            r#"[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  netns_mounts_under_state_dir = true
  enable_tls_streaming = false
  # Pods' OOM scores no lower than containerd's own (a sandbox's is -998;
  # lowering it needs CAP_SYS_RESOURCE, which a test host in a container
  # may lack).
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{{dir}}/runc-root"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cordon]
      runtime_type = "io.containerd.cordon.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.cordon.options]
        ConfigPath = "{{dir}}/cordon.toml"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{dir}}/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{{dir}}/registries"
"#
        );
        let network = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": bridge,
            "plugins": [{
                "type": "bridge", "bridge": bridge, "isGateway": false, "ipMasq": false,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": SUBNET}]], "dataDir": "{dir}/cni-ipam"},
            }],
        });
        // The network's config is in place when containerd starts, so the
        // CRI plugin has it for the first pod.
        let containerd = Containerd::start("cri", shim, &cri, |dir| {
            std::fs::create_dir_all(dir.join("cni")).unwrap();
            let network = network.to_string().replace("{dir}", &dir.display().to_string());
            std::fs::write(dir.join("cni/10-cordon.conflist"), network).unwrap();
        });
        containerd.import("k8s.io", &pause_image());
        containerd.import("k8s.io", &busybox_image());
        Node { containerd: Some(containerd), client, bridge, cgroup }
    }

    fn containerd(&self) -> &Containerd {
        self.containerd.as_ref().unwrap()
    }

    /// The client with this node's socket and `args`.
    fn client(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.client);
        cmd.arg("-socket").arg(self.containerd().socket()).args(args);
        cmd
    }

    /// The pod's scenario with `handler`: what the client saw, and the
    /// kernel the containers ran on.
    fn scenario(&self, handler: &str) -> (Vec<String>, String) {
        let dir = self.containerd().dir.join(format!("pods-{handler}"));
        let cgroup = format!("/{}", self.cgroup);
        let mut cmd =
            self.client(&["-handler", handler, "-image", IMAGE, "-subnet", SUBNET, "-cgroup-parent", &cgroup]);
        cmd.arg("-dir").arg(&dir).arg("scenario").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = common::finish_within(cmd.spawn().expect("cri-pod"), 3 * LIMIT, "cri-pod scenario");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "handler {handler}: {}\nsaw:\n{stdout}\ncontainerd's log:\n{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            self.containerd().log()
        );
        let (kernel, seen): (Vec<&str>, Vec<&str>) = stdout.lines().partition(|l| l.starts_with("kernel: "));
        (seen.into_iter().map(String::from).collect(), kernel.concat())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.client(&["cleanup"]).stdin(Stdio::null()).output();
        drop(self.containerd.take());
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
        common::containerd::remove_cgroups(&self.cgroup);
    }
}

fn busybox_image() -> PathBuf {
    let dir = common::scratch_dir("cri-busybox");
    let applets = ["sh", "cat", "echo", "sleep", "mkdir", "hostname", "httpd", "wget", "true"];
    let rootfs = busybox_root(&dir, &applets);
    image_tar(&dir, &rootfs, IMAGE, &[], &["/bin/sh"])
}

fn pause_image() -> PathBuf {
    let dir = common::scratch_dir("cri-pause");
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::copy(common::c_program("pause", "static"), rootfs.join("pause")).unwrap();
    image_tar(&dir, &rootfs, PAUSE, &["/pause"], &[])
}

/// The node, or None if the test should skip.
fn node() -> Option<Node> {
    let (go, shim) = common::containerd::tools(&["ip"])?;
    for plugin in ["bridge", "host-local", "loopback"] {
        if !Path::new("/usr/lib/cni").join(plugin).is_file() {
            assert!(
                std::env::var("CORDON_REQUIRE_KVM").as_deref() != Ok("1"),
                "/usr/lib/cni/{plugin} is missing (containernetworking-plugins), and CORDON_REQUIRE_KVM=1"
            );
            eprintln!("skipping: /usr/lib/cni/{plugin} is missing");
            return None;
        }
    }
    let client = common::containerd::go_build(&go, "tests/cri", "cri-pod");
    Some(Node::start(&shim, client))
}

#[test]
fn pod_with_two_containers_over_localhost() {
    require_kvm!();
    let Some(node) = node() else { return };
    let (runc, runc_kernel) = node.scenario("runc");
    let expected = [
        "version: api v1".to_string(),
        format!("sandbox: SANDBOX_READY, ip in {SUBNET}: true"),
        "server log: serving".into(),
        "client log: client got: hello over localhost".into(),
        r#"exec in client: "hello over localhost\ncri-pod\n", exit 3"#.into(),
        concat!(
            r#"exec in server: "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"#,
            r#"search default.svc.cluster.local\nnameserver 127.0.0.1\noptions ndots:5\n", exit 0"#
        )
        .into(),
        format!("server status: CONTAINER_RUNNING, image {IMAGE}"),
        r#"server stopped: CONTAINER_EXITED, exit 0, last line "server stopping""#.into(),
        format!("client status: CONTAINER_RUNNING, image {IMAGE}"),
        r#"client stopped: CONTAINER_EXITED, exit 0, last line "client stopping""#.into(),
        "removed: 0 pods, 0 containers left".into(),
    ];
    assert_eq!(runc, expected, "runc, the reference");
    assert!(!runc_kernel.contains("(cordon)"), "{runc_kernel}");
    let (cordon, cordon_kernel) = node.scenario("cordon");
    assert_eq!(cordon, runc, "cordon against runc");
    assert!(cordon_kernel.contains("(cordon)"), "the pod ran on {cordon_kernel}");
    let left = [
        node.containerd().dir.clone(),
        Path::new("/sys/class/net").join(&node.bridge),
        Path::new("/sys/fs/cgroup/pids").join(&node.cgroup),
        Path::new("/sys/fs/cgroup").join(&node.cgroup),
    ];
    drop(node);
    for path in left {
        assert!(!path.exists(), "{} is left", path.display());
    }
}

// cri-pod drives a pod through containerd's CRI socket the way kubelet
// drives one whose RuntimeClass names a runtime handler: RunPodSandbox
// (its network from CNI), CreateContainer and StartContainer, the
// containers' output read from the CRI log files kubelet asks for,
// ExecSync, ContainerStatus, StopContainer, StopPodSandbox,
// RemovePodSandbox.
//
//	cri-pod [flags] scenario   two containers that talk over localhost;
//	                           prints what it saw, one line per fact
//	cri-pod [flags] bench      pods of one container, timed from
//	                           RunPodSandbox to the container's first
//	                           output in its log; prints a BENCH line
//	cri-pod [flags] cleanup    stops and removes every pod there is
//
// Any failure is one line on stderr and exit status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// limit is far longer than any step takes: reaching it means a hang.
const limit = 120 * time.Second

var (
	socket  = flag.String("socket", "", "containerd's CRI socket")
	handler = flag.String("handler", "", "the RuntimeClass handler the pod runs with")
	image   = flag.String("image", "", "the containers' image (busybox), already in containerd")
	dir     = flag.String("dir", "", "where the pod's files (logs, /etc/hosts) go")
	subnet  = flag.String("subnet", "", "the CNI network's subnet, which the pod's IP must be in")
	cgroups = flag.String("cgroup-parent", "", "the cgroup under which each pod's goes, as kubelet's /kubepods")
	rounds  = flag.Int("rounds", 1, "bench: how many pods to time")
	name    = flag.String("name", "bench", "bench: the case's name in the BENCH line")
)

func main() {
	flag.Parse()
	if flag.NArg() != 1 || *socket == "" {
		fail("usage: cri-pod -socket SOCK [-handler H -image IMG -dir DIR] scenario|bench|cleanup")
	}
	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	check(err, "connecting to %s", *socket)
	defer conn.Close()
	p := &pods{rt: cri.NewRuntimeServiceClient(conn)}
	switch flag.Arg(0) {
	case "scenario":
		p.need()
		p.scenario()
	case "bench":
		p.need()
		p.bench()
	case "cleanup":
		p.cleanup()
	default:
		fail("unknown command %q: scenario, bench or cleanup", flag.Arg(0))
	}
}

// undo is what a failure leaves to be undone before the exit (a bench
// pod, so that one that failed does not weigh on the next platform's).
var undo func()

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cri-pod: "+format+"\n", args...)
	if u := undo; u != nil {
		undo = nil
		u()
	}
	os.Exit(1)
}

func check(err error, format string, args ...any) {
	if err != nil {
		fail("%s: %v", fmt.Sprintf(format, args...), strings.ReplaceAll(err.Error(), "\n", " "))
	}
}

type pods struct {
	rt cri.RuntimeServiceClient
}

func (p *pods) need() {
	if *handler == "" || *image == "" || *dir == "" {
		fail("-handler, -image and -dir are required")
	}
}

func call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), limit)
}

// pod is one running pod sandbox and the config it was made with.
type pod struct {
	id     string
	config *cri.PodSandboxConfig
	dir    string
}

// runPod makes a pod's sandbox as kubelet does: its metadata, labels,
// log directory, DNS, hostname, namespaces and cgroup parent.
func (p *pods) runPod(podName string) *pod {
	uid := fmt.Sprintf("%s-%d-%d", podName, os.Getpid(), time.Now().UnixNano())
	podDir := filepath.Join(*dir, uid)
	logs := filepath.Join(podDir, "logs")
	check(os.MkdirAll(logs, 0o755), "making the pod's log directory")
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	check(os.WriteFile(filepath.Join(podDir, "etc-hosts"), []byte(hosts), 0o644), "writing the pod's hosts file")
	check(os.WriteFile(filepath.Join(podDir, "termination-log"), nil, 0o666), "writing the termination log")
	labels := map[string]string{
		"io.kubernetes.pod.name":      podName,
		"io.kubernetes.pod.namespace": "default",
		"io.kubernetes.pod.uid":       uid,
	}
	config := &cri.PodSandboxConfig{
		Metadata:     &cri.PodSandboxMetadata{Name: podName, Uid: uid, Namespace: "default"},
		Hostname:     podName,
		LogDirectory: logs,
		DnsConfig:    &cri.DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"}},
		Labels:       labels,
		Annotations:  map[string]string{"kubernetes.io/config.source": "api"},
		Linux: &cri.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent(uid),
			SecurityContext: &cri.LinuxSandboxSecurityContext{
				NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_POD, Pid: cri.NamespaceMode_CONTAINER, Ipc: cri.NamespaceMode_POD},
			},
		},
	}
	ctx, cancel := call()
	defer cancel()
	r, err := p.rt.RunPodSandbox(ctx, &cri.RunPodSandboxRequest{Config: config, RuntimeHandler: *handler})
	check(err, "RunPodSandbox with handler %s", *handler)
	return &pod{id: r.PodSandboxId, config: config, dir: podDir}
}

// cgroupParent is the pod's cgroup (cgroupfs's naming): under
// -cgroup-parent if given, else the runtime's default.
func cgroupParent(uid string) string {
	if *cgroups == "" {
		return ""
	}
	return filepath.Join(*cgroups, "pod"+uid)
}

// startContainer creates and starts one of the pod's containers as
// kubelet does for a container with `command`: its labels and
// annotations, log path, the pod's hosts file and termination log,
// resources of a BestEffort pod and the default masked and read-only
// paths. It returns the container's id and its log file.
func (p *pods) startContainer(pd *pod, cname string, command ...string) (string, string) {
	md := pd.config.Metadata
	labels := map[string]string{
		"io.kubernetes.container.name": cname,
		"io.kubernetes.pod.name":       md.Name,
		"io.kubernetes.pod.namespace":  md.Namespace,
		"io.kubernetes.pod.uid":        md.Uid,
	}
	config := &cri.ContainerConfig{
		Metadata: &cri.ContainerMetadata{Name: cname},
		Image:    &cri.ImageSpec{Image: *image},
		Command:  command,
		Envs:     []*cri.KeyValue{{Key: "KUBERNETES_SERVICE_HOST", Value: []byte("127.0.0.1")}},
		Mounts: []*cri.Mount{
			{ContainerPath: "/etc/hosts", HostPath: filepath.Join(pd.dir, "etc-hosts")},
			{ContainerPath: "/dev/termination-log", HostPath: filepath.Join(pd.dir, "termination-log")},
		},
		Labels: labels,
		Annotations: map[string]string{
			"io.kubernetes.container.restartCount":             "0",
			"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
			"io.kubernetes.container.terminationMessagePolicy": "File",
		},
		LogPath: filepath.Join(cname, "0.log"),
		Linux: &cri.LinuxContainerConfig{
			Resources: &cri.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000},
			SecurityContext: &cri.LinuxContainerSecurityContext{
				NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_POD, Pid: cri.NamespaceMode_CONTAINER, Ipc: cri.NamespaceMode_POD},
				MaskedPaths: []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
					"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
				ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			},
		},
	}
	ctx, cancel := call()
	defer cancel()
	created, err := p.rt.CreateContainer(ctx, &cri.CreateContainerRequest{PodSandboxId: pd.id, Config: config, SandboxConfig: pd.config})
	check(err, "CreateContainer %s", cname)
	_, err = p.rt.StartContainer(ctx, &cri.StartContainerRequest{ContainerId: created.ContainerId})
	check(err, "StartContainer %s", cname)
	return created.ContainerId, filepath.Join(pd.config.LogDirectory, config.LogPath)
}

// logLines is what a container wrote to stdout, from its CRI log file
// (lines of "TIME STREAM TAG TEXT"; tag P is part of a line, F its end).
func logLines(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var lines []string
	partial := ""
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) < 3 || f[1] != "stdout" {
			continue
		}
		text := ""
		if len(f) == 4 {
			text = f[3]
		}
		if f[2] == "P" {
			partial += text
			continue
		}
		lines = append(lines, partial+text)
		partial = ""
	}
	return lines
}

// waitLog polls the container's log until a line starting with `prefix`
// is in it, and returns that line.
func waitLog(path, what, prefix string, poll time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		for _, l := range logLines(path) {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		if time.Now().After(deadline) {
			fail("%s never logged %q; its log: %q", what, prefix, logLines(path))
		}
		time.Sleep(poll)
	}
}

func (p *pods) exec(id string, cmd ...string) (string, int32) {
	ctx, cancel := call()
	defer cancel()
	r, err := p.rt.ExecSync(ctx, &cri.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(limit / time.Second)})
	check(err, "ExecSync %v", cmd)
	return string(r.Stdout), r.ExitCode
}

func (p *pods) containerState(id string) *cri.ContainerStatus {
	ctx, cancel := call()
	defer cancel()
	r, err := p.rt.ContainerStatus(ctx, &cri.ContainerStatusRequest{ContainerId: id})
	check(err, "ContainerStatus")
	return r.Status
}

func (p *pods) podStatus(id string) *cri.PodSandboxStatus {
	ctx, cancel := call()
	defer cancel()
	r, err := p.rt.PodSandboxStatus(ctx, &cri.PodSandboxStatusRequest{PodSandboxId: id})
	check(err, "PodSandboxStatus")
	return r.Status
}

// stopContainer stops a container as kubelet does (SIGTERM, then SIGKILL
// past the grace period).
func (p *pods) stopContainer(id string, grace int64) {
	ctx, cancel := call()
	defer cancel()
	_, err := p.rt.StopContainer(ctx, &cri.StopContainerRequest{ContainerId: id, Timeout: grace})
	check(err, "StopContainer")
}

// removePod stops the pod's sandbox and removes it, its containers with
// it, as kubelet's garbage collection does.
func (p *pods) removePod(id string) {
	ctx, cancel := call()
	defer cancel()
	_, err := p.rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: id})
	check(err, "StopPodSandbox")
	_, err = p.rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: id})
	check(err, "RemovePodSandbox")
}

// The scenario's containers: a server on localhost:8080 (busybox httpd)
// and a client that fetches its page. Each says when SIGTERM stops it.
const (
	server = `trap 'echo server stopping; exit 0' TERM
mkdir -p /tmp/www && echo "hello over localhost" > /tmp/www/index.html
httpd -f -p 127.0.0.1:8080 -h /tmp/www &
echo serving
wait`
	client = `trap 'echo client stopping; exit 0' TERM
until page=$(wget -q -O - http://127.0.0.1:8080/index.html); do sleep 0.1; done
echo "client got: $page"
sleep 100000 &
wait`
)

// scenario runs the two-container pod and prints what it saw; the
// kernel line is the one that differs between handlers by design.
func (p *pods) scenario() {
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	ctx, cancel := call()
	v, err := p.rt.Version(ctx, &cri.VersionRequest{Version: "v1"})
	cancel()
	check(err, "Version")
	say("version: api %s", v.RuntimeApiVersion)

	pd := p.runPod("cri-pod")
	st := p.podStatus(pd.id)
	ip := net.ParseIP(st.GetNetwork().GetIp())
	_, cidr, err := net.ParseCIDR(*subnet)
	check(err, "-subnet %q", *subnet)
	say("sandbox: %s, ip in %s: %v", st.State, *subnet, ip != nil && cidr.Contains(ip))

	serverID, serverLog := p.startContainer(pd, "server", "sh", "-c", server)
	say("server log: %s", waitLog(serverLog, "server", "serving", 50*time.Millisecond))
	clientID, clientLog := p.startContainer(pd, "client", "sh", "-c", client)
	say("client log: %s", waitLog(clientLog, "client", "client got:", 50*time.Millisecond))

	out, code := p.exec(clientID, "sh", "-c", "wget -q -O - http://127.0.0.1:8080/index.html; hostname; exit 3")
	say("exec in client: %q, exit %d", out, code)
	out, code = p.exec(serverID, "cat", "/etc/hosts", "/etc/resolv.conf")
	say("exec in server: %q, exit %d", out, code)
	out, _ = p.exec(serverID, "cat", "/proc/version")
	say("kernel: %s", strings.TrimSpace(out))

	for _, c := range []struct{ name, id, log string }{{"server", serverID, serverLog}, {"client", clientID, clientLog}} {
		s := p.containerState(c.id)
		say("%s status: %s, image %s", c.name, s.State, s.GetImage().GetImage())
		p.stopContainer(c.id, 30)
		s = p.containerState(c.id)
		lines := logLines(c.log)
		say("%s stopped: %s, exit %d, last line %q", c.name, s.State, s.ExitCode, lines[len(lines)-1])
	}
	p.removePod(pd.id)
	ctx, cancel = call()
	defer cancel()
	left, err := p.rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	check(err, "ListPodSandbox")
	containers, err := p.rt.ListContainers(ctx, &cri.ListContainersRequest{})
	check(err, "ListContainers")
	say("removed: %d pods, %d containers left", len(left.Items), len(containers.Containers))
}

// bench times `rounds` pods of one container, each from RunPodSandbox
// to the container's first line in its log, and prints the mean.
func (p *pods) bench() {
	var total time.Duration
	for i := 0; i < *rounds; i++ {
		start := time.Now()
		pd := p.runPod("bench-pod")
		undo = func() { p.removePod(pd.id) }
		_, log := p.startContainer(pd, "first", "echo", "first output")
		waitLog(log, "the container", "first output", time.Millisecond)
		total += time.Since(start)
		undo = nil
		p.removePod(pd.id)
	}
	ns := total.Nanoseconds()
	fmt.Printf("BENCH case=%s ops=%d ns=%d ns_per_op=%d\n", *name, *rounds, ns, ns/int64(*rounds))
}

// cleanup stops and removes every pod, as a node being drained.
func (p *pods) cleanup() {
	ctx, cancel := call()
	defer cancel()
	list, err := p.rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	check(err, "ListPodSandbox")
	for _, s := range list.Items {
		p.removePod(s.Id)
	}
}

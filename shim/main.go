// containerd-shim-cordon-v2 is containerd's runtime v2 shim for cordon.
//
// It is containerd's own runc shim (stdio fifos and pipes, the console
// socket, exec, exits reaped as a subreaper, events, pod grouping by the
// CRI sandbox id) with one difference: the OCI runtime it runs is `cordon`,
// whose command line is runc's. What it adds: OOM events from
// `cordon events` (runc's shim watches a host cgroup, which cordon does not
// make), and the choice of the binary, its state root and the sandbox's
// platform, from the runtime options:
//
//   - none (`ctr run --runtime io.containerd.cordon.v2`): the `cordon`
//     beside this shim's own executable, else `cordon` on PATH; state under
//     /run/containerd/cordon; the platform from CORDON_PLATFORM, else auto.
//   - runc's options type (BinaryName, Root, ...): used as given, the
//     defaults above filling what is empty.
//   - the CRI plugin's options for a runtime type it does not know
//     (`ConfigPath`, as `ctr run --runtime-config-path` also sends): a TOML
//     file with `binary_name`, `root` and `platform` (kvm, trap or auto).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	eventstypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/log"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/runtime"

	runtimeoptions "github.com/containerd/containerd/pkg/runtimeoptions/v1"
	"github.com/containerd/containerd/pkg/shutdown"
	"github.com/containerd/containerd/plugin"
	"github.com/containerd/containerd/runtime/v2/runc/manager"
	"github.com/containerd/containerd/runtime/v2/runc/options"
	"github.com/containerd/containerd/runtime/v2/runc/task"
	"github.com/containerd/containerd/runtime/v2/shim"
	taskAPI "github.com/containerd/containerd/runtime/v2/task"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl"
	"github.com/gogo/protobuf/types"
	"github.com/pelletier/go-toml"
)

const (
	runtimeName = "io.containerd.cordon.v2"
	defaultRoot = "/run/containerd/cordon"
)

func init() {
	plugin.Register(&plugin.Registration{
		Type:     plugin.TTRPCPlugin,
		ID:       "task",
		Requires: []plugin.Type{plugin.EventPlugin, plugin.InternalPlugin},
		InitFn: func(ic *plugin.InitContext) (interface{}, error) {
			pp, err := ic.GetByID(plugin.EventPlugin, "publisher")
			if err != nil {
				return nil, err
			}
			ss, err := ic.GetByID(plugin.InternalPlugin, "shutdown")
			if err != nil {
				return nil, err
			}
			inner, err := task.NewTaskService(ic.Context, pp.(shim.Publisher), ss.(shutdown.Service))
			if err != nil {
				return nil, err
			}
			return &cordonTasks{TaskService: inner, publisher: pp.(shim.Publisher), runtimes: map[string]runtimeOf{}}, nil
		},
	})
}

func main() {
	shim.RunManager(context.Background(), manager.NewShimManager(runtimeName))
}

// cordonTasks is the runc shim's task service with Create's runtime
// options made cordon's, and the containers' OOM events taken from cordon
// (the runc shim watches a host cgroup, which cordon does not make: the
// sandbox's memory limit is the sentry's own).
type cordonTasks struct {
	taskAPI.TaskService
	publisher shim.Publisher
	mu        sync.Mutex
	runtimes  map[string]runtimeOf
}

// runtimeOf is how a container's cordon is run: its binary and its state
// root (the runc shim's root joined with the namespace, as it runs it).
type runtimeOf struct {
	binary, root, namespace string
}

func (t *cordonTasks) RegisterTTRPC(server *ttrpc.Server) error {
	taskAPI.RegisterTaskService(server, t)
	return nil
}

func (t *cordonTasks) Create(ctx context.Context, r *taskAPI.CreateTaskRequest) (*taskAPI.CreateTaskResponse, error) {
	opts, platform, err := cordonOptions(r.Options)
	if err != nil {
		return nil, err
	}
	if platform != "" {
		// Every cordon this shim runs from now on (the containers of one
		// pod share a shim) uses it.
		if err := os.Setenv("CORDON_PLATFORM", platform); err != nil {
			return nil, err
		}
	}
	packed, err := typeurl.MarshalAny(opts)
	if err != nil {
		return nil, err
	}
	r.Options = packed
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return nil, err
	}
	created, err := t.TaskService.Create(ctx, r)
	if err == nil {
		t.mu.Lock()
		t.runtimes[r.ID] = runtimeOf{binary: opts.BinaryName, root: filepath.Join(opts.Root, ns), namespace: ns}
		t.mu.Unlock()
	}
	return created, err
}

func (t *cordonTasks) Start(ctx context.Context, r *taskAPI.StartRequest) (*taskAPI.StartResponse, error) {
	started, err := t.TaskService.Start(ctx, r)
	if err != nil || r.ExecID != "" {
		return started, err
	}
	t.mu.Lock()
	rt, ok := t.runtimes[r.ID]
	t.mu.Unlock()
	if ok {
		events := exec.Command(rt.binary, "--root", rt.root, "events", r.ID)
		out, perr := events.StdoutPipe()
		if perr == nil && events.Start() == nil {
			go t.forwardOOM(r.ID, rt.namespace, events, out)
		} else {
			log.G(ctx).WithField("id", r.ID).Warn("no OOM events: cordon events did not start")
		}
	}
	return started, err
}

// forwardOOM publishes a TaskOOM event for each OOM line `cordon events`
// prints; it ends with the container.
func (t *cordonTasks) forwardOOM(id, ns string, events *exec.Cmd, out io.Reader) {
	ctx := namespaces.WithNamespace(context.Background(), ns)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		var e struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(lines.Bytes(), &e) == nil && e.Type == "oom" {
			if err := t.publisher.Publish(ctx, runtime.TaskOOMEventTopic, &eventstypes.TaskOOM{ContainerID: id}); err != nil {
				log.G(ctx).WithError(err).Warn("publishing an OOM event")
			}
		}
	}
	_ = events.Wait()
}

// Kill is the runc shim's, with cordon's answers for a container that has
// already stopped taken as runc's: the runc shim recognises runc's words
// for it ("container not running") and reports the process gone, which
// the CRI plugin expects when it stops a pod whose containers or sandbox
// have just exited. cordon words it "container ID is not running", or,
// for a pod's container whose sandbox has let it go, "no container ID in
// the sandbox".
func (t *cordonTasks) Kill(ctx context.Context, r *taskAPI.KillRequest) (*types.Empty, error) {
	killed, err := t.TaskService.Kill(ctx, r)
	if err != nil && stopped(err.Error()) {
		return nil, errdefs.ToGRPC(fmt.Errorf("process already finished: %w", errdefs.ErrNotFound))
	}
	return killed, err
}

// stopped tells whether cordon's error says the container has stopped.
func stopped(msg string) bool {
	return strings.Contains(msg, "is not running") ||
		(strings.Contains(msg, "no container ") && strings.Contains(msg, " in the sandbox"))
}

func (t *cordonTasks) Delete(ctx context.Context, r *taskAPI.DeleteRequest) (*taskAPI.DeleteResponse, error) {
	deleted, err := t.TaskService.Delete(ctx, r)
	if err == nil && r.ExecID == "" {
		t.mu.Lock()
		delete(t.runtimes, r.ID)
		t.mu.Unlock()
	}
	return deleted, err
}

// cordonFile is the TOML file a ConfigPath names.
type cordonFile struct {
	BinaryName string `toml:"binary_name"`
	Root       string `toml:"root"`
	Platform   string `toml:"platform"`
}

// cordonOptions turns the options containerd sent into runc's options
// type, which the runc shim reads, and the platform to run on.
func cordonOptions(sent *types.Any) (*options.Options, string, error) {
	opts := &options.Options{}
	platform := ""
	if sent != nil && sent.GetTypeUrl() != "" {
		v, err := typeurl.UnmarshalAny(sent)
		if err != nil {
			return nil, "", fmt.Errorf("runtime options: %w", err)
		}
		switch o := v.(type) {
		case *options.Options:
			opts = o
		case *runtimeoptions.Options:
			if o.ConfigPath != "" {
				var f cordonFile
				data, err := os.ReadFile(o.ConfigPath)
				if err != nil {
					return nil, "", fmt.Errorf("runtime options: %w", err)
				}
				if err := toml.Unmarshal(data, &f); err != nil {
					return nil, "", fmt.Errorf("runtime options %s: %w", o.ConfigPath, err)
				}
				opts.BinaryName, opts.Root, platform = f.BinaryName, f.Root, f.Platform
			}
		default:
			return nil, "", fmt.Errorf("runtime options of type %s are not cordon's", sent.GetTypeUrl())
		}
	}
	switch platform {
	case "", "auto", "kvm", "trap":
	default:
		return nil, "", fmt.Errorf("runtime options: platform %q is none of auto, kvm, trap", platform)
	}
	if opts.BinaryName == "" {
		opts.BinaryName = "cordon"
		if self, err := os.Executable(); err == nil {
			beside := filepath.Join(filepath.Dir(self), "cordon")
			if _, err := os.Stat(beside); err == nil {
				opts.BinaryName = beside
			}
		}
	}
	if opts.Root == "" {
		opts.Root = defaultRoot
	}
	return opts, platform, nil
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// node is one `chime serve` process. It keeps its port, data dir and node
// id across restarts, so a restarted node is the same node to the cluster.
type node struct {
	name    string // node id
	addr    string // 127.0.0.1:port
	bin     string
	args    []string
	logPath string

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{} // closed when proc has exited
	paused bool
	skewed bool // started with a clock offset (the skew fault)
	// proxies stand between the node and its servers (by partition
	// target: db, redis) when the partition fault may be injected.
	proxies map[string]*proxy
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// nodeEnv is the environment of a node: this process's, less a clock
// offset, plus extra.
func nodeEnv(extra []string) []string {
	env := make([]string, 0, len(os.Environ())+len(extra))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ClockOffsetEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// start starts the process with extra environment variables (KEY=value);
// its output is appended to the node's log.
func (n *node) start(extra []string) error {
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %s: open log: %w", n.name, err)
	}
	fmt.Fprintf(logf, "==== chaos: %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano),
		strings.Join(append(append(slicesClone(extra), n.bin), n.args...), " "))
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = nodeEnv(extra)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("node %s: start: %w", n.name, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.proc, n.exited, n.paused, n.skewed = cmd.Process, exited, false, len(extra) > 0
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "==== chaos: %s exited: %v\n", time.Now().UTC().Format(time.RFC3339Nano), err)
		logf.Close()
		close(exited)
	}()
	return nil
}

// alive reports whether the current process has not exited.
func (n *node) alive() bool {
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// waitReady polls /readyz until it answers 200, the process exits or
// timeout passes.
func (n *node) waitReady(ctx context.Context, timeout time.Duration) error {
	return n.waitOK(ctx, "/readyz", timeout)
}

// waitHealthy polls /healthz until it answers 200: the node is up, ready
// or not (a skewed node is not ready, by design).
func (n *node) waitHealthy(ctx context.Context, timeout time.Duration) error {
	return n.waitOK(ctx, "/healthz", timeout)
}

func (n *node) waitOK(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		if !n.alive() {
			return fmt.Errorf("node %s exited before %s answered 200 (log %s)", n.name, path, n.logPath)
		}
		status, body, err := n.get(ctx, path)
		if err == nil {
			if status == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", status, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %s: %s not 200 within %v: %s", n.name, path, timeout, last)
}

// probeClient asks the nodes for /readyz, /healthz and /metrics.
var probeClient = &http.Client{Timeout: 2 * time.Second}

// get returns the status and the (trimmed, at most 4 MiB) body of GET path.
func (n *node) get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// metric returns the first sample line of a metric in the node's /metrics
// ("" if there is none).
func (n *node) metric(ctx context.Context, name string) string {
	status, body, err := n.get(ctx, "/metrics")
	if err != nil || status != http.StatusOK {
		return ""
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			return line
		}
	}
	return ""
}

// kill sends SIGKILL and waits for the process to exit.
func (n *node) kill() error {
	n.mu.Lock()
	p, ch := n.proc, n.exited
	n.mu.Unlock()
	if p == nil || !n.alive() {
		return nil
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("node %s: kill: %w", n.name, err)
	}
	select {
	case <-ch:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("node %s: still running 10s after SIGKILL", n.name)
	}
}

// pause sends SIGSTOP.
func (n *node) pause() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return fmt.Errorf("node %s: not started", n.name)
	}
	if err := pauseProcess(n.proc); err != nil {
		return fmt.Errorf("node %s: SIGSTOP: %w", n.name, err)
	}
	n.paused = true
	return nil
}

// resume sends SIGCONT if the node is paused.
func (n *node) resume() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || !n.paused {
		return nil
	}
	if err := resumeProcess(n.proc); err != nil {
		return fmt.Errorf("node %s: SIGCONT: %w", n.name, err)
	}
	n.paused = false
	return nil
}

// stop resumes the node if paused, sends SIGTERM and waits up to timeout
// for it to exit, then kills it.
func (n *node) stop(timeout time.Duration) error {
	if !n.alive() {
		return nil
	}
	if err := n.resume(); err != nil {
		return err
	}
	n.mu.Lock()
	p, ch := n.proc, n.exited
	n.mu.Unlock()
	if err := termProcess(p); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("node %s: SIGTERM: %w", n.name, err)
	}
	select {
	case <-ch:
		return nil
	case <-time.After(timeout):
		if err := n.kill(); err != nil {
			return err
		}
		return fmt.Errorf("node %s: did not exit within %v of SIGTERM; killed", n.name, timeout)
	}
}

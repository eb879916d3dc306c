package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exitCode waits for the node's process to exit and returns its code.
func (n *node) exitCode(timeout time.Duration) int {
	n.t.Helper()
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(timeout):
		n.t.Fatalf("%s still runs after %v:\n%s", n.name, timeout, n.logTail(40))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(n.waitErr, &ee) {
		return ee.ExitCode()
	}
	if n.waitErr != nil {
		n.t.Fatalf("%s: %v", n.name, n.waitErr)
	}
	return 0
}

// TestServeStartStop: chime serve logs the web UI's URL and how to stop
// it, and stops cleanly on SIGINT and on SIGTERM.
func TestServeStartStop(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			n := startNode(t, "node", nodeConfig{})
			log := n.logTail(100)
			for _, want := range []string{"web UI at http://" + n.addr + "/", "Ctrl-C", fmt.Sprintf("kill %d", n.cmd.Process.Pid)} {
				if !strings.Contains(log, want) {
					t.Errorf("the start log does not say %q:\n%s", want, log)
				}
			}
			// The OpenAPI document carries the version chime version prints.
			out, err := exec.Command(chimeBin, "version").Output()
			if err != nil {
				t.Fatal(err)
			}
			version, _, _ := strings.Cut(strings.TrimPrefix(string(out), "version: "), "\n")
			var doc struct {
				Info struct{ Version string } `json:"info"`
			}
			callJSON(t, "GET", n.url("/api/v1/openapi.json"), nil, http.StatusOK, &doc)
			if doc.Info.Version != version {
				t.Errorf("openapi.json info.version = %q, chime version says %q", doc.Info.Version, version)
			}
			n.stop(sig)
			if code := n.exitCode(time.Second); code != 0 {
				t.Errorf("exit code after %v = %d, want 0\n%s", sig, code, n.logTail(20))
			}
			if !strings.Contains(n.logTail(20), "shutting down") {
				t.Errorf("no clean shutdown logged after %v:\n%s", sig, n.logTail(20))
			}
		})
	}
}

// TestServeDataDirLocked: a second chime serve in the data dir of a
// running one (embedded store) exits 2, saying the data dir is in use.
func TestServeDataDirLocked(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	first := startNode(t, "first", nodeConfig{DataDir: dir})
	second := launchNode(t, "second", nodeConfig{DataDir: dir})
	if code := second.exitCode(30 * time.Second); code != 2 {
		t.Fatalf("second node's exit code = %d, want 2\n%s", code, second.logTail(20))
	}
	log := second.logTail(20)
	for _, want := range []string{"data dir " + dir + " is in use", fmt.Sprintf("pid %d", first.cmd.Process.Pid), "--data-dir"} {
		if !strings.Contains(log, want) {
			t.Errorf("second node's error does not say %q:\n%s", want, log)
		}
	}
	if code, _ := call(t, "GET", first.url("/readyz"), nil); code != http.StatusOK {
		t.Errorf("first node /readyz = %d after the second's attempt", code)
	}
	// Once the first has stopped, the data dir is free.
	first.stop(syscall.SIGTERM)
	startNode(t, "third", nodeConfig{DataDir: dir})
}

// TestServeNodeIDInUse: a node refuses to start (exit 2, naming the node
// id and both addresses) while a live node with its id and another address
// heartbeats in the shared store; once that node has stopped, it starts.
func TestServeNodeIDInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "shared.db")
	cfg := func(name string) nodeConfig {
		return nodeConfig{DataDir: filepath.Join(dir, name), DB: db, NodeID: "twin", Extra: []string{"--file-locks"}}
	}
	first := startNode(t, "first", cfg("first"))
	second := launchNode(t, "second", cfg("second"))
	if code := second.exitCode(30 * time.Second); code != 2 {
		t.Fatalf("second node's exit code = %d, want 2\n%s", code, second.logTail(20))
	}
	log := second.logTail(20)
	for _, want := range []string{"node twin already runs at " + first.addr, "as twin at " + second.addr, "--node-id"} {
		if !strings.Contains(log, want) {
			t.Errorf("second node's error does not say %q:\n%s", want, log)
		}
	}
	first.stop(syscall.SIGTERM)
	second.start()
	second.waitReady(30 * time.Second)
}

// TestServeStopsWithGoRun: a chime serve run by go run (a binary in a
// directory named exe) stops when the go run process is gone, as after
// kill PID of a `go run ./cmd/chime serve &` job: go run dies of SIGTERM
// without passing it on.
func TestServeStopsWithGoRun(t *testing.T) {
	t.Parallel()
	exeDir := filepath.Join(t.TempDir(), "exe")
	if err := os.MkdirAll(exeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(exeDir, "chime")
	if err := os.Link(chimeBin, bin); err != nil {
		if err := copyFile(chimeBin, bin); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	logPath := filepath.Join(t.TempDir(), "node.log")
	// The shell stands for go run: it starts chime and waits for it.
	sh := exec.Command("sh", "-c", fmt.Sprintf("%s serve --listen 127.0.0.1:%d --data-dir %s >%s 2>&1 & wait", bin, port, dataDir, logPath))
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	waitUntil(t, 30*time.Second, "node ready", func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if err := sh.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sh.Wait()
	waitUntil(t, 30*time.Second, "node stopped", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "go run exited: stopping") && strings.Contains(string(b), "shutting down"), string(b)
	})
	waitUntil(t, 30*time.Second, "port free", func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return true, ""
		}
		resp.Body.Close()
		return false, resp.Status
	})
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

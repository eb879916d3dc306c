package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

var (
	chimeBinOnce sync.Once
	chimeBin     string
	chimeBinErr  error
)

// buildChime builds the chime binary once for the daemon tests, which
// need a real executable to re-exec.
func buildChime(t *testing.T) string {
	t.Helper()
	chimeBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "chime-bin")
		if err != nil {
			chimeBinErr = err
			return
		}
		chimeBin = filepath.Join(dir, "chime")
		out, err := exec.Command("go", "build", "-o", chimeBin, "../../cmd/chime").CombinedOutput()
		if err != nil {
			chimeBinErr = err
			chimeBin = string(out)
		}
	})
	if chimeBinErr != nil {
		t.Fatalf("build chime: %v\n%s", chimeBinErr, chimeBin)
	}
	return chimeBin
}

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return out.String() + errb.String(), code
}

func TestCronDaemonStartStateListStop(t *testing.T) {
	bin := buildChime(t)
	dir := t.TempDir()
	cleanDir := t.TempDir()
	start := exec.Command(bin, "cron", "start", "--daemon", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "debug",
		"--cleanup-root", cleanDir, "--cleanup-root", t.TempDir())
	start.Env = append(os.Environ(), "CHIME_SMTP_HOST=localhost")
	out, err := start.CombinedOutput()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "chime started (pid ") {
		t.Fatalf("start output %q", out)
	}
	st, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if alive(st.PID) {
			exec.Command(bin, "cron", "stop", "--data-dir", dir).Run()
		}
	})
	if pid, _ := readPID(dir); pid != st.PID || !alive(pid) {
		t.Fatalf("pid file %d, state %+v", pid, st)
	}
	if _, err := os.Stat(filepath.Join(dir, LogFile)); err != nil {
		t.Fatal(err)
	}

	// A second start refuses.
	if out, err := exec.Command(bin, "cron", "start", "--daemon", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "already running") {
		t.Fatalf("second start: %v %s", err, out)
	}

	res, err := http.Post("http://"+st.Addr+"/api/v1/timers", "application/json", strings.NewReader(
		`{"app": "ops", "name": "hourly-cleanup", "schedule": "0 * * * *",
		  "action": {"type": "handler", "handler": {"name": "cleanup_files", "args": {"dir": "`+cleanDir+`", "pattern": "*.tmp", "older_than": "24h"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("create timer: %d", res.StatusCode)
	}

	got, code := runCLI(t, "cron", "state", "--data-dir", dir)
	for _, want := range []string{"state:   running", "pid:     " + strconv.Itoa(st.PID), "node:    " + st.NodeID, "timers:  1 (1 enabled)", "ops/hourly-cleanup"} {
		if code != 0 || !strings.Contains(got, want) {
			t.Fatalf("state (exit %d) lacks %q:\n%s", code, want, got)
		}
	}
	got, code = runCLI(t, "cron", "state", "--data-dir", dir, "-o", "json")
	if code != 0 || !strings.Contains(got, `"running": true`) {
		t.Fatalf("state json (exit %d):\n%s", code, got)
	}
	got, code = runCLI(t, "cron", "list", "--data-dir", dir)
	if code != 0 || !strings.Contains(got, "NEXT FIRE") || !strings.Contains(got, "hourly-cleanup") || !strings.Contains(got, "handler:cleanup_files") {
		t.Fatalf("list (exit %d):\n%s", code, got)
	}

	got, code = runCLI(t, "cron", "stop", "--data-dir", dir)
	if code != 0 || !strings.Contains(got, "stopped") {
		t.Fatalf("stop (exit %d): %s", code, got)
	}
	if alive(st.PID) {
		t.Fatal("daemon still alive")
	}
	if _, err := os.Stat(filepath.Join(dir, PIDFile)); !os.IsNotExist(err) {
		t.Fatal("pid file left")
	}
	got, code = runCLI(t, "cron", "state", "--data-dir", dir)
	if code != 3 || !strings.Contains(got, "stopped") {
		t.Fatalf("state after stop (exit %d): %s", code, got)
	}
	got, code = runCLI(t, "cron", "stop", "--data-dir", dir)
	if code != 0 || !strings.Contains(got, "not running") {
		t.Fatalf("stop again (exit %d): %s", code, got)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, LogFile)); !strings.Contains(string(log), "chime serving") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestCronRestart(t *testing.T) {
	bin := buildChime(t)
	dir := t.TempDir()
	if out, err := exec.Command(bin, "cron", "start", "--daemon", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("start: %v %s", err, out)
	}
	first, _ := readState(dir)
	out, err := exec.Command(bin, "cron", "restart", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v %s", err, out)
	}
	second, _ := readState(dir)
	t.Cleanup(func() { exec.Command(bin, "cron", "stop", "--data-dir", dir).Run() })
	if second.PID == first.PID || !alive(second.PID) || alive(first.PID) || second.NodeID != first.NodeID {
		t.Fatalf("first %+v second %+v\n%s", first, second, out)
	}
}

func TestCronStartForeground(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- Main(ctx, []string{"cron", "start", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "error"}, &out, &out)
	}()
	// A wait for a condition, in the shape of testenv.Eventually (issue
	// 13), which can replace it once the helper is on this branch.
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var st DaemonState
	for {
		var err error
		if st, err = readState(dir); err == nil && st.Addr != "" {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no state file; output:\n%s", out.String())
		}
		<-tick.C
	}
	if st.PID != os.Getpid() {
		t.Fatalf("state %+v", st)
	}
	got, code := runCLI(t, "cron", "state", "--data-dir", dir)
	if code != 0 || !strings.Contains(got, "running") {
		t.Fatalf("state (exit %d): %s", code, got)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); !os.IsNotExist(err) {
		t.Fatal("state file left")
	}
}

// TestCronDaemonAdminToken: an admin token given to `cron start --daemon`
// as a flag reaches the daemon through its environment (not its command
// line), and `cron state` gets in with --token and not without.
func TestCronDaemonAdminToken(t *testing.T) {
	bin := buildChime(t)
	dir := t.TempDir()
	const token = "daemon-admin-token-0123456789"
	out, err := exec.Command(bin, "cron", "start", "--daemon", "--listen", "127.0.0.1:0", "--data-dir", dir,
		"--admin-token", token).CombinedOutput()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	st, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command(bin, "cron", "stop", "--data-dir", dir).Run() })
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/cmdline")
	if len(cmdline) > 0 && bytes.Contains(cmdline, []byte(token)) {
		t.Errorf("the daemon's command line holds the admin token: %q", cmdline)
	}
	t.Setenv(EnvToken, "")
	t.Setenv(EnvName("admin-token"), "")
	if out, code := runCLI(t, "cron", "state", "--data-dir", dir); code != 1 || !strings.Contains(out, "HTTP 401") {
		t.Errorf("state without a token: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "cron", "list", "--data-dir", dir, "--token", token); code != 0 {
		t.Errorf("list with --token: exit %d\n%s", code, out)
	}
	t.Setenv(EnvName("admin-token"), token)
	if out, code := runCLI(t, "cron", "state", "--data-dir", dir); code != 0 || !strings.Contains(out, "running") {
		t.Errorf("state with CHIME_ADMIN_TOKEN: exit %d\n%s", code, out)
	}
}

// TestDaemonArgs: the daemon gets a repeated flag once per value, and the
// secrets through its environment instead of its command line.
func TestDaemonArgs(t *testing.T) {
	var o nodeOptions
	cmd := &cobra.Command{Use: "start"}
	addNodeFlags(cmd, &o)
	cmd.Flags().Bool("daemon", false, "")
	if err := cmd.ParseFlags([]string{"--daemon", "--allow-shell", "--cleanup-root", "/a", "--cleanup-root", "/b",
		"--secret-key", "S3CRET", "--smtp-password", "pw", "--listen", "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	args, env := daemonArgs(cmd.Flags())
	want := []string{"cron", "start", "--allow-shell=true", "--cleanup-root=/a", "--cleanup-root=/b", "--listen=127.0.0.1:1"}
	if !slices.Equal(args, want) {
		t.Errorf("args %q, want %q", args, want)
	}
	if !slices.Equal(env, []string{"CHIME_SECRET_KEY=S3CRET", "CHIME_SMTP_PASSWORD=pw"}) {
		t.Errorf("env %q", env)
	}
}

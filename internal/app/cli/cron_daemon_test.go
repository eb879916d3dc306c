package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"net"
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
		out, err := exec.Command("go", "build", "-o", chimeBin, "../../../cmd/chime").CombinedOutput()
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
// as a flag reaches the daemon through an inherited pipe (not its command
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
// secrets apart (handed over through a pipe), not on its command line.
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

// TestRestartArgs: chime cron restart starts the node with the flags of
// the one it replaces, those given to restart replacing theirs, and
// refuses when a secret the node had is not given again.
func TestRestartArgs(t *testing.T) {
	st := DaemonState{
		Flags: []string{"--listen=127.0.0.1:18767", "--db=sqlite://x.db", "--cleanup-root=/a", "--cleanup-root=/b", "--log-level=debug"},
	}
	tests := []struct {
		name    string
		st      DaemonState
		args    []string
		env     map[string]string
		want    []string
		wantEnv []string
		wantErr string
	}{
		{name: "kept", st: st,
			want: []string{"--listen=127.0.0.1:18767", "--db=sqlite://x.db", "--cleanup-root=/a", "--cleanup-root=/b", "--log-level=debug"}},
		{name: "a flag replaces", st: st, args: []string{"--listen", "127.0.0.1:9"},
			want: []string{"--db=sqlite://x.db", "--cleanup-root=/a", "--cleanup-root=/b", "--log-level=debug", "--listen=127.0.0.1:9"}},
		{name: "a repeated flag replaces all its values", st: st, args: []string{"--cleanup-root", "/c"},
			want: []string{"--listen=127.0.0.1:18767", "--db=sqlite://x.db", "--log-level=debug", "--cleanup-root=/c"}},
		{name: "a new flag adds", st: st, args: []string{"--allow-shell"},
			want: []string{"--listen=127.0.0.1:18767", "--db=sqlite://x.db", "--cleanup-root=/a", "--cleanup-root=/b", "--log-level=debug", "--allow-shell=true"}},
		{name: "the node's flag beats restart's environment", st: st, env: map[string]string{"CHIME_LISTEN": "127.0.0.1:1", "CHIME_POOL_SIZE": "7"},
			want: []string{"--listen=127.0.0.1:18767", "--db=sqlite://x.db", "--cleanup-root=/a", "--cleanup-root=/b", "--log-level=debug", "--pool-size=7"}},
		{name: "a secret given again", st: DaemonState{Flags: []string{}, SecretFlags: []string{"admin-token"}},
			env: map[string]string{"CHIME_ADMIN_TOKEN": "admin-token-0123456789"}, wantEnv: []string{"CHIME_ADMIN_TOKEN=admin-token-0123456789"}},
		{name: "a secret as a flag", st: DaemonState{Flags: []string{}, SecretFlags: []string{"admin-token"}},
			args: []string{"--admin-token", "admin-token-0123456789"}, wantEnv: []string{"CHIME_ADMIN_TOKEN=admin-token-0123456789"}},
		{name: "an empty secret", st: DaemonState{Flags: []string{}, SecretFlags: []string{"admin-token"}},
			env: map[string]string{"CHIME_ADMIN_TOKEN": ""}, wantErr: "--admin-token"},
		{name: "a secret not given again", st: DaemonState{Flags: []string{"--listen=127.0.0.1:18767"}, SecretFlags: []string{"admin-token", "secret-key"}},
			args: []string{"--admin-token", "admin-token-0123456789"}, wantErr: "--secret-key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var o nodeOptions
			cmd := &cobra.Command{Use: "restart"}
			addNodeFlags(cmd, &o)
			cmd.Flags().Duration("timeout", 0, "")
			if err := cmd.ParseFlags(append(tc.args, "--timeout=1s")); err != nil {
				t.Fatal(err)
			}
			if _, err := o.config(cmd); err != nil {
				t.Fatal(err)
			}
			args, env, err := restartArgs(tc.st, cmd.Flags())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := append([]string{"cron", "start"}, tc.want...); !slices.Equal(args, want) {
				t.Errorf("args\n%q\nwant\n%q", args, want)
			}
			if !slices.Equal(env, tc.wantEnv) {
				t.Errorf("env %q, want %q", env, tc.wantEnv)
			}
		})
	}
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestCronRestartKeepsFlags: the bug of issue 15. A daemon started on a
// port of its own with a relative SQLite file (x.db) and a flag from its
// environment comes back, after chime cron restart run from another
// directory with only --data-dir, on the same port with the same file;
// a flag given to restart replaces the node's.
func TestCronRestartKeepsFlags(t *testing.T) {
	bin := buildChime(t)
	work := t.TempDir() // the daemon's working directory, where x.db is
	dir := filepath.Join(work, "data")
	addr := "127.0.0.1:" + freePort(t)
	start := exec.Command(bin, "cron", "start", "--daemon", "--listen", addr, "--db", "sqlite://x.db", "--data-dir", dir)
	start.Dir = work
	start.Env = append(os.Environ(), "CHIME_LOG_LEVEL=debug")
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	first, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command(bin, "cron", "stop", "--data-dir", dir).Run() })
	if first.Addr != addr || first.Dir != work {
		t.Fatalf("first state %+v", first)
	}

	restart := exec.Command(bin, "cron", "restart", "--data-dir", dir)
	restart.Dir = t.TempDir()
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	second, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if second.PID == first.PID || alive(first.PID) || !alive(second.PID) || second.NodeID != first.NodeID {
		t.Fatalf("first %+v\nsecond %+v", first, second)
	}
	if second.Addr != addr {
		t.Errorf("restarted on %s, want %s", second.Addr, addr)
	}
	for _, want := range []string{"--listen=" + addr, "--db=sqlite://x.db", "--log-level=debug"} {
		if !slices.Contains(second.Flags, want) {
			t.Errorf("restarted node's flags %q lack %s", second.Flags, want)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "x.db")); err != nil {
		t.Errorf("x.db: %v", err)
	}
	for _, stray := range []string{filepath.Join(dir, "chime.db"), filepath.Join(restart.Dir, "x.db")} {
		if _, err := os.Stat(stray); !os.IsNotExist(err) {
			t.Errorf("%s: %v; the restarted node uses another store", stray, err)
		}
	}

	// A flag given to restart replaces the node's; the others stay.
	if out, err := exec.Command(bin, "cron", "restart", "--data-dir", dir, "--listen", "127.0.0.1:0").CombinedOutput(); err != nil {
		t.Fatalf("restart --listen: %v\n%s", err, out)
	}
	third, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if third.Addr == addr || !slices.Contains(third.Flags, "--db=sqlite://x.db") || !slices.Contains(third.Flags, "--listen=127.0.0.1:0") {
		t.Errorf("after restart --listen: %+v", third)
	}
}

// TestCronRestartSecrets: a secret the daemon was given is not in its
// state file; restart without it refuses (exit 2) and leaves the node
// running, and restart with it in the environment restarts the node.
func TestCronRestartSecrets(t *testing.T) {
	bin := buildChime(t)
	dir := t.TempDir()
	const token = "restart-admin-token-0123456789"
	if out, err := exec.Command(bin, "cron", "start", "--daemon", "--listen", "127.0.0.1:0", "--data-dir", dir, "--admin-token", token).CombinedOutput(); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	first, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command(bin, "cron", "stop", "--data-dir", dir).Run() })
	if b, _ := os.ReadFile(filepath.Join(dir, StateFile)); bytes.Contains(b, []byte(token)) {
		t.Errorf("the state file holds the admin token:\n%s", b)
	}
	if !slices.Equal(first.SecretFlags, []string{"admin-token"}) {
		t.Errorf("secret flags %q", first.SecretFlags)
	}

	restart := exec.Command(bin, "cron", "restart", "--data-dir", dir)
	restart.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "CHIME_ADMIN_TOKEN=") })
	out, err := restart.CombinedOutput()
	if code := restart.ProcessState.ExitCode(); err == nil || code != 2 || !strings.Contains(string(out), "--admin-token") {
		t.Fatalf("restart without the token: exit %d\n%s", code, out)
	}
	if st, ok := runningState(dir); !ok || st.PID != first.PID {
		t.Fatalf("the node did not keep running: %+v", st)
	}

	restart = exec.Command(bin, "cron", "restart", "--data-dir", dir)
	restart.Env = append(os.Environ(), "CHIME_ADMIN_TOKEN="+token)
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("restart with CHIME_ADMIN_TOKEN: %v\n%s", err, out)
	}
	second, err := readState(dir)
	if err != nil || second.PID == first.PID {
		t.Fatalf("second %+v: %v", second, err)
	}
	t.Setenv(EnvToken, "")
	t.Setenv(EnvName("admin-token"), "")
	if out, code := runCLI(t, "cron", "state", "--data-dir", dir); code != 1 || !strings.Contains(out, "HTTP 401") {
		t.Errorf("the restarted node lets in a client without a token: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "cron", "state", "--data-dir", dir, "--token", token); code != 0 {
		t.Errorf("the restarted node refuses its admin token: exit %d\n%s", code, out)
	}
}

// TestCronDaemonSecretsNotInEnviron: the secrets given to `cron start
// --daemon`, as flags or in its environment, are not in the daemon's
// environment (/proc/PID/environ) nor on its command line, and the daemon
// has them (its admin token lets a client in).
func TestCronDaemonSecretsNotInEnviron(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	bin := buildChime(t)
	for _, viaEnv := range []bool{false, true} {
		t.Run(map[bool]string{false: "flags", true: "environment"}[viaEnv], func(t *testing.T) {
			dir := t.TempDir()
			const token = "environ-admin-token-0123456789"
			const smtpPassword = "environ-smtp-password-42"
			secretKey := base64.StdEncoding.EncodeToString([]byte("environ-secret-key-32-bytes-long"))
			start := exec.Command(bin, "cron", "start", "--daemon", "--listen", "127.0.0.1:0", "--data-dir", dir)
			start.Env = withoutSecretEnv(os.Environ())
			if viaEnv {
				start.Env = append(start.Env, "CHIME_ADMIN_TOKEN="+token, "CHIME_SMTP_PASSWORD="+smtpPassword, "CHIME_SECRET_KEY="+secretKey)
			} else {
				start.Args = append(start.Args, "--admin-token", token, "--smtp-password", smtpPassword, "--secret-key", secretKey)
			}
			if out, err := start.CombinedOutput(); err != nil {
				t.Fatalf("start: %v\n%s", err, out)
			}
			st, err := readState(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { exec.Command(bin, "cron", "stop", "--data-dir", dir).Run() })
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/cmdline")
			for _, secret := range []string{token, smtpPassword, secretKey} {
				if bytes.Contains(environ, []byte(secret)) {
					t.Errorf("the daemon's environment holds %q", secret)
				}
				if bytes.Contains(cmdline, []byte(secret)) {
					t.Errorf("the daemon's command line holds %q", secret)
				}
			}
			if !slices.Equal(st.SecretFlags, []string{"admin-token", "secret-key", "smtp-password"}) {
				t.Errorf("secret flags %q", st.SecretFlags)
			}
			t.Setenv(EnvToken, "")
			t.Setenv(EnvName("admin-token"), "")
			if out, code := runCLI(t, "cron", "state", "--data-dir", dir, "--token", token); code != 0 {
				t.Errorf("the daemon refuses its admin token: exit %d\n%s", code, out)
			}
		})
	}
}

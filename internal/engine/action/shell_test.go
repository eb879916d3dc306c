package action

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"

	"github.com/chimehq/chime/model"
)

func shellTimer(a model.ShellAction) *model.Timer {
	return &model.Timer{ID: "t1", Action: model.Action{Type: model.ActionShell, Shell: &a}, Timeout: 5 * time.Second}
}

func shellRun(t *testing.T, ctx context.Context, a model.ShellAction) ([]byte, error) {
	t.Helper()
	run := &model.Run{ID: "r1", TimerID: "t1", ScheduledAt: time.Now(), Attempt: 1}
	return NewShellRunner().Run(ctx, run, shellTimer(a))
}

func TestShellOutputNoShell(t *testing.T) {
	// Without a shell, metacharacters are plain arguments.
	out, err := shellRun(t, context.Background(), model.ShellAction{Command: "echo", Args: []string{"a b", "$HOME", ";", "|"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != "a b $HOME ; |\n" {
		t.Fatalf("output %q", got)
	}
}

func TestShellStdoutAndStderr(t *testing.T) {
	out, err := shellRun(t, context.Background(), model.ShellAction{Command: "sh", Args: []string{"-c", "echo out; echo err >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.Contains(s, "out\n") || !strings.Contains(s, "err\n") {
		t.Fatalf("output %q", s)
	}
}

func TestShellExitCode(t *testing.T) {
	out, err := shellRun(t, context.Background(), model.ShellAction{Command: "sh", Args: []string{"-c", "echo oops; exit 3"}})
	if err == nil || !strings.Contains(err.Error(), "exited with code 3") {
		t.Fatalf("err = %v", err)
	}
	if string(out) != "oops\n" {
		t.Fatalf("output %q", out)
	}
}

func TestShellMissingCommand(t *testing.T) {
	_, err := shellRun(t, context.Background(), model.ShellAction{Command: "chime-no-such-command-xyz"})
	if err == nil {
		t.Fatal("no error")
	}
}

func TestShellEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	out, err := shellRun(t, context.Background(), model.ShellAction{
		Command: "sh", Args: []string{"-c", `echo "$GREETING"; echo "$CHIME_RUN_ID"; pwd`},
		Env: map[string]string{"GREETING": "hello world"}, Dir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || lines[0] != "hello world" || lines[1] != "r1" {
		t.Fatalf("output %q", out)
	}
	if got, _ := filepath.EvalSymlinks(lines[2]); got != real {
		t.Fatalf("dir %q, want %q", lines[2], real)
	}
}

func TestShellTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := shellRun(t, ctx, model.ShellAction{Command: "sh", Args: []string{"-c", "sleep 30 & echo $! > " + pidFile + "; sleep 30"}})
	if err == nil {
		t.Fatal("no error at the timeout")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s: children were not killed", d)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var pid int
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	// The background child must be gone (or a zombie about to be reaped).
	testenv.Eventually(t, 3*time.Second, "child "+strconv.Itoa(pid)+" to be gone", func() (bool, string) {
		st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z "), "alive: " + string(st)
	})
}

func TestShellOutputTruncated(t *testing.T) {
	out, err := shellRun(t, context.Background(), model.ShellAction{Command: "sh", Args: []string{"-c", "head -c 200000 /dev/zero | tr '\\0' x"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != MaxOutput {
		t.Fatalf("output %d bytes, want %d", len(out), MaxOutput)
	}
}

func TestShellAllowList(t *testing.T) {
	tests := []struct {
		name    string
		allow   []string
		command string
		wantErr bool
	}{
		{"no list allows all", nil, "echo", false},
		{"listed", []string{"true", "echo"}, "echo", false},
		{"not listed", []string{"true"}, "echo", true},
		{"exact match only", []string{"echo"}, "/bin/echo", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := &model.Run{ID: "r1", TimerID: "t1", ScheduledAt: time.Now(), Attempt: 1}
			r := &ShellRunner{Allow: tc.allow}
			_, err := r.Run(context.Background(), run, shellTimer(model.ShellAction{Command: tc.command, Args: []string{"x"}}))
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "--shell-allow") {
				t.Fatalf("err = %v, want one naming --shell-allow", err)
			}
		})
	}
}

// TestShellScheduledAndDueAt: a shell action gets the run's nominal and
// due instants as CHIME_SCHEDULED_AT and CHIME_DUE_AT.
func TestShellScheduledAndDueAt(t *testing.T) {
	t.Parallel()
	sched := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	run := &model.Run{ID: "r1", TimerID: "t1", ScheduledAt: sched, DueAt: sched.Add(1500 * time.Millisecond), Attempt: 1}
	out, err := NewShellRunner().Run(context.Background(), run, shellTimer(model.ShellAction{
		Command: "sh", Args: []string{"-c", `echo "$CHIME_SCHEDULED_AT $CHIME_DUE_AT"`}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "2026-06-01T12:00:00Z 2026-06-01T12:00:01.5Z" {
		t.Errorf("output %q", got)
	}
}

// TestShellCleanEnv: a shell action printing env sees PATH, HOME, LANG,
// TZ, the variables of EnvPass, its own Env and the run's CHIME_*
// variables, and nothing else of the node's environment: not its secrets,
// even when EnvPass names them.
func TestShellCleanEnv(t *testing.T) {
	t.Setenv("CHIME_ADMIN_TOKEN", "node-admin-token-secret")
	t.Setenv("CHIME_SECRET_KEY", "node-secret-key")
	t.Setenv("CHIME_SMTP_PASSWORD", "node-smtp-password")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "node-aws-secret")
	t.Setenv("OPS_PASSED", "passed-value")
	t.Setenv("LANG", "C.UTF-8")
	run := &model.Run{ID: "r1", TimerID: "t1", ScheduledAt: time.Now(), Attempt: 1, Node: "n1"}
	r := &ShellRunner{EnvPass: []string{"OPS_PASSED", "CHIME_ADMIN_TOKEN", "NOT_SET_ANYWHERE"}}
	out, err := r.Run(context.Background(), run, shellTimer(model.ShellAction{Command: "env", Env: map[string]string{"GREETING": "hi"}}))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TZ": true, "OPS_PASSED": true, "GREETING": true}
	got := map[string]string{}
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		got[k] = v
		if !allowed[k] && !strings.HasPrefix(k, "CHIME_") {
			t.Errorf("the command saw %s=%s of the node's environment", k, v)
		}
		if strings.Contains(v, "node-") {
			t.Errorf("the command saw a node secret: %s", line)
		}
	}
	for _, k := range []string{"CHIME_ADMIN_TOKEN", "CHIME_SECRET_KEY", "CHIME_SMTP_PASSWORD"} {
		if _, ok := got[k]; ok {
			t.Errorf("the command saw %s", k)
		}
	}
	if got["OPS_PASSED"] != "passed-value" || got["GREETING"] != "hi" || got["CHIME_RUN_ID"] != "r1" || got["LANG"] != "C.UTF-8" || got["PATH"] == "" {
		t.Errorf("env = %v", got)
	}
}

// TestShellForbiddenEnvAtRun: a stored timer whose env names a variable
// that runs code fails its run without starting the command.
func TestShellForbiddenEnvAtRun(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "ran")
	_, err := shellRun(t, context.Background(), model.ShellAction{Command: "touch", Args: []string{mark},
		Env: map[string]string{"LD_PRELOAD": "/tmp/x.so"}})
	if err == nil || !strings.Contains(err.Error(), "LD_PRELOAD") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the command ran")
	}
}

package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/chimehq/chime/model"
)

// ShellRunner performs "shell" actions. The command runs directly, with
// its arguments, without a shell: {"command": "tar", "args": ["czf",
// "/backup/x.tgz", "/data"]} runs tar. A shell is used only when asked for
// explicitly: {"command": "sh", "args": ["-c", "pg_dump db | gzip > x.gz"]}.
//
// The process starts in a new process group, in the action's Dir (the
// node's working directory when empty), with a clean environment: PATH,
// HOME, LANG and TZ of the node (those it has), the variables named in
// EnvPass (--shell-env-pass), the action's Env, and the run's CHIME_*
// variables. Nothing else of the node's environment reaches the command,
// its secrets (CHIME_ADMIN_TOKEN, CHIME_SECRET_KEY…) least of all. An Env
// naming a variable model.CheckShellEnvName refuses fails the run (the API
// refuses it at creation; Run checks again for timers stored before). Its stdout and stderr, interleaved, are the run's output,
// truncated to MaxOutput. At the timer's timeout the whole process group is
// killed (SIGKILL), children included, and the run fails. A non-zero exit
// status fails the run with the code in the error.
//
// Shell actions are remote code execution for anyone who can create timers:
// `chime serve` registers this runner only with --allow-shell.
type ShellRunner struct {
	// WaitDelay bounds how long Run waits for the output pipes to close
	// after the process group was killed or the command exited. Default 2s.
	WaitDelay time.Duration
	// Allow, when not empty, lists the only commands Run runs (exact
	// match of the action's Command; --shell-allow). Others fail the run.
	// The API refuses them at creation too; Run checks again for timers
	// stored before the list changed.
	Allow []string
	// EnvPass names variables of the node's environment passed to the
	// command besides ShellBaseEnv (--shell-env-pass). Names of node
	// secrets (model.NodeSecretEnv) are never passed.
	EnvPass []string
}

// ShellBaseEnv are the variables of the node's environment every shell
// action gets, when the node has them.
var ShellBaseEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// baseEnv returns the node's variables a shell action gets: ShellBaseEnv
// and pass, without model.NodeSecretEnv, each once, as NAME=value.
func baseEnv(pass []string) []string {
	var env []string
	seen := map[string]bool{}
	for _, k := range append(slices.Clone(ShellBaseEnv), pass...) {
		if seen[k] || slices.Contains(model.NodeSecretEnv, k) {
			continue
		}
		seen[k] = true
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// NewShellRunner returns a ShellRunner.
func NewShellRunner() *ShellRunner { return &ShellRunner{} }

// Run runs the command.
func (s *ShellRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	a := t.Action.Shell
	if a == nil {
		return nil, errors.New("shell action without shell settings")
	}
	if len(s.Allow) > 0 && !slices.Contains(s.Allow, a.Command) {
		return nil, fmt.Errorf("command %q is not among the commands this node allows (--shell-allow)", a.Command)
	}
	if err := model.CheckShellEnv(a.Env); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, a.Command, a.Args...)
	cmd.Dir = a.Dir
	env := baseEnv(s.EnvPass)
	keys := make([]string, 0, len(a.Env))
	for k := range a.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+a.Env[k])
	}
	env = append(env,
		"CHIME_RUN_ID="+run.ID,
		"CHIME_TIMER_ID="+run.TimerID,
		"CHIME_SCHEDULED_AT="+run.ScheduledAt.UTC().Format(time.RFC3339Nano),
		"CHIME_DUE_AT="+DueAt(run).UTC().Format(time.RFC3339Nano),
		fmt.Sprintf("CHIME_ATTEMPT=%d", run.Attempt),
		"CHIME_NODE_ID="+run.Node,
		"CHIME_UPSTREAM_RUN_ID="+run.UpstreamRunID,
	)
	if run.Shard != nil {
		env = append(env, fmt.Sprintf("CHIME_SHARD_INDEX=%d", run.Shard.Index), fmt.Sprintf("CHIME_SHARD_TOTAL=%d", run.Shard.Total))
	}
	cmd.Env = env
	out := &limitedBuffer{max: MaxOutput}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Kill the whole group: the command and whatever it started.
		if cmd.Process == nil {
			return nil
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = s.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	err := cmd.Run()
	if err == nil && ctx.Err() == nil {
		return out.Bytes(), nil
	}
	// Make sure nothing of the group survives, also on a normal exit that
	// left children behind while the context ended.
	if cmd.Process != nil && ctx.Err() != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return out.Bytes(), fmt.Errorf("command %s killed: %w", a.Command, ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return out.Bytes(), fmt.Errorf("command %s killed by signal %s", a.Command, ws.Signal())
		}
		return out.Bytes(), fmt.Errorf("command %s exited with code %d", a.Command, ee.ExitCode())
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// The command exited 0 but left children holding its output.
		return out.Bytes(), nil
	}
	return out.Bytes(), fmt.Errorf("command %s: %w", a.Command, err)
}

// limitedBuffer keeps the first max bytes written to it and discards the
// rest, so that a chatty command cannot exhaust memory.
type limitedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
			b.truncated = true
		} else {
			b.buf.Write(p)
		}
	} else if len(p) > 0 {
		b.truncated = true
	}
	return len(p), nil
}

// Bytes returns the kept output.
func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

package chime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/nodeparts"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newNode(t *testing.T, cfg chime.Config) *chime.Node {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.DB == "" {
		cfg.DB = "sqlite://" + filepath.Join(cfg.DataDir, "chime.db")
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	n, err := chime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func start(t *testing.T, n *chime.Node) {
	t.Helper()
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
}

func at(d time.Duration) string { return "@at " + time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

// waitRun waits until the timer has a run in a terminal status and returns it.
func waitRun(t *testing.T, n *chime.Node, id string, timeout time.Duration) *model.Run {
	t.Helper()
	var found *model.Run
	testenv.Eventually(t, timeout, "a finished run of timer "+id, func() (bool, string) {
		runs, _, err := nodeparts.Of(n).Store.ListRuns(context.Background(), store.RunFilter{TimerID: id})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range runs {
			if r.Status.Terminal() {
				found = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d runs, none finished", len(runs))
	})
	return found
}

func TestHandlerRunRecorded(t *testing.T) {
	n := newNode(t, chime.Config{})
	var got atomic.Pointer[chime.Run]
	n.HandleFunc("echo", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		got.Store(run)
		if _, ok := ctx.Deadline(); !ok {
			return nil, errors.New("no deadline")
		}
		var args struct{ N int }
		if err := run.Decode(&args); err != nil {
			return nil, err
		}
		return fmt.Appendf(nil, "n=%d run=%s", args.N, run.ID), nil
	})
	start(t, n)
	id, err := n.Upsert(context.Background(), chime.Timer{Name: "echo", Schedule: at(time.Second),
		Action: chime.HandlerAction("echo", map[string]int{"n": 7})})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n, id, 10*time.Second)
	if r.Status != model.RunSucceeded || r.Output != "n=7 run="+r.ID {
		t.Fatalf("run %+v", r)
	}
	hr := got.Load()
	if hr.ID != r.ID || hr.Attempt != 1 || hr.Timer.ID != id || hr.Handler != "echo" || string(hr.Args) != `{"n":7}` {
		t.Fatalf("handler saw %+v", hr)
	}
}

func TestHandlerPanicAndTimeout(t *testing.T) {
	n := newNode(t, chime.Config{})
	n.HandleFunc("boom", func(ctx context.Context, run *chime.Run) ([]byte, error) { panic("kaboom") })
	n.HandleFunc("slow", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		<-ctx.Done()
		return []byte("partial"), ctx.Err()
	})
	start(t, n)
	ctx := context.Background()
	boom, err := n.Upsert(ctx, chime.Timer{Name: "boom", Schedule: at(time.Second), Action: chime.HandlerAction("boom", nil)})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := n.Upsert(ctx, chime.Timer{Name: "slow", Schedule: at(time.Second), Timeout: 300 * time.Millisecond,
		Action: chime.HandlerAction("slow", nil)})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n, boom, 10*time.Second)
	if r.Status != model.RunFailed || !strings.Contains(r.Error, "panic: kaboom") || !strings.Contains(r.Error, "goroutine") {
		t.Fatalf("panic run %+v", r)
	}
	r = waitRun(t, n, slow, 10*time.Second)
	if r.Status != model.RunFailed || !strings.Contains(r.Error, "timed out after 300ms") || r.Output != "partial" {
		t.Fatalf("slow run %+v", r)
	}
}

func TestMissingHandlerOnNode(t *testing.T) {
	dir := t.TempDir()
	// A node with the handler defines the timer; a node without it runs it.
	a := newNode(t, chime.Config{DataDir: dir, Cluster: chime.ClusterConfig{NodeID: "has-it"}})
	a.HandleFunc("job", func(ctx context.Context, run *chime.Run) ([]byte, error) { return nil, nil })
	id, err := a.Upsert(context.Background(), chime.Timer{Name: "job", Schedule: at(time.Second), Action: chime.HandlerAction("job", nil)})
	if err != nil {
		t.Fatal(err)
	}
	a.Shutdown(context.Background())
	b := newNode(t, chime.Config{DataDir: dir, Cluster: chime.ClusterConfig{NodeID: "lacks-it"}})
	start(t, b)
	r := waitRun(t, b, id, 10*time.Second)
	// No live node has the handler (the node that has it never ran): the
	// run ends at once, skipped, saying so (docs/fleet.md, docs/skips.md).
	if r.Status != model.RunSkipped || r.Reason != model.SkipHandlerMissing || r.Attempt != 1 ||
		r.Error != `handler registered on no live node: no such handler "job" on any live node (live: lacks-it)` {
		t.Fatalf("run %+v", r)
	}
}

type strictArgs struct{}

func (strictArgs) Run(ctx context.Context, run *chime.Run) ([]byte, error) { return nil, nil }
func (strictArgs) ValidateArgs(args json.RawMessage) error {
	var v struct{ Dir string }
	if err := json.Unmarshal(args, &v); err != nil || v.Dir == "" {
		return errors.New("dir is required")
	}
	return nil
}

func TestUpsertValidation(t *testing.T) {
	n := newNode(t, chime.Config{})
	n.Handle("strict", strictArgs{})
	ctx := context.Background()
	cases := map[string]chime.Timer{
		"action.handler.args: dir is required": {Name: "a", Schedule: "@every 1m", Action: chime.HandlerAction("strict", map[string]string{})},
		`no such handler "nope"`:               {Name: "b", Schedule: "@every 1m", Action: chime.HandlerAction("nope", nil)},
		"schedule":                             {Name: "c", Schedule: "61 * * * *", Action: chime.HandlerAction("strict", map[string]string{"dir": "/x"})},
		"--allow-shell":                        {Name: "d", Schedule: "@every 1m", Action: model.Action{Type: "shell", Shell: &model.ShellAction{Command: "ls"}}},
	}
	for want, tm := range cases {
		if _, err := n.Upsert(ctx, tm); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v", want, err)
		}
	}
	if err := n.Every("e", "@every 1m", "nope"); err == nil {
		t.Error("Every with an unknown handler")
	}
}

func TestUpsertIdempotent(t *testing.T) {
	n := newNode(t, chime.Config{App: "myapp"})
	n.HandleFunc("job", func(ctx context.Context, run *chime.Run) ([]byte, error) { return nil, nil })
	ctx := context.Background()
	def := chime.Timer{Name: "job", Schedule: "@every 1h", Action: chime.HandlerAction("job", map[string]any{"a": 1, "b": []int{1, 2}})}
	id, err := n.Upsert(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	before, err := nodeparts.Of(n).Store.GetTimer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if before.App != "myapp" || before.PlannedUntil.IsZero() {
		t.Fatalf("timer %+v", before)
	}
	// The same definition, args written differently: nothing changes.
	def2 := def
	def2.Action = chime.HandlerAction("job", json.RawMessage(`{ "b": [1, 2], "a": 1 }`))
	for range 3 {
		id2, err := n.Upsert(ctx, def2)
		if err != nil || id2 != id {
			t.Fatalf("id %s err %v", id2, err)
		}
	}
	after, _ := nodeparts.Of(n).Store.GetTimer(ctx, id)
	if !after.UpdatedAt.Equal(before.UpdatedAt) || !after.PlannedUntil.Equal(before.PlannedUntil) {
		t.Fatalf("unchanged definition rewrote the timer: %v -> %v", before.UpdatedAt, after.UpdatedAt)
	}
	// A changed schedule updates and replans.
	def.Schedule = "@every 2h"
	if id2, err := n.Upsert(ctx, def); err != nil || id2 != id {
		t.Fatalf("id %s err %v", id2, err)
	}
	after, _ = nodeparts.Of(n).Store.GetTimer(ctx, id)
	if after.Schedule != "@every 2h" || after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("timer not updated: %+v", after)
	}
	runs, _, _ := nodeparts.Of(n).Store.ListRuns(ctx, store.RunFilter{TimerID: id, Status: model.RunPending})
	for _, r := range runs {
		if r.ScheduledAt.Sub(after.CreatedAt) < time.Hour+30*time.Minute {
			t.Fatalf("run of the old schedule left pending: %v", r.ScheduledAt)
		}
	}
	// A changed timeout updates without replanning.
	def.Timeout = time.Minute
	if _, err := n.Upsert(ctx, def); err != nil {
		t.Fatal(err)
	}
	after2, _ := nodeparts.Of(n).Store.GetTimer(ctx, id)
	if after2.Timeout != time.Minute || !after2.PlannedUntil.Equal(after.PlannedUntil) {
		t.Fatalf("timeout change: %+v", after2)
	}
	list, _, _ := nodeparts.Of(n).Store.ListTimers(ctx, store.TimerFilter{})
	if len(list) != 1 {
		t.Fatalf("%d timers", len(list))
	}
}

func TestEveryBeforeStart(t *testing.T) {
	n := newNode(t, chime.Config{})
	var fired atomic.Int32
	n.HandleFunc("tick", func(ctx context.Context, run *chime.Run) ([]byte, error) { fired.Add(1); return nil, nil })
	if err := n.Every("ticker", "@every 1s", "tick"); err != nil {
		t.Fatal(err)
	}
	start(t, n)
	testenv.Eventually(t, 10*time.Second, "two fires", func() (bool, string) {
		return fired.Load() >= 2, fmt.Sprintf("fired %d times", fired.Load())
	})
	tm, err := nodeparts.Of(n).Store.GetTimerByName(context.Background(), chime.DefaultApp, "ticker")
	if err != nil || tm.Action.Handler.Name != "tick" {
		t.Fatalf("timer %+v err %v", tm, err)
	}
}

func TestSelect(t *testing.T) {
	for _, fileLocks := range []bool{false, true} {
		t.Run(fmt.Sprint("fileLocks=", fileLocks), func(t *testing.T) {
			n := newNode(t, chime.Config{Cluster: chime.ClusterConfig{FileLocks: fileLocks}})
			defer n.Shutdown(context.Background())
			ctx := context.Background()
			l, err := n.Select(ctx, "svc", "a", time.Second)
			if err != nil || l != "a" {
				t.Fatalf("leader %q err %v", l, err)
			}
			l, err = n.Select(ctx, "svc", "b", time.Second)
			if err != nil || l != "a" {
				t.Fatalf("leader %q err %v", l, err)
			}
			if _, err := n.Select(ctx, "", "b", time.Second); err == nil {
				t.Fatal("empty service accepted")
			}
		})
	}
}

func TestShellAllowed(t *testing.T) {
	n := newNode(t, chime.Config{Security: chime.SecurityConfig{AllowShell: true}})
	start(t, n)
	id, err := n.Upsert(context.Background(), chime.Timer{Name: "sh", Schedule: at(time.Second),
		Action: model.Action{Type: "shell", Shell: &model.ShellAction{Command: "echo", Args: []string{"hi"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n, id, 10*time.Second)
	if r.Status != model.RunSucceeded || r.Output != "hi\n" {
		t.Fatalf("run %+v", r)
	}
}

// Two processes' worth of nodes on one SQLite file with file locks: the
// timer fires once.
func TestFileLocksSharedSQLite(t *testing.T) {
	dir := t.TempDir()
	var fired atomic.Int32
	var nodes []*chime.Node
	for i := range 2 {
		n := newNode(t, chime.Config{DataDir: dir, Cluster: chime.ClusterConfig{FileLocks: true, NodeID: fmt.Sprint("n", i)}})
		n.HandleFunc("once", func(ctx context.Context, run *chime.Run) ([]byte, error) { fired.Add(1); return nil, nil })
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		start(t, n)
	}
	first := time.Now().Add(2 * time.Second)
	id, err := nodes[0].Upsert(context.Background(), chime.Timer{Name: "once", Schedule: "@at " + first.UTC().Format(time.RFC3339Nano),
		Action: chime.HandlerAction("once", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[1].Upsert(context.Background(), chime.Timer{Name: "once", Schedule: "@every 1h", Action: chime.HandlerAction("once", nil), Disabled: true}); err != nil {
		t.Fatal(err)
	}
	disabled := time.Now()
	// The second definition replaced the first: disabled, nothing fires.
	// The wait is the behaviour under test: nothing fires within it.
	time.Sleep(time.Until(first.Add(time.Second))) // behaviour under test (see above)
	// The first definition's fires: none, unless unchecked below.
	before := fired.Load()
	switch {
	case disabled.After(first.Add(-time.Second)):
		// A save that lands within the claim's lead of the instant (a
		// loaded machine) may come after the fire was claimed: nothing
		// to assert, and the counts below start from what fired.
		t.Logf("the disable landed %v before the instant: not checked (%d fired)", first.Sub(disabled), before)
	case before != 0:
		t.Fatalf("a disabled timer fired %d times", before)
	}
	if _, err := nodes[1].Upsert(context.Background(), chime.Timer{Name: "once", Schedule: at(time.Second), Action: chime.HandlerAction("once", nil)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "one more succeeded run", func() (bool, string) {
		runs, _, err := nodeparts.Of(nodes[0]).Store.ListRuns(context.Background(), store.RunFilter{TimerID: id, Status: model.RunSucceeded})
		if err != nil {
			return false, err.Error()
		}
		return len(runs) == int(before)+1, fmt.Sprintf("%d succeeded runs, %d before", len(runs), before)
	})
	// The wait is the behaviour under test: no second fire comes within it.
	time.Sleep(500 * time.Millisecond) // behaviour under test (see above)
	if got := fired.Load(); got != before+1 {
		t.Fatalf("fired %d times, %d before the last definition", got, before)
	}
}

// TestSQLiteSynchronousConfig: Config.SQLiteSynchronous reaches the store;
// a bad value fails New.
func TestSQLiteSynchronousConfig(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "full", "normal"} {
		n := newNode(t, chime.Config{Database: chime.DatabaseConfig{SQLiteSynchronous: v}})
		n.Shutdown(context.Background())
	}
	dir := t.TempDir()
	n, err := chime.New(chime.Config{DataDir: dir, Logger: quiet(), Database: chime.DatabaseConfig{SQLiteSynchronous: "off"}})
	if err == nil {
		n.Shutdown(context.Background())
		t.Fatal("New with SQLiteSynchronous off: no error")
	}
	if !strings.Contains(err.Error(), "synchronous") {
		t.Errorf("error %q does not name the setting", err)
	}
}

// TestStartAfterShutdown: a node that was shut down does not start again
// and says so; a second Start of a running node is refused.
func TestStartAfterShutdown(t *testing.T) {
	t.Parallel()
	n := newNode(t, chime.Config{})
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err == nil || errors.Is(err, chime.ErrShutdown) {
		t.Errorf("second Start = %v, want an already-started error", err)
	}
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown = %v", err)
	}
	if err := n.Start(ctx); !errors.Is(err, chime.ErrShutdown) {
		t.Errorf("Start after Shutdown = %v, want ErrShutdown", err)
	}
}

package chaos

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/model"
)

// TestCheck feeds the checker a hand-made run: a timer every second and
// one @every 2s, with a missed fire, a redelivery, a true duplicate and a
// fire under a second run id.
func TestCheck(t *testing.T) {
	created := time.Date(2030, 1, 1, 12, 0, 0, 500e6, time.UTC)
	end := created.Add(10 * time.Second) // 12:00:10.5
	timers := []timerSpec{
		{ID: "sec", Spec: "* * * * * *", CreatedAt: created},
		{ID: "two", Spec: "@every 2s", CreatedAt: created},
	}
	cb := func(id string, at time.Time, attempt int, delay time.Duration) Callback {
		return Callback{TimerID: id, RunID: model.RunID(id, at), ScheduledAt: at, Attempt: attempt, Received: at.Add(delay)}
	}
	var calls []Callback
	runs := map[string][]runResp{}
	// sec fires at 12:00:02 … 12:00:10 (12:00:01 is within the grace).
	for s := 2; s <= 10; s++ {
		at := time.Date(2030, 1, 1, 12, 0, s, 0, time.UTC)
		runs["sec"] = append(runs["sec"], runResp{ID: model.RunID("sec", at), ScheduledAt: at, Status: "succeeded", Attempt: 1})
		switch s {
		case 4: // missed
			runs["sec"][len(runs["sec"])-1].Status = "pending"
		case 5: // redelivered after a crash
			calls = append(calls, cb("sec", at, 1, 10*time.Millisecond), cb("sec", at, 2, 6*time.Second))
		case 6: // delivered twice with the same attempt
			calls = append(calls, cb("sec", at, 1, 10*time.Millisecond), cb("sec", at, 1, 20*time.Millisecond))
		case 7: // under a second run id
			c := cb("sec", at, 1, 30*time.Millisecond)
			c.RunID = "other"
			calls = append(calls, cb("sec", at, 1, 10*time.Millisecond), c)
		default:
			calls = append(calls, cb("sec", at, 1, 10*time.Millisecond))
		}
	}
	for at := created.Add(2 * time.Second); !at.After(end); at = at.Add(2 * time.Second) {
		calls = append(calls, cb("two", at, 1, 20*time.Millisecond))
	}
	// A fire after the fault phase is not expected; one off the schedule is unexpected.
	calls = append(calls, cb("sec", end.Add(2*time.Second).Truncate(time.Second), 1, 0))
	calls = append(calls, cb("two", created.Add(3*time.Second), 1, 0))
	kill := Fault{Kind: FaultKill, Node: "n1", Start: created.Add(4 * time.Second), End: created.Add(5 * time.Second)}
	var r Report
	err := check(checkInput{Timers: timers, Calls: calls, Runs: runs, FaultEnd: end, Grace: time.Second,
		Faults: []Fault{kill}, FaultWindow: time.Second}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Expected != 9+5 || r.Missed != 1 || r.Delivered != 13 {
		t.Errorf("expected %d missed %d delivered %d, want 14, 1, 13", r.Expected, r.Missed, r.Delivered)
	}
	if r.Redeliveries != 1 || r.SameAttemptDuplicates != 1 || r.DuplicateExecutions != 1 {
		t.Errorf("redeliveries %d same-attempt %d executions %d, want 1 each", r.Redeliveries, r.SameAttemptDuplicates, r.DuplicateExecutions)
	}
	if r.UnexpectedFires != 1 || r.WrongRunIDs != 1 {
		t.Errorf("unexpected %d wrong ids %d, want 1 and 1", r.UnexpectedFires, r.WrongRunIDs)
	}
	if r.OK() {
		t.Error("OK with a missed fire")
	}
	if len(r.MissedFires) != 1 || r.MissedFires[0].StoreStatus != "pending" || !r.MissedFires[0].InFault {
		t.Errorf("missed fires %+v, want the 12:00:04 one, pending, in the fault", r.MissedFires)
	}
	// The kill's window is [12:00:03.5, 12:00:06.5]: fires at 04 (missed),
	// 05, 06 of sec and 04.5, 06.5 of two.
	if r.DelayDuring.N != 4 || r.Faults[0].Fires != 4 {
		t.Errorf("during faults n=%d, fault fires %d, want 4", r.DelayDuring.N, r.Faults[0].Fires)
	}
	if r.MaxDelayAfterKillMS != 20 {
		t.Errorf("max delay after kill %vms, want 20ms (first callbacks only)", r.MaxDelayAfterKillMS)
	}
	if len(r.Slowest) != 13 || r.Slowest[0].DelayMS != 20 || r.Slowest[12].DelayMS != 10 {
		t.Errorf("slowest fires %+v, want 13 from 20ms down to 10ms", r.Slowest)
	}
	var sb strings.Builder
	if err := r.WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "FAIL") {
		t.Errorf("table does not say FAIL:\n%s", sb.String())
	}
}

// TestChaosShort runs chime chaos briefly: the SQLite backend always (unless
// -short), and MariaDB + Redis when the test servers are there. Node faults
// only (restarting shared servers would disturb other tests; scripts/chaos.sh
// restarts its own), with the default share of long actions. It asserts the
// guarantees it always has: no missed fire, no true duplicate; the other
// checks (concurrent executions, early fires, completed deliveries
// recorded) and the delays are logged.
func TestChaosShort(t *testing.T) {
	if testing.Short() && os.Getenv("CHIME_CHAOS") != "1" {
		t.Skip("chaos run skipped with -short (set CHIME_CHAOS=1 to run it)")
	}
	bin := buildChime(t)
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		runShort(t, Config{Backend: BackendSQLite, Bin: bin})
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		db := testenv.MySQLDSN(t)
		rdb := testenv.RedisDB(t)
		runShort(t, Config{Backend: BackendMySQL, Bin: bin, DB: db, Redis: rdb})
	})
}

func runShort(t *testing.T, cfg Config) {
	cfg.Nodes, cfg.Timers = 3, 150
	cfg.Duration, cfg.FaultEvery, cfg.Warmup = 40*time.Second, 6*time.Second, 3*time.Second
	cfg.MaxSettle = 45 * time.Second
	cfg.Faults = []string{FaultKill, FaultPause}
	cfg.WorkDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	_ = rep.WriteTable(&sb)
	t.Logf("chaos report:\n%s", sb.String())
	if rep.Missed != 0 || rep.SameAttemptDuplicates != 0 || rep.DuplicateExecutions != 0 {
		for _, n := range []string{"chaos-n1", "chaos-n2", "chaos-n3"} {
			if b, err := os.ReadFile(filepath.Join(cfg.WorkDir, n+".log")); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("---- last lines of %s.log ----\n%s", n, strings.Join(lines[max(0, len(lines)-60):], "\n"))
			}
		}
		t.Errorf("missed %d, same-attempt duplicates %d, duplicate executions %d; want 0 each",
			rep.Missed, rep.SameAttemptDuplicates, rep.DuplicateExecutions)
	}
	if fs := rep.Failures(); len(fs) > 0 {
		// The checks of issue 11 (concurrent executions, early fires,
		// completed deliveries recorded) fail `chime chaos` and
		// scripts/chaos.sh; here they are logged only.
		t.Logf("chime chaos would fail this run: %s", strings.Join(fs, "; "))
	}
}

// buildChime builds ./cmd/chime into a temp dir.
func buildChime(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: %v %q", err, gomod)
	}
	bin := filepath.Join(t.TempDir(), "chime")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/chime")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/chime: %v\n%s", err, b)
	}
	return bin
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

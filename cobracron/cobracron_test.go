package cobracron_test

import (
	"context"
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

	"github.com/spf13/cobra"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/cobracron"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

func config(t *testing.T) chime.Config {
	dir := t.TempDir()
	return chime.Config{DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"), App: "myapp",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func newApp(count *atomic.Int32) (*cobra.Command, *cobra.Command) {
	root := &cobra.Command{Use: "myapp"}
	var n int
	report := &cobra.Command{
		Use: "report",
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, ok := cmd.Context().Deadline(); !ok {
				return errors.New("no deadline")
			}
			count.Add(1)
			fmt.Fprintf(cmd.OutOrStdout(), "report n=%d args=%v\n", n, args)
			return nil
		},
	}
	report.Flags().IntVar(&n, "n", 1, "")
	cobracron.AddCronCommand(root, "@every 1s", report)
	return root, report
}

func TestStart(t *testing.T) {
	var count atomic.Int32
	root, report := newApp(&count)
	if report.Parent() != root {
		t.Fatal("not added to root")
	}
	jobs := cobracron.Jobs(root)
	if len(jobs) != 1 || jobs[0].Handler != "cobra:myapp report" || jobs[0].Timer != "myapp.report" || jobs[0].Spec != "@every 1s" {
		t.Fatalf("jobs %+v", jobs)
	}
	ctx := context.Background()
	n, err := cobracron.Start(ctx, root, config(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown(ctx)
	testenv.Eventually(t, 10*time.Second, "two runs of the command", func() (bool, string) {
		return count.Load() >= 2, fmt.Sprintf("ran %d times", count.Load())
	})
	tm, err := nodeparts.Of(n).Store.GetTimerByName(ctx, "myapp", "myapp.report")
	if err != nil {
		t.Fatal(err)
	}
	var runs []*model.Run
	testenv.Eventually(t, 10*time.Second, "a succeeded run", func() (bool, string) {
		runs, _, _ = nodeparts.Of(n).Store.ListRuns(ctx, store.RunFilter{TimerID: tm.ID, Status: model.RunSucceeded})
		return len(runs) > 0, "none"
	})
	if runs[0].Output != "report n=1 args=[]\n" {
		t.Fatalf("runs %+v", runs)
	}

	// The timer's args give the command line. The schedule moves to a
	// far instant (its pending fires are replaced) and the run is
	// triggered, not scheduled: an @at a second ahead raced the save on a
	// loaded machine.
	tm.Action.Handler.Args = []byte(`{"args": ["--n=5", "eu"]}`)
	tm.Schedule = "@at " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	if err := nodeparts.Of(n).Store.UpdateTimer(ctx, tm); err != nil {
		t.Fatal(err)
	}
	if err := nodeparts.Of(n).Engine.TimerSaved(ctx, tm, true); err != nil {
		t.Fatal(err)
	}
	r, err := n.Trigger(ctx, "myapp", "myapp.report")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the triggered run", func() (bool, string) {
		if r, err = nodeparts.Of(n).Store.GetRun(ctx, r.ID); err != nil {
			return false, err.Error()
		}
		return r.Status.Terminal(), string(r.Status)
	})
	if r.Status != model.RunSucceeded || r.Output != "report n=5 args=[eu]\n" {
		t.Fatalf("run %s: status %s, output %q, error %q", r.ID, r.Status, r.Output, r.Error)
	}
}

func TestNodeCommand(t *testing.T) {
	var count atomic.Int32
	root, _ := newApp(&count)
	cfg := config(t)
	root.AddCommand(cobracron.NodeCommand("cron-node", func() chime.Config { return cfg }))
	ctx, cancel := context.WithCancel(context.Background())
	root.SetArgs([]string{"cron-node"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	// A run, or the deadline: the command must stop cleanly either way.
	testenv.Poll(10*time.Second, func() (bool, string) { return count.Load() >= 1, "" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if count.Load() < 1 {
		t.Fatal("the cron command did not run")
	}
}

func TestBadSpec(t *testing.T) {
	root := &cobra.Command{Use: "app"}
	cobracron.AddCronCommand(root, "not a schedule", &cobra.Command{Use: "x", Run: func(*cobra.Command, []string) {}})
	if _, err := cobracron.Start(context.Background(), root, config(t)); err == nil || !strings.Contains(err.Error(), "schedule") {
		t.Fatalf("err %v", err)
	}
}

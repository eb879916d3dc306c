package sqlstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestDependencyCycleAtRunTime: a cycle of edges that no save refused
// (two concurrent saves each saw the graph without the other's edge) is
// met at run time: the run that would close it is recorded failed, saying
// why, with a notify event, and makes no run after it.
func TestDependencyCycleAtRunTime(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			s := be.open(t)
			ctx := context.Background()
			a := storetest.NewTimer("app", "cyc-a")
			if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: a, Create: true}); err != nil {
				t.Fatal(err)
			}
			b := storetest.NewTimer("app", "cyc-b")
			b.Schedule, b.After = "", []model.Dependency{{Timer: a.ID, On: model.OnFinish}}
			if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: b, Create: true}); err != nil {
				t.Fatal(err)
			}
			// The other save's edge: a after b.
			if _, err := s.w.ExecContext(ctx, s.q(`INSERT INTO timer_deps (timer_id, upstream_id, on_status, position, seen_run)
				VALUES (?, ?, ?, 0, '')`), a.ID, b.ID, model.OnFinish); err != nil {
				t.Fatal(err)
			}
			at := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
			end := func(r *model.Run) {
				t.Helper()
				won, err := s.ClaimRuns(ctx, []store.Claim{{RunID: r.ID, Node: "n1", LeaseUntil: at.Add(time.Hour), Now: at}})
				if err != nil || len(won) != 1 {
					t.Fatalf("claim %s: %v, %v", r.ID, won, err)
				}
				ok, _, err := s.FinishRuns(ctx, []model.Result{{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
					TimerID: r.TimerID, StartedAt: at, FinishedAt: at.Add(time.Second)}})
				if err != nil || !ok[0] {
					t.Fatalf("finish %s: %v, %v", r.ID, ok, err)
				}
			}
			first := storetest.NewRuns(a.ID, at, time.Second, 1)[0]
			if _, err := s.InsertRuns(ctx, []*model.Run{first}); err != nil {
				t.Fatal(err)
			}
			end(first)
			runsOf := func(timerID string) []*model.Run {
				t.Helper()
				runs, _, err := s.ListRuns(ctx, store.RunFilter{TimerID: timerID, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				return runs
			}
			bs := runsOf(b.ID)
			if len(bs) != 1 || bs[0].Status != model.RunPending {
				t.Fatalf("runs of b after a's end = %+v, want one pending", bs)
			}
			end(bs[0])
			as := runsOf(a.ID)
			if len(as) != 2 {
				t.Fatalf("runs of a after b's end = %d, want 2", len(as))
			}
			var closing *model.Run
			for _, r := range as {
				if r.UpstreamRunID == bs[0].ID {
					closing = r
				}
			}
			if closing == nil || closing.Status != model.RunFailed || !strings.Contains(closing.Error, "cycle") {
				t.Fatalf("run of a after b's = %+v, want failed, naming the cycle", closing)
			}
			evs, err := s.ClaimNotifyEvents(ctx, at.Add(time.Hour), at.Add(2*time.Hour), 10)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, ev := range evs {
				found = found || ev.RunID == closing.ID && ev.Status == model.RunFailed
			}
			if !found {
				t.Errorf("notify events = %+v, want the failed run's", evs)
			}
			if bs := runsOf(b.ID); len(bs) != 1 {
				t.Errorf("runs of b after the cycle was met = %d, want 1: the chain stops", len(bs))
			}
		})
	}
}

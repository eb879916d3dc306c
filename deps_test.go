package chime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/model"
)

// TestLibraryDependencies: through the Go library, a timer after another
// (named app/name, no schedule) runs once the upstream's run succeeds; its
// handler sees the upstream run's id. Upsert is idempotent with After, and
// refuses an upstream that does not exist.
func TestLibraryDependencies(t *testing.T) {
	n := newNode(t, chime.Config{App: "lib"})
	got := make(chan *chime.Run, 4)
	n.HandleFunc("step", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		got <- run
		return nil, nil
	})
	start(t, n)
	ctx := context.Background()
	if _, err := n.Upsert(ctx, chime.Timer{Name: "later", After: []model.Dependency{{Timer: "lib/nope", On: model.OnSuccess}},
		Action: chime.HandlerAction("step", nil)}); err == nil || !strings.Contains(err.Error(), "after[0].timer") {
		t.Fatalf("Upsert after a missing timer: %v", err)
	}
	up, err := n.Upsert(ctx, chime.Timer{Name: "first", Schedule: at(300 * time.Millisecond), Action: chime.HandlerAction("step", nil)})
	if err != nil {
		t.Fatal(err)
	}
	def := chime.Timer{Name: "second", After: []model.Dependency{{Timer: "lib/first", On: model.OnSuccess}},
		Action: chime.HandlerAction("step", nil)}
	down, err := n.Upsert(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.Upsert(ctx, def)
	if err != nil || again != down {
		t.Fatalf("Upsert again: %s, %v; want %s", again, err, down)
	}
	first := waitRun(t, n, up, 10*time.Second)
	second := waitRun(t, n, down, 10*time.Second)
	if first.Status != model.RunSucceeded || second.Status != model.RunSucceeded || second.UpstreamRunID != first.ID {
		t.Fatalf("runs: first %+v, second %+v", first, second)
	}
	for range 2 {
		r := <-got
		if r.Timer.ID == down && r.UpstreamRunID != first.ID {
			t.Errorf("the handler of second saw upstream %q, want %s", r.UpstreamRunID, first.ID)
		}
	}
}

package chime_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/model"
)

// records is a slog.Handler that keeps every record, with the attributes
// of the loggers derived from it (With) added.
type records struct {
	mu    *sync.Mutex
	all   *[]slog.Record
	attrs []slog.Attr
}

func newRecords() *records { return &records{mu: &sync.Mutex{}, all: &[]slog.Record{}} }

func (h *records) Enabled(context.Context, slog.Level) bool { return true }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	*h.all = append(*h.all, r)
	h.mu.Unlock()
	return nil
}

func (h *records) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *records) WithGroup(string) slog.Handler { return h } // chime's loggers use no groups

func (h *records) snapshot() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), *h.all...)
}

// TestRunLogFields: every log line about a run — here one whose attempts
// fail, retried once and then failed — carries timer_id, run_id and
// attempt (docs/observability.md, "Logs").
func TestRunLogFields(t *testing.T) {
	t.Parallel()
	h := newRecords()
	n := newNode(t, chime.Config{Logger: slog.New(h)})
	n.HandleFunc("fail", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		return nil, fmt.Errorf("attempt %d fails", run.Attempt)
	})
	start(t, n)
	id, err := n.Upsert(context.Background(), chime.Timer{Name: "fail", Schedule: at(time.Second),
		Retry:  model.RetryPolicy{MaxAttempts: 2, Backoff: 100 * time.Millisecond},
		Action: chime.HandlerAction("fail", nil)})
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, n, id, 15*time.Second)
	if r.Status != model.RunFailed || r.Attempt != 2 {
		t.Fatalf("run %+v, want failed at attempt 2", r)
	}
	about := 0
	for _, rec := range h.snapshot() {
		got := map[string]string{}
		mentions := strings.Contains(rec.Message, r.ID)
		rec.Attrs(func(a slog.Attr) bool {
			v := a.Value.Resolve().String()
			got[a.Key] = v
			if strings.Contains(v, r.ID) {
				mentions = true
			}
			return true
		})
		if !mentions {
			continue
		}
		about++
		if got["timer_id"] != id || got["run_id"] != r.ID || got["attempt"] == "" {
			t.Errorf("log line about run %s without timer_id=%s, run_id and attempt: %q %v", r.ID, id, rec.Message, got)
		}
	}
	// The retry of attempt 1 and the failure of attempt 2 at least.
	if about < 2 {
		t.Fatalf("%d log lines about run %s, want at least 2 (its retry and its failure)", about, r.ID)
	}
}

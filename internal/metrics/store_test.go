package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// TestInstrumentStore: every call of a timed method through the
// instrumented store is timed under its method's name, the others pass
// through; failures are counted, answers of the contract (not found) are
// not.
func TestInstrumentStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	st := metrics.InstrumentStore(sq, metrics.New(reg))

	if _, err := st.TokenByHash(ctx, "missing"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("TokenByHash(missing) = %v, want not found", err)
	}
	if _, err := st.GetTimer(ctx, "missing"); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("GetTimer(missing) = %v, want not found", err)
	}
	if err := st.Heartbeat(ctx, model.Node{ID: "n1", SeenAt: time.Now(), StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ListNodes(ctx, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	sq.Close()
	if err := st.Ping(ctx); err == nil {
		t.Fatal("Ping of a closed store succeeded")
	}

	tests := []struct {
		op             string
		calls, errors_ int
	}{
		{"TokenByHash", 1, 0},
		{"GetTimer", 0, 0}, // not timed
		{"Heartbeat", 1, 0},
		{"ListNodes", 1, 0},
		{"Ping", 1, 1},
		{"ClaimRuns", 0, 0},
	}
	for _, tt := range tests {
		if got := histogramCount(t, reg, "chime_store_duration_seconds", "op", tt.op); got != uint64(tt.calls) {
			t.Errorf("chime_store_duration_seconds{op=%q} count = %d, want %d", tt.op, got, tt.calls)
		}
		if got := counterValue(t, reg, "chime_store_errors_total", "op", tt.op); got != float64(tt.errors_) {
			t.Errorf("chime_store_errors_total{op=%q} = %v, want %d", tt.op, got, tt.errors_)
		}
	}
}

// TestInstrumentStoreNil: without metrics, the store is returned as is.
func TestInstrumentStoreNil(t *testing.T) {
	t.Parallel()
	var s store.Store
	if got := metrics.InstrumentStore(s, nil); got != nil {
		t.Fatalf("InstrumentStore(nil, nil) = %v", got)
	}
}

// TestIsStoreFailure: which errors count in chime_store_errors_total.
func TestIsStoreFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("get timer x: %w", model.ErrNotFound), false},
		{fmt.Errorf("create: %w", model.ErrConflict), false},
		{fmt.Errorf("finish: %w", model.ErrNotClaimed), false},
		{fmt.Errorf("query: %w", context.Canceled), false},
		{fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{errors.New("dial tcp 10.0.0.1:3306: connection refused"), true},
	}
	for _, tt := range tests {
		if got := metrics.IsStoreFailure(tt.err); got != tt.want {
			t.Errorf("IsStoreFailure(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// timedOps are the store methods that InstrumentStore times: the calls a
// node makes all the time, among them those that the dashboard and the
// alerts in deploy/ and docs/observability.md name.
var timedOps = []string{
	"ClaimRuns", "FinishRuns", "ExtendLeases", "Release", "Requeue", "SetRunStatus",
	"TimersToPlan", "InsertPlanned", "InsertRuns", "SetPlannedUntil", "DueRuns", "PendingRuns",
	"ExpiredLeases", "DirectedRuns", "Handoff", "StartFire", "FinishFires",
	"Heartbeat", "ListNodes", "Now", "SaveTimer", "TokenByHash", "Ping",
}

// TestObservabilityDocListsTimedOps: the op label's values that
// docs/observability.md lists are timedOps, no more and no fewer.
func TestObservabilityDocListsTimedOps(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `chime_store_duration_seconds` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/observability.md has no row for chime_store_duration_seconds")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]+)`").FindAllStringSubmatch(row, -1) {
		listed = append(listed, m[1])
	}
	want := slices.Sorted(slices.Values(timedOps))
	if got := slices.Sorted(slices.Values(listed)); !slices.Equal(got, want) {
		t.Errorf("docs/observability.md lists the timed ops %v, want %v", got, want)
	}
}

// TestInstrumentStoreCoversStore: each method of timedOps has its own
// timed method in store.go, under its own name, and store.go times no
// other.
func TestInstrumentStoreCoversStore(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("store.go")
	if err != nil {
		t.Fatal(err)
	}
	it := reflect.TypeOf((*store.Store)(nil)).Elem()
	for _, name := range timedOps {
		if _, ok := it.MethodByName(name); !ok {
			t.Errorf("%s is not a method of store.Store", name)
		}
		re := regexp.MustCompile(`func \(s \*instrumented\) ` + name + `\(ctx context\.Context[^\n]*\n\tdefer s\.observe\("` + name + `", `)
		if !re.Match(src) {
			t.Errorf("internal/metrics/store.go: store.Store's %s is not timed: add a method to instrumented as for the others", name)
		}
	}
	if n := len(regexp.MustCompile(`defer s\.observe\(`).FindAll(src, -1)); n != len(timedOps) {
		t.Errorf("internal/metrics/store.go times %d methods, timedOps lists %d", n, len(timedOps))
	}
}

// histogramCount returns the sample count of the histogram name whose
// label has value, 0 when it has none.
func histogramCount(t *testing.T, g prometheus.Gatherer, name, label, value string) uint64 {
	t.Helper()
	if mt := find(t, g, name, label, value); mt != nil {
		return mt.GetHistogram().GetSampleCount()
	}
	return 0
}

// counterValue returns the value of the counter name whose label has
// value, 0 when it has none.
func counterValue(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	if mt := find(t, g, name, label, value); mt != nil {
		return mt.GetCounter().GetValue()
	}
	return 0
}

func find(t *testing.T, g prometheus.Gatherer, name, label, value string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return mt
				}
			}
		}
	}
	return nil
}

package trigger

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/model"
)

// TestHolderClaimable: the holder hands the dispatcher the runs whose
// claims are due, with those of the claim window after the first, by
// priority and no more than the limit, none when blocked, and forgets the
// runs of a dropped slice.
func TestHolderClaimable(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	ms := func(n int) time.Time { return now.Add(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name     string
		runs     map[string]time.Time // run id (its timer's id too) → instant
		prio     map[string]int
		limit    int
		blocked  bool
		drop     bool
		want     []string
		wantWait time.Duration
	}{
		{name: "nothing due", runs: map[string]time.Time{"a": ms(2000)},
			limit: maxClaimBatch, wantWait: 1500 * time.Millisecond},
		{name: "due with its window", runs: map[string]time.Time{"a": ms(400), "b": ms(700), "c": ms(2000)},
			limit: maxClaimBatch, want: []string{"a", "b"}, wantWait: 1500 * time.Millisecond},
		{name: "blocked", runs: map[string]time.Time{"a": ms(100)},
			limit: maxClaimBatch, blocked: true, wantWait: saturatedWait},
		{name: "priority first within the limit", runs: map[string]time.Time{"a": ms(100), "b": ms(200), "c": ms(300)},
			prio: map[string]int{"b": 9}, limit: 2, want: []string{"b", "a"}, wantWait: saturatedWait},
		{name: "dropped slice", runs: map[string]time.Time{"a": ms(100)},
			limit: maxClaimBatch, drop: true, wantWait: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Index: memindex.New(1), ClaimAhead: 500 * time.Millisecond}
			var wg sync.WaitGroup
			h := newHolder(&cfg, make(chan struct{}), &wg, func() {}, &testSignals{})
			for id, p := range tc.prio {
				h.SetPriority(id, p)
			}
			s := index.SliceOf("a", now, 1)
			h.slices[s] = &sliceState{seen: map[seenKey]struct{}{}}
			var entries []index.Entry
			for id, at := range tc.runs {
				entries = append(entries, index.Entry{RunID: id, TimerID: id, DueAt: at})
			}
			h.push(s, entries)
			if tc.drop {
				h.Drop(s)
			}
			batch, wait := h.claimable(now, tc.limit, tc.blocked)
			var got []string
			for _, it := range batch {
				got = append(got, it.entry.RunID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || wait != tc.wantWait {
				t.Errorf("claimable = %v, %v; want %v, %v", got, wait, tc.want, tc.wantWait)
			}
			h.settle(batch, nil)
			if tc.drop && len(h.slices) != 0 {
				t.Errorf("%d holdings kept after the drop's last run left, want none", len(h.slices))
			}
		})
	}
}

// TestPriorities: a timer's priority is what was set last, and the
// default priority is not stored.
func TestPriorities(t *testing.T) {
	t.Parallel()
	p := priorities{}
	if got := p.of("t"); got != model.DefaultPriority {
		t.Errorf("unknown timer: %d, want %d", got, model.DefaultPriority)
	}
	p.set("t", 7)
	if got := p.of("t"); got != 7 {
		t.Errorf("after set 7: %d", got)
	}
	p.set("t", model.DefaultPriority)
	if _, ok := p["t"]; ok || p.of("t") != model.DefaultPriority {
		t.Errorf("the default priority is stored: %v", p)
	}
}

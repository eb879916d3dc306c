package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

// TestFiresHeld checks that fires come back as they were added, run ids of
// model.RunID's form or not.
func TestFiresHeld(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0)
	in := []fire{
		{runID: model.RunID("a", at), timerID: "a", sched: 1, recv: 2},
		{runID: "odd-run", timerID: "b", sched: 3, recv: 4},
		{runID: model.RunID("a", at.Add(time.Second)), timerID: "a", sched: 5, recv: 6},
	}
	l := newFiresHeld()
	for _, f := range in {
		l.add(f)
	}
	if got := l.slice(0, l.len()); !slices.Equal(got, in) {
		t.Fatalf("slice(0, %d) = %v, want %v", l.len(), got, in)
	}
	if got := l.slice(1, 2); !slices.Equal(got, in[1:2]) {
		t.Fatalf("slice(1, 2) = %v, want %v", got, in[1:2])
	}
}

// TestFiresHeldBlocks: fires held across several blocks come back in
// order, from any range.
func TestFiresHeldBlocks(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0)
	l := newFiresHeld()
	var in []fire
	for i := range 2*blockLen + 7 {
		f := fire{runID: model.RunID("a", at.Add(time.Duration(i)*time.Second)), timerID: "a", sched: int64(i), recv: int64(i) + 1}
		if i == blockLen {
			f.runID = "odd-run"
		}
		in = append(in, f)
		l.add(f)
	}
	if l.len() != len(in) {
		t.Fatalf("len() = %d, want %d", l.len(), len(in))
	}
	if got := l.slice(0, l.len()); !slices.Equal(got, in) {
		t.Fatal("slice(0, len) differs from the fires added")
	}
	if got := l.slice(blockLen-2, blockLen+3); !slices.Equal(got, in[blockLen-2:blockLen+3]) {
		t.Fatalf("slice across a block's end = %v, want %v", got, in[blockLen-2:blockLen+3])
	}
}

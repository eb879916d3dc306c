package storetest

import (
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// statsTests are the tests of the store-wide counts.
var statsTests = []test{
	{"Stats", testStats},
}

// testStats: the counts of timers by enabled flag and of runs by status.
func testStats(t *testing.T, s store.Store) {
	st, err := s.Stats(ctx(t))
	must(t, err)
	if st.TimersEnabled != 0 || st.TimersDisabled != 0 || len(st.Runs) != 0 {
		t.Errorf("empty store stats = %+v", st)
	}
	a := mustTimer(t, s, "app", "s1")
	off := NewTimer("app", "s2")
	off.Enabled = false
	must(t, createTimer(ctx(t), s, off))
	runs := NewRuns(a.ID, base, time.Second, 5)
	mustInsert(t, s, runs)
	_, err = s.ClaimRuns(ctx(t), claimsFor(runs[:2], "n", base))
	must(t, err)
	st, err = s.Stats(ctx(t))
	must(t, err)
	if st.TimersEnabled != 1 || st.TimersDisabled != 1 || st.Runs[model.RunPending] != 3 || st.Runs[model.RunRunning] != 2 {
		t.Errorf("stats = %+v", st)
	}
}

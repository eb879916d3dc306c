package model

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRunID(t *testing.T) {
	t.Parallel()
	id := RunID("timer", time.Unix(1_700_000_000, 5))
	tests := []struct {
		id string
		ok bool
	}{
		{id, true},
		{strings.ToUpper(id), false}, // RunID's form is lowercase
		{id[:39], false},
		{id[:32], false}, // the form of older nodes: a valid id, kept as a string
		{id + "0", false},
		{id[:39] + "g", false},
		{"", false},
		{"manual-run", false},
	}
	for _, tc := range tests {
		b, ok := ParseRunID(tc.id)
		if ok != tc.ok {
			t.Errorf("ParseRunID(%q) ok = %v, want %v", tc.id, ok, tc.ok)
			continue
		}
		if ok && hex.EncodeToString(b[:]) != tc.id {
			t.Errorf("ParseRunID(%q) = %x, which does not give the id back", tc.id, b)
		}
	}
}

// TestRunIDOrder: run ids sort by second, then by timer in the timers' id
// order (ULIDs, and other ids by their first 8 bytes), and one timer's
// runs in a second, and timers that share a key, still get distinct ids.
func TestRunIDOrder(t *testing.T) {
	t.Parallel()
	// ULIDs in their order, two of them sharing their first 8 bytes (13
	// characters and the top bit of the 14th).
	timers := []string{"01JDXR0000AAAAAAAAAAAAAAAA", "01JDXR0000ABA0ZZZZZZZZZZZZ", "01JDXR0000ABAAAAAAAAAAAAAA",
		"01JDXR0001000000000000000A", "01JDXS00000000000000000000", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"}
	at := time.Unix(1_700_000_000, 0)
	for i := 1; i < len(timers); i++ {
		if TimerKey(timers[i-1]) > TimerKey(timers[i]) {
			t.Errorf("TimerKey(%s) > TimerKey(%s)", timers[i-1], timers[i])
		}
	}
	if TimerKey(timers[1]) != TimerKey(timers[2]) {
		t.Errorf("ULIDs with the same first 8 bytes: keys differ")
	}
	var ids []string
	for _, s := range []time.Time{at, at.Add(time.Second)} {
		for _, tm := range timers {
			ids = append(ids, RunID(tm, s))
		}
	}
	for i := 1; i < len(ids); i++ {
		// The two timers that share a key may be in either order.
		if ids[i-1] >= ids[i] && !(i%len(timers) == 2) {
			t.Errorf("run ids out of order: %s before %s", ids[i-1], ids[i])
		}
	}
	if ids[1] == ids[2] {
		t.Errorf("timers sharing a key got the same run id")
	}
	shards := map[string]bool{}
	for i := range 1000 {
		shards[ShardRunID(timers[0], at, i)] = true
	}
	if len(shards) != 1000 {
		t.Errorf("1000 shards of one fire got %d distinct ids", len(shards))
	}
	if len(ids[0]) != 2*RunIDLen || !slices.IsSorted([]string{ids[0][:8], ids[len(timers)][:8]}) {
		t.Errorf("run id %q: want %d hex digits starting with the second", ids[0], 2*RunIDLen)
	}
	// Non-ULID ids order by their first 8 bytes.
	if !(TimerKey("a") < TimerKey("ab") && TimerKey("ab") < TimerKey("b")) {
		t.Errorf("TimerKey of plain ids out of their order")
	}
}

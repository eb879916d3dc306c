package model

import (
	"encoding/hex"
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
		{id[:31], false},
		{id + "0", false},
		{id[:31] + "g", false},
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

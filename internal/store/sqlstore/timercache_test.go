package sqlstore

import (
	"testing"

	"github.com/chimehq/chime/model"
)

// TestTimerCacheSecondLoad checks that a timer is cached on its second load
// at one version, and that a new version starts over.
func TestTimerCacheSecondLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		puts  []int64 // versions put, in order
		get   int64
		found bool
	}{
		{"never loaded", nil, 1, false},
		{"loaded once", []int64{1}, 1, false},
		{"loaded twice", []int64{1, 1}, 1, true},
		{"loaded twice, asked another version", []int64{1, 1}, 2, false},
		{"changed between loads", []int64{1, 2}, 2, false},
		{"changed, then loaded twice", []int64{1, 2, 2}, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c timerCache
			for _, v := range tc.puts {
				c.put(&model.Timer{ID: "t"}, v)
			}
			if got := c.get("t", tc.get) != nil; got != tc.found {
				t.Errorf("get(version %d) found %v, want %v", tc.get, got, tc.found)
			}
		})
	}
}

package timers

import (
	"bytes"
	"encoding/json"
	"reflect"
	"time"

	"github.com/chimehq/chime/model"
)

// NeedsReplan reports whether updating old to t changes which fires t has,
// so that its planned runs must be dropped and planned again: its
// schedule, zone, enabled flag or policy (bounds, maximum, misfire,
// overlap, catchup) changed. Other changes (action, timeout, retry,
// description) apply to the planned runs as they are.
func NeedsReplan(old, t *model.Timer) bool {
	return t.Schedule != old.Schedule || t.Timezone != old.Timezone || t.Enabled != old.Enabled ||
		!t.Policy.Equal(old.Policy)
}

// SameDefinition reports whether a and b define the same timer: every
// field of the timer's JSON form but its id, timestamps and Paused
// (PlannedUntil is not in it), compared semantically, so that handler args written with
// other spacing or key order, and nil or empty maps, compare equal. Fields
// added to model.Timer later are compared without a change here.
func SameDefinition(a, b *model.Timer) bool {
	return sameJSON(definition(a), definition(b))
}

func definition(t *model.Timer) []byte {
	c := *t
	c.ID, c.CreatedAt, c.UpdatedAt = "", time.Time{}, time.Time{}
	c.Paused = false // state, not definition: pause and resume set it
	c.DisabledReason = ""
	b, _ := json.Marshal(&c)
	return b
}

func sameJSON(a, b []byte) bool {
	empty := func(x []byte) bool { return len(bytes.TrimSpace(x)) == 0 || string(bytes.TrimSpace(x)) == "null" }
	if empty(a) || empty(b) {
		return empty(a) && empty(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

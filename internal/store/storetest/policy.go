package storetest

import (
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// policyTests are the tests of a timer's policy as the store keeps it.
var policyTests = []test{
	{"RoundTrip", testPolicyRoundTrip},
}

// testPolicyRoundTrip: every field of a timer's policy survives create,
// read and reset by update.
func testPolicyRoundTrip(t *testing.T, s store.Store) {
	tm := NewTimer("app", "policy")
	tm.Policy = model.Policy{CatchupWindow: time.Hour, Misfire: model.MisfireLatest, Overlap: model.OverlapBufferOne,
		StartAt: base, EndAt: base.Add(24 * time.Hour), MaxFires: 7}
	must(t, createTimer(ctx(t), s, tm))
	got, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if !got.Policy.StartAt.Equal(tm.Policy.StartAt) || !got.Policy.EndAt.Equal(tm.Policy.EndAt) {
		t.Errorf("policy bounds = %v..%v, want %v..%v", got.Policy.StartAt, got.Policy.EndAt, tm.Policy.StartAt, tm.Policy.EndAt)
	}
	got.Policy.StartAt, got.Policy.EndAt = tm.Policy.StartAt, tm.Policy.EndAt
	if got.Policy != tm.Policy {
		t.Errorf("policy = %+v, want %+v", got.Policy, tm.Policy)
	}
	got.Policy = model.Policy{}
	must(t, s.UpdateTimer(ctx(t), got))
	again, err := s.GetTimer(ctx(t), tm.ID)
	must(t, err)
	if again.Policy != (model.Policy{}) {
		t.Errorf("policy after reset = %+v", again.Policy)
	}
}

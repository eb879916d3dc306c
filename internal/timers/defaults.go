package timers

import (
	"time"

	"github.com/chimehq/chime/model"
)

// Default values of the fields a timer definition leaves out. The REST API
// and the Go library document and apply the same ones.
const (
	// DefaultTimezone is the zone of a timer whose timezone is empty.
	DefaultTimezone = "UTC"
	// DefaultTimeout is how long one attempt may run.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxAttempts is one attempt: no retry.
	DefaultMaxAttempts = 1
	// DefaultBackoff is the delay before the first retry.
	DefaultBackoff = time.Second
)

// Defaults returns a timer with every defaulted field at its default: zone
// UTC, enabled, timeout 30s, one attempt with a backoff of 1s, the zero
// (default) policy. A front end whose input tells an absent field from a
// zero one (the REST API's JSON) starts from it and sets what is present.
func Defaults() model.Timer {
	return model.Timer{
		Timezone: DefaultTimezone,
		Enabled:  true,
		Timeout:  DefaultTimeout,
		Retry:    model.RetryPolicy{MaxAttempts: DefaultMaxAttempts, Backoff: DefaultBackoff},
		Priority: defaultPriority(),
	}
}

// defaultPriority returns a new pointer to model.DefaultPriority.
func defaultPriority() *int {
	p := model.DefaultPriority
	return &p
}

// FillDefaults sets the zero fields of t that have a default to it: the
// zone, the timeout, the retry attempts, the backoff and the priority. A front end whose
// input cannot tell an absent field from a zero one (a Go struct) calls it.
// It does not touch Enabled, whose zero value is meaningful.
func FillDefaults(t *model.Timer) {
	if t.Timezone == "" {
		t.Timezone = DefaultTimezone
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultTimeout
	}
	if t.Retry.MaxAttempts == 0 {
		t.Retry.MaxAttempts = DefaultMaxAttempts
	}
	if t.Retry.Backoff == 0 {
		t.Retry.Backoff = DefaultBackoff
	}
	if t.Priority == nil {
		t.Priority = defaultPriority()
	}
}

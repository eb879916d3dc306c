package model

import (
	"crypto/sha256"
	"time"
)

// The ways an upstream run may end for a dependency (Dependency.On).
const (
	// OnSuccess: the upstream run succeeded.
	OnSuccess = "success"
	// OnFailure: the upstream run failed after its last attempt (a
	// failed attempt that is retried is not an end).
	OnFailure = "failure"
	// OnFinish: the upstream run succeeded or failed. Runs that were
	// skipped or cancelled never ran and end no dependency.
	OnFinish = "finish"
)

// MaxUpstreams is the most timers one timer may run after.
const MaxUpstreams = 20

// Dependency is one entry of Timer.After: the timer runs after Timer
// (an id; the API also takes "app/name", which the save path resolves to
// the id) has ended as On says (OnSuccess, OnFailure or OnFinish).
type Dependency struct {
	Timer string `json:"timer"`
	On    string `json:"on"`
}

// Ends reports whether an upstream run that ended in status meets on.
func Ends(on string, status RunStatus) bool {
	switch on {
	case OnSuccess:
		return status == RunSucceeded
	case OnFailure:
		return status == RunFailed
	case OnFinish:
		return status == RunSucceeded || status == RunFailed
	}
	return false
}

// Edge is one dependency as the store keeps it: Downstream runs after
// Upstream has ended as On says.
type Edge struct {
	Downstream string
	Upstream   string
	On         string
}

// DependentRunID returns the id of the run of timerID made by the end of
// the upstream run upstreamRunID, at instant at. Like RunID it is derived,
// not random, and has RunID's form (the instant's second, the timer's
// key, a hash); it depends on the upstream run rather than on the
// instant, so that one upstream run's end names one run of each
// downstream timer, whoever records it.
func DependentRunID(timerID, upstreamRunID string, at time.Time) string {
	h := sha256.New()
	h.Write([]byte(timerID))
	h.Write([]byte{0, 'a', 'f', 't', 'e', 'r', 0})
	h.Write([]byte(upstreamRunID))
	return runID(at, timerID, h.Sum(nil))
}

// Package storetest is the behaviour suite that every store.Store
// implementation must pass, and so the one place that says what a store
// does. An implementation's test calls Run with a function that opens a
// fresh, empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openEmpty(t) })
//	}
//
// The suite is split by noun, one file each: timers.go, policy.go,
// planning.go (what the planner reads and records), runs.go (pending runs),
// claims.go, leases.go, results.go, nodes.go, fleet.go (runs placed on
// nodes, split fires), stats.go, security.go (tokens, audit, signing
// secrets), retention.go (old runs and audit entries), reports.go (the
// runs of a period, backups), skips.go (fires recorded skipped, paused
// timers), ui.go (what the web UI reads: the timers by next fire, the
// request a run sent, the dashboard's minutes) and deps.go (dependencies
// between timers). fixtures.go holds NewTimer, NewRuns and the small
// helpers the tests share.
//
// Every test runs in parallel with the others, each on a store of its own:
// open is called once per test, must return a store that shares nothing
// with any other it returned (its own database, file or in-memory
// instance), and must register its own cleanup.
package storetest

import (
	"context"
	"testing"

	"github.com/chimehq/chime/internal/store"
)

// test is one behaviour of the suite; fn gets a fresh, empty store.
type test struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// nouns are the suite's groups, one per file, in the order of the pipeline.
var nouns = []struct {
	name  string
	tests []test
}{
	{"Timers", timerTests},
	{"Policy", policyTests},
	{"Planning", planningTests},
	{"Runs", runTests},
	{"Claims", claimTests},
	{"Leases", leaseTests},
	{"Results", resultTests},
	{"Nodes", nodeTests},
	{"Fleet", fleetTests},
	{"Stats", statsTests},
	{"Security", securityTests},
	{"Retention", retentionTests},
	{"Notify", notifyTests},
	{"Reports", reportTests},
	{"Skips", skipTests},
	{"UI", uiTests},
	{"Dependencies", depTests},
	{"Attempts", attemptTests},
}

// Run runs the suite, as subtests Noun/Test (Timers/CRUD, Claims/Release…),
// all in parallel; some tests start goroutines of their own on their store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, n := range nouns {
		t.Run(n.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range n.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					s := open(t)
					if err := s.Ping(context.Background()); err != nil {
						t.Fatalf("Ping: %v", err)
					}
					tc.fn(t, s)
				})
			}
		})
	}
}

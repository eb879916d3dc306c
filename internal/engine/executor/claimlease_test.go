package executor

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/store"
)

// TestClaimLeaseFullUnderLoad: a node holding fewer attempts than a tenth
// of its pool claims with the short claim lease (whose start the keeper
// then confirms); from a tenth on, it claims with the full lease, so that
// actions that are only slow to start are not stopped.
func TestClaimLeaseFullUnderLoad(t *testing.T) {
	t.Parallel()
	e, err := New(Config{Index: memindex.New(1), NodeID: "n1", PoolSize: 20, Lease: 10 * time.Second,
		ClaimLease: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.claimLease(); got != time.Second {
		t.Errorf("idle node: claim lease %v, want ClaimLease (1s)", got)
	}
	e.mu.Lock()
	e.inflight[store.Lease{RunID: "r1", Attempt: 1}] = &attempt{}
	e.mu.Unlock()
	if got := e.claimLease(); got != time.Second {
		t.Errorf("1 attempt of a pool of 20: claim lease %v, want ClaimLease (1s)", got)
	}
	e.mu.Lock()
	e.inflight[store.Lease{RunID: "r2", Attempt: 1}] = &attempt{}
	e.mu.Unlock()
	if got := e.claimLease(); got != 10*time.Second {
		t.Errorf("2 attempts of a pool of 20 (a tenth): claim lease %v, want the full lease", got)
	}
}

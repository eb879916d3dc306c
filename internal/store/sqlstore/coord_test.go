package sqlstore

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/coord/lock/locktest"
)

// TestCoordination runs the lock suites on the database's lease rows, on
// every backend: each Locker and each election gets a prefix of its own on
// one store per backend.
func TestCoordination(t *testing.T) {
	for _, be := range backends {
		if be.name == "sqlite-memory" {
			continue
		}
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			s := be.open(t)
			t.Run("Locker", func(t *testing.T) {
				locktest.RunLocker(t, func(t *testing.T) lock.Locker { return s.Locker(randomPrefix()) })
			})
			t.Run("Elector", func(t *testing.T) {
				locktest.RunElector(t, func(t *testing.T) func() lock.Elector {
					p := randomPrefix()
					return func() lock.Elector { return s.Elector(p) }
				})
			})
		})
	}
}

func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}

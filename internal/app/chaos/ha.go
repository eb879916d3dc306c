package chaos

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/servers"
)

// haDatabase is the database chaos creates on its own PostgreSQL pair.
const haDatabase = "chime"

// haServers are the highly available servers chaos starts itself for the
// redis-failover and db-failover faults: the deployments of the failover
// tests (internal/base/servers), on free loopback ports in the work dir.
type haServers struct {
	h        *harness
	sentinel *servers.SentinelGroup
	cluster  *servers.RedisClusterDeployment
	pg       *servers.PostgresPair
	// promoted: the PostgreSQL standby is the primary now, with no
	// standby of its own, so a second db-failover has nothing to promote.
	promoted bool
}

// start starts what cfg asks for.
func (s *haServers) start(cfg Config) error {
	return s.h.run(func() {
		switch cfg.RedisHA {
		case RedisHASentinel:
			s.sentinel = servers.RedisSentinel(s.h)
		case RedisHACluster:
			s.cluster = servers.RedisCluster(s.h)
		}
		if cfg.DBHA {
			s.pg = servers.PostgresReplicated(s.h, haDatabase, true)
		}
	})
}

// redisURL is the nodes' --redis.
func (s *haServers) redisURL() string {
	if s.sentinel != nil {
		return s.sentinel.URL()
	}
	return s.cluster.URL()
}

// redisFailover SIGKILLs the Redis primary (the Sentinel group's, or one
// of the cluster's three at random), waits until a replica is promoted in
// its place, and restarts the killed server, which comes back as a
// replica.
func (s *haServers) redisFailover(f *Fault, rng *mrand.Rand) error {
	return s.h.run(func() {
		var victim *servers.RedisProc
		var promoted func() (bool, string)
		if g := s.sentinel; g != nil {
			addr, err := g.PrimaryAddr()
			if err != nil {
				s.h.Fatal(err)
			}
			for _, p := range []*servers.RedisProc{g.Primary, g.Replica} {
				if p.Addr() == addr {
					victim = p
				}
			}
			if victim == nil {
				s.h.Fatalf("the Sentinels name %s, not a server of the group", addr)
			}
			promoted = func() (bool, string) {
				now, err := g.PrimaryAddr()
				if err != nil {
					return false, err.Error()
				}
				return now != addr, "primary still " + now
			}
		} else {
			ps, err := s.cluster.Primaries()
			if err != nil || len(ps) == 0 {
				s.h.Fatalf("the cluster's primaries: %v", err)
			}
			victim = ps[rng.IntN(len(ps))]
			promoted = func() (bool, string) {
				now, err := s.cluster.Primaries()
				if err != nil {
					return false, err.Error()
				}
				for _, p := range now {
					if p == victim {
						return false, "the killed primary is not marked failed yet"
					}
				}
				return len(now) == 3, fmt.Sprintf("%d primaries", len(now))
			}
		}
		f.Server = victim.Addr()
		f.Start = time.Now()
		victim.Kill()
		servers.Eventually(s.h, 60*time.Second, "a replica to be promoted in place of "+victim.Addr(), promoted)
		f.PromotedMS = ms(time.Since(f.Start))
		victim.Restart(s.h)
	})
}

// dbFailover SIGKILLs the PostgreSQL primary and promotes the standby.
// The old primary stays down: a run has one db-failover.
func (s *haServers) dbFailover(f *Fault) error {
	if s.promoted {
		return errors.New("db-failover: the standby was promoted already; a run has one db-failover")
	}
	return s.h.run(func() {
		f.Server = fmt.Sprintf("127.0.0.1:%d", s.pg.Primary.Port)
		f.Start = time.Now()
		s.pg.Primary.Kill()
		s.pg.Promote(s.h)
		s.promoted = true
		f.PromotedMS = ms(time.Since(f.Start))
	})
}

// harness is the servers.TB of chaos's own servers: Fatal and Skip end the
// function under run with an error, Cleanup defers to cleanup, TempDir
// makes a directory in the work dir.
type harness struct {
	dir string

	mu       sync.Mutex
	cleanups []func()
}

func newHarness(workDir string) *harness { return &harness{dir: workDir} }

// harnessStop is the panic of Fatal and Skip, recovered by run.
type harnessStop struct{ err error }

// run calls fn and returns the error of a Fatal or Skip in it.
func (h *harness) run(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stop, ok := r.(harnessStop)
			if !ok {
				panic(r)
			}
			err = stop.err
		}
	}()
	fn()
	return nil
}

// cleanup runs the functions given to Cleanup, last first.
func (h *harness) cleanup() {
	h.mu.Lock()
	fns := h.cleanups
	h.cleanups = nil
	h.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func (h *harness) Helper() {}
func (h *harness) Fatal(args ...any) {
	panic(harnessStop{fmt.Errorf("chaos: %s", strings.TrimSpace(fmt.Sprintln(args...)))})
}
func (h *harness) Fatalf(format string, args ...any) {
	panic(harnessStop{fmt.Errorf("chaos: "+format, args...)})
}
func (h *harness) Skip(args ...any) { h.Fatal(args...) }
func (h *harness) Cleanup(fn func()) {
	h.mu.Lock()
	h.cleanups = append(h.cleanups, fn)
	h.mu.Unlock()
}

func (h *harness) TempDir() string {
	dir, err := os.MkdirTemp(h.dir, "ha-")
	if err != nil {
		h.Fatal(err)
	}
	return filepath.Clean(dir)
}

var _ servers.TB = (*harness)(nil)

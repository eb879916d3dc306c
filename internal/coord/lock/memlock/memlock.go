// Package memlock implements lock.Locker and lock.Elector in process, for a
// single node. Leases are measured on an injectable clock, so tests can move
// time by hand.
//
// Expired locks and terms are forgotten lazily: an expired entry is replaced
// by the next TryLock or Select on its key, and every entry is scanned for
// expiry at most once per minute of the clock, so memory stays bounded by the
// keys in use.
package memlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/lock"
)

type lease struct {
	holder  string
	expires time.Time
}

// leases is a map of leases on a clock, swept of expired leases at most
// once per minute.
type leases struct {
	now       func() time.Time
	mu        sync.Mutex
	m         map[string]lease
	lastSweep time.Time
}

func newLeases(c clock.Clock) leases {
	c = clock.Default(c)
	return leases{now: c.Now, m: make(map[string]lease)}
}

// getLocked returns the live lease on key, if any, and the clock's time.
func (l *leases) getLocked(key string) (lease, bool, time.Time) {
	now := l.now()
	if now.Sub(l.lastSweep) >= time.Minute || now.Before(l.lastSweep) {
		l.lastSweep = now
		for k, v := range l.m {
			if !now.Before(v.expires) {
				delete(l.m, k)
			}
		}
	}
	v, ok := l.m[key]
	if ok && !now.Before(v.expires) {
		delete(l.m, key)
		ok = false
	}
	return v, ok, now
}

func checkTTL(op, key string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("memlock: %s %q: ttl %v is not positive", op, key, ttl)
	}
	return nil
}

// Locker is an in-process lock.Locker. The zero value is not usable; call
// NewLocker.
type Locker struct{ l leases }

var _ lock.Locker = (*Locker)(nil)

// NewLocker returns a Locker whose leases run on c (nil means the system
// clock).
func NewLocker(c clock.Clock) *Locker { return &Locker{l: newLeases(c)} }

// TryLock implements lock.Locker.
func (k *Locker) TryLock(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := checkTTL("lock", key, ttl); err != nil {
		return false, err
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	cur, held, now := k.l.getLocked(key)
	if held && cur.holder != token {
		return false, nil
	}
	k.l.m[key] = lease{holder: token, expires: now.Add(ttl)}
	return true, nil
}

// Extend implements lock.Locker.
func (k *Locker) Extend(_ context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := checkTTL("extend", key, ttl); err != nil {
		return false, err
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	cur, held, now := k.l.getLocked(key)
	if !held || cur.holder != token {
		return false, nil
	}
	k.l.m[key] = lease{holder: token, expires: now.Add(ttl)}
	return true, nil
}

// Unlock implements lock.Locker.
func (k *Locker) Unlock(_ context.Context, key, token string) (bool, error) {
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	cur, held, _ := k.l.getLocked(key)
	if !held || cur.holder != token {
		return false, nil
	}
	delete(k.l.m, key)
	return true, nil
}

// Elector is an in-process lock.Elector. The zero value is not usable; call
// NewElector.
type Elector struct{ l leases }

var _ lock.Elector = (*Elector)(nil)

// NewElector returns an Elector whose terms run on c (nil means the system
// clock).
func NewElector(c clock.Clock) *Elector { return &Elector{l: newLeases(c)} }

// Select implements lock.Elector.
func (e *Elector) Select(_ context.Context, service, nodeID string, hold time.Duration) (string, error) {
	if err := checkTTL("select leader of", service, hold); err != nil {
		return "", err
	}
	if nodeID == "" {
		return "", fmt.Errorf("memlock: select leader of %q: empty node id", service)
	}
	e.l.mu.Lock()
	defer e.l.mu.Unlock()
	cur, held, now := e.l.getLocked(service)
	if held && cur.holder != nodeID {
		return cur.holder, nil
	}
	e.l.m[service] = lease{holder: nodeID, expires: now.Add(hold)}
	return nodeID, nil
}

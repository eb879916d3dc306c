// Package flocklock implements lock.Locker and lock.Elector with file locks
// (flock(2), through github.com/gofrs/flock), for several chime processes on
// one host that share a directory, typically the directory of the SQLite
// file they share.
//
// The directory must be on a local file system: flock is not reliable on
// network file systems. All leases are measured on the host's wall clock,
// which every process on the host shares.
//
// # Locker
//
// Each lock is a file <dir>/<escaped key>.lock holding its expiry and its
// holder's token. Every operation takes an exclusive flock on that file,
// reads it, and rewrites or deletes it before releasing the flock: the flock
// only makes the check-and-set atomic, it does not stay held. So the lease
// semantics are those of the Redis Locker: a lock is held until its TTL
// passes or it is released, whether or not its holder's process still runs.
// Lock files are deleted by Unlock and, once expired, by a sweep that runs
// at most once a minute; a file is only ever deleted under its flock, and an
// operation that finds its locked file unlinked from the path starts again,
// so deletion never lets two processes lock two copies of one key.
//
// # Elector
//
// The leader of a service holds an exclusive flock on
// <dir>/<escaped service>.leader for as long as it leads, and writes its
// node id and the end of its term into the sidecar file
// <dir>/<escaped service>.leader.info (replaced atomically by rename), which
// the other candidates read to learn the leader.
//
// What hold means: the flock itself has no expiry; it lives as long as the
// leader's process keeps it. The Elector gives it the lease semantics of the
// interface by releasing the flock itself when a term passes without a
// renewing Select (a timer), so a leader that stops calling Select loses its
// term after hold, as with Redis. A leader whose process exits or crashes
// (even by SIGKILL) releases the flock at once, because the kernel closes
// its file descriptors: another candidate takes over on its next Select,
// without waiting for hold. The converse caveat: a leader whose process is
// stopped (SIGSTOP, a debugger) or frozen keeps the flock past its term,
// because its timer cannot run; the other candidates then still report it
// as the leader (its expired term visible in the sidecar) until it resumes
// and releases, or dies. Call Close on shutdown to hand over at once.
package flocklock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/coord/lock"
)

// retryDelay is how often a contended flock is retried.
const retryDelay = time.Millisecond

// sweepEvery is how often the Locker deletes expired lock files.
const sweepEvery = time.Minute

// fileName returns a file name for key, escaped so that any key is one
// path element.
func fileName(key string) string {
	return strings.ReplaceAll(url.PathEscape(key), ".", "%2E")
}

func checkLease(op, key string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("flocklock: %s %q: lease %v is not positive", op, key, d)
	}
	return nil
}

// record is the content of a lock or sidecar file: "<expiry in Unix ns>\n<holder>".
type record struct {
	holder  string
	expires time.Time
}

func (r record) encode() []byte {
	return []byte(strconv.FormatInt(r.expires.UnixNano(), 10) + "\n" + r.holder)
}

// decode parses a record; an empty or malformed file decodes as no record
// (a crash mid-write leaves a free lock).
func decode(b []byte) (record, bool) {
	ns, holder, ok := strings.Cut(string(b), "\n")
	if !ok {
		return record{}, false
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return record{}, false
	}
	return record{holder: holder, expires: time.Unix(0, n)}, true
}

// lockPath takes an exclusive flock on path, making sure that the locked
// file is still the one at path (a concurrent holder may have deleted it).
// The caller must Close the returned Flock.
func lockPath(ctx context.Context, path string) (*flock.Flock, error) {
	for {
		fl := flock.New(path)
		if _, err := fl.TryLockContext(ctx, retryDelay); err != nil {
			fl.Close()
			return nil, err
		}
		locked, err := fl.Stat()
		if err != nil {
			fl.Close()
			return nil, err
		}
		cur, err := os.Stat(path)
		if err == nil && os.SameFile(locked, cur) {
			return fl, nil
		}
		fl.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		// Deleted (and maybe re-created) while we waited: lock the new one.
	}
}

// Locker is a lock.Locker on lock files in one directory. It is safe for
// concurrent use, within and between processes.
type Locker struct {
	dir       string
	now       func() time.Time
	lastSweep atomic.Int64 // Unix ns
	sweeping  atomic.Bool
}

var _ lock.Locker = (*Locker)(nil)

// NewLocker returns a Locker that keeps its lock files in dir, creating dir
// if needed.
func NewLocker(dir string) (*Locker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("flocklock: create lock directory: %w", err)
	}
	return &Locker{dir: dir, now: time.Now}, nil
}

// SetClock makes the Locker judge lock records by c instead of the system
// clock: all processes sharing the directory must judge them by one clock.
// Call it before the Locker is used.
func (l *Locker) SetClock(c clock.Clock) { l.now = c.Now }

// Path returns the lock file of key.
func (l *Locker) Path(key string) string { return filepath.Join(l.dir, fileName(key)+".lock") }

// update runs fn on the current record of key under the key's flock. fn
// returns the record to write, or nil to delete the file, and its result.
func (l *Locker) update(ctx context.Context, op, key string, fn func(cur record, held bool, now time.Time) (next *record, ok bool)) (bool, error) {
	path := l.Path(key)
	fl, err := lockPath(ctx, path)
	if err != nil {
		return false, fmt.Errorf("flocklock: %s %q: %w", op, key, err)
	}
	defer fl.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("flocklock: %s %q: %w", op, key, err)
	}
	now := l.now()
	cur, held := decode(b)
	if held && !now.Before(cur.expires) {
		held = false
	}
	next, ok := fn(cur, held, now)
	switch {
	case !ok:
	case next == nil:
		err = os.Remove(path)
	default:
		err = os.WriteFile(path, next.encode(), 0o600)
	}
	if err != nil {
		return false, fmt.Errorf("flocklock: %s %q: %w", op, key, err)
	}
	return ok, nil
}

// TryLock implements lock.Locker.
func (l *Locker) TryLock(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := checkLease("lock", key, ttl); err != nil {
		return false, err
	}
	l.maybeSweep()
	return l.update(ctx, "lock", key, func(cur record, held bool, now time.Time) (*record, bool) {
		if held && cur.holder != token {
			return nil, false
		}
		return &record{holder: token, expires: now.Add(ttl)}, true
	})
}

// Extend implements lock.Locker.
func (l *Locker) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := checkLease("extend", key, ttl); err != nil {
		return false, err
	}
	return l.update(ctx, "extend", key, func(cur record, held bool, now time.Time) (*record, bool) {
		if !held || cur.holder != token {
			return nil, false
		}
		return &record{holder: token, expires: now.Add(ttl)}, true
	})
}

// Unlock implements lock.Locker. It deletes the lock file.
func (l *Locker) Unlock(ctx context.Context, key, token string) (bool, error) {
	return l.update(ctx, "unlock", key, func(cur record, held bool, _ time.Time) (*record, bool) {
		return nil, held && cur.holder == token
	})
}

// maybeSweep starts a sweep of expired lock files in the background if none
// ran in the last sweepEvery.
func (l *Locker) maybeSweep() {
	now := l.now().UnixNano()
	last := l.lastSweep.Load()
	if now-last < int64(sweepEvery) || !l.lastSweep.CompareAndSwap(last, now) {
		return
	}
	if !l.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer l.sweeping.Store(false)
		l.Sweep()
	}()
}

// Sweep deletes the lock files whose lease has passed, skipping those
// another operation holds at the moment. It returns how many it deleted.
// TryLock calls it in the background at most once a minute.
func (l *Locker) Sweep() int {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, ent := range ents {
		if !ent.Type().IsRegular() || !strings.HasSuffix(ent.Name(), ".lock") {
			continue
		}
		if l.sweepOne(filepath.Join(l.dir, ent.Name())) {
			n++
		}
	}
	return n
}

func (l *Locker) sweepOne(path string) bool {
	fl := flock.New(path)
	defer fl.Close()
	if ok, err := fl.TryLock(); !ok || err != nil {
		return false
	}
	locked, err1 := fl.Stat()
	cur, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(locked, cur) {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if r, ok := decode(b); ok && l.now().Before(r.expires) {
		return false
	}
	return os.Remove(path) == nil
}

// Elector is a lock.Elector on flocks in one directory. Each process (each
// Elector) leads a service while it holds the service's flock; see the
// package documentation for what hold means. It is safe for concurrent use.
type Elector struct {
	dir   string
	mu    sync.Mutex
	terms map[string]*term // the services this Elector leads
	gen   uint64
}

type term struct {
	fl     *flock.Flock
	nodeID string
	gen    uint64
	timer  *time.Timer
}

var _ lock.Elector = (*Elector)(nil)

// NewElector returns an Elector that keeps its files in dir, creating dir if
// needed.
func NewElector(dir string) (*Elector, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("flocklock: create election directory: %w", err)
	}
	return &Elector{dir: dir, terms: make(map[string]*term)}, nil
}

// Path returns the flock file of service; its sidecar is Path+".info".
func (e *Elector) Path(service string) string {
	return filepath.Join(e.dir, fileName(service)+".leader")
}

// readWait bounds how long Select waits for a new leader to write its
// sidecar.
const readWait = 200 * time.Millisecond

// Select implements lock.Elector. When this Elector already leads service
// for another node id, that node id is returned.
func (e *Elector) Select(ctx context.Context, service, nodeID string, hold time.Duration) (string, error) {
	if err := checkLease("select leader of", service, hold); err != nil {
		return "", err
	}
	if nodeID == "" {
		return "", fmt.Errorf("flocklock: select leader of %q: empty node id", service)
	}
	path := e.Path(service)
	e.mu.Lock()
	if t := e.terms[service]; t != nil {
		defer e.mu.Unlock()
		if t.nodeID != nodeID {
			return t.nodeID, nil
		}
		if err := e.startTermLocked(service, t, hold); err != nil {
			e.releaseLocked(service, t)
			return "", fmt.Errorf("flocklock: renew leader of %q: %w", service, err)
		}
		return nodeID, nil
	}
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		e.mu.Unlock()
		return "", fmt.Errorf("flocklock: select leader of %q: %w", service, err)
	}
	if ok {
		defer e.mu.Unlock()
		t := &term{fl: fl, nodeID: nodeID}
		if err := e.startTermLocked(service, t, hold); err != nil {
			fl.Close()
			return "", fmt.Errorf("flocklock: select leader of %q: %w", service, err)
		}
		e.terms[service] = t
		return nodeID, nil
	}
	e.mu.Unlock()
	return e.readLeader(ctx, service, path+".info")
}

// startTermLocked writes t's sidecar for a term of hold from now and arms
// the timer that releases the flock if the term is not renewed.
func (e *Elector) startTermLocked(service string, t *term, hold time.Duration) error {
	info := e.Path(service) + ".info"
	tmp := info + ".tmp" // only the flock holder writes it
	r := record{holder: t.nodeID, expires: time.Now().Add(hold)}
	if err := os.WriteFile(tmp, r.encode(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, info); err != nil {
		return err
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	e.gen++
	gen := e.gen
	t.gen = gen
	t.timer = time.AfterFunc(hold, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if cur := e.terms[service]; cur == t && t.gen == gen {
			e.releaseLocked(service, t)
		}
	})
	return nil
}

func (e *Elector) releaseLocked(service string, t *term) {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.fl.Close()
	if e.terms[service] == t {
		delete(e.terms, service)
	}
}

// readLeader reads the leader from the sidecar. A sidecar whose term has
// passed may predate the current holder of the flock, which writes its own
// right after taking the flock: readLeader waits up to readWait for a
// current one, then returns what it read (see the package documentation on
// stopped leaders).
func (e *Elector) readLeader(ctx context.Context, service, info string) (string, error) {
	deadline := time.Now().Add(readWait)
	for {
		b, err := os.ReadFile(info)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("flocklock: read leader of %q: %w", service, err)
		}
		r, ok := decode(b)
		if ok && time.Now().Before(r.expires) {
			return r.holder, nil
		}
		if time.Now().After(deadline) {
			if ok {
				return r.holder, nil
			}
			return "", fmt.Errorf("flocklock: read leader of %q: the leader holds %s but wrote no term", service, e.Path(service))
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("flocklock: read leader of %q: %w", service, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close gives up every term this Elector holds, releasing the flocks at
// once so that another process can take over on its next Select.
func (e *Elector) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for service, t := range e.terms {
		e.releaseLocked(service, t)
	}
	return nil
}

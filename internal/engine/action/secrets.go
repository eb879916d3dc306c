package action

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// DefaultSecretTTL is how old the secrets a SecretCache signs with may
// be: a rotation made on another node signs here within it.
const DefaultSecretTTL = time.Second

// SecretStore is what a SecretCache reads and writes of the store: the
// apps' signing secrets (store.Store implements it).
type SecretStore interface {
	ActiveSigningSecrets(ctx context.Context, app string, now time.Time) ([]*model.SigningSecret, error)
	EnsureSigningSecret(ctx context.Context, app string, secret string, now time.Time) (bool, error)
}

// SecretCache is the SigningSecrets of a node: the active signing secrets
// of each app, read from the store and kept for a TTL, so that thousands
// of callbacks a second cost about two reads per app per TTL. An app that
// has no secret yet (its timers were made by the Go library, which does
// not create one) gets one on its first callback:
// store.EnsureSigningSecret makes sure the nodes of a cluster agree on it.
//
// From half the TTL on, the next callback starts a read in the
// background and signs with the secrets read before; past the TTL,
// callbacks wait for the read. No callback thus signs with secrets read
// longer than the TTL ago: a secret rotated on another node signs here
// within the TTL, and the secret it replaced keeps signing until the end
// of its overlap, so receivers holding either verify meanwhile. A
// rotation made through this node (Rotating) signs at once. A cached
// secret that expires is dropped at once. When the store cannot be read,
// the secrets last read keep signing (until they expire) and the error is
// logged; with none, the callback fails rather than go out unsigned.
type SecretCache struct {
	store SecretStore
	ttl   time.Duration
	now   func() time.Time
	log   *slog.Logger

	mu       sync.Mutex
	apps     map[string]*secretEntry
	rotating map[string]int // apps being rotated on this node: read, not cached
}

type secretEntry struct {
	secrets []*model.SigningSecret
	refresh time.Time // from then on, a callback reads them again in the background
	expires time.Time // from then on, callbacks wait for that read
	load    *secretLoad
}

// secretLoad is one read of the store that concurrent callers share.
type secretLoad struct {
	done    chan struct{}
	secrets []*model.SigningSecret
	err     error
}

// SecretCacheOptions configures NewSecretCache; zero fields take defaults.
type SecretCacheOptions struct {
	// TTL is how long an app's secrets are kept; default DefaultSecretTTL.
	TTL time.Duration
	// Clock is what secrets expire by; nil means the system clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// NewSecretCache returns a SecretCache over st.
func NewSecretCache(st SecretStore, o SecretCacheOptions) *SecretCache {
	c := &SecretCache{store: st, ttl: o.TTL, now: clock.Default(o.Clock).Now, log: o.Logger,
		apps: map[string]*secretEntry{}, rotating: map[string]int{}}
	if c.ttl <= 0 {
		c.ttl = DefaultSecretTTL
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c
}

// loadTimeout bounds one read of the store, which callers share: it does
// not end with the context of the callback that started it.
const loadTimeout = 10 * time.Second

// SigningSecrets returns app's active secrets, newest first.
func (c *SecretCache) SigningSecrets(ctx context.Context, app string) ([]string, error) {
	for {
		c.mu.Lock()
		if c.rotating[app] > 0 {
			c.mu.Unlock()
			secrets, err := c.read(ctx, app)
			if err != nil {
				return nil, err
			}
			return active(secrets, c.now()), nil
		}
		now := c.now()
		e := c.apps[app]
		if e == nil {
			e = &secretEntry{}
			c.apps[app] = e
		}
		if !now.Before(e.refresh) && e.load == nil {
			e.load = &secretLoad{done: make(chan struct{})}
			go c.fetch(context.WithoutCancel(ctx), app, e, e.load)
		}
		// Secrets read within the TTL sign while they are read again.
		if now.Before(e.expires) {
			if out := active(e.secrets, now); len(out) > 0 {
				c.mu.Unlock()
				return out, nil
			}
		}
		l := e.load
		if l == nil { // fresh, but every secret expired since: read now
			l = &secretLoad{done: make(chan struct{})}
			e.load = l
			go c.fetch(context.WithoutCancel(ctx), app, e, l)
		}
		c.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		forgotten := c.apps[app] != e
		c.mu.Unlock()
		if forgotten {
			continue // a rotation meanwhile: read again
		}
		if l.err != nil {
			return nil, l.err
		}
		return active(l.secrets, c.now()), nil
	}
}

// Rotating tells the cache that app's secrets are being changed through
// this node: until done is called, callbacks read them from the store;
// then the cache reads them again. Call it before the change, and done
// once it committed (or failed): a callback signed after the commit
// carries the new secret's signature.
func (c *SecretCache) Rotating(app string) (done func()) {
	c.mu.Lock()
	c.rotating[app]++
	delete(c.apps, app)
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.rotating[app]--; c.rotating[app] <= 0 {
				delete(c.rotating, app)
			}
			delete(c.apps, app)
			c.mu.Unlock()
		})
	}
}

// fetch reads app's secrets into e and ends the load l.
func (c *SecretCache) fetch(ctx context.Context, app string, e *secretEntry, l *secretLoad) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	start := c.now() // what was read is as old as this
	secrets, err := c.read(ctx, app)
	c.mu.Lock()
	now := c.now()
	switch {
	case err == nil:
		e.secrets, e.refresh, e.expires = secrets, start.Add(c.ttl/2), start.Add(c.ttl)
		l.secrets = secrets
	case len(active(e.secrets, now)) > 0:
		// Keep signing with what we had; try the store again soon.
		c.log.Warn("executor: cannot read signing secrets; signing with the ones read before", "app", app, "err", err)
		e.refresh, e.expires = now.Add(min(c.ttl, time.Second)/2), now.Add(min(c.ttl, time.Second))
		l.secrets = e.secrets
	default:
		l.err = err
	}
	e.load = nil
	c.mu.Unlock()
	close(l.done)
}

// read returns app's active secrets, creating the first one if it has none.
func (c *SecretCache) read(ctx context.Context, app string) ([]*model.SigningSecret, error) {
	now := c.now()
	secrets, err := c.store.ActiveSigningSecrets(ctx, app, now)
	if err != nil {
		return nil, err
	}
	if len(secrets) > 0 {
		return secrets, nil
	}
	created, err := c.store.EnsureSigningSecret(ctx, app, webhook.NewSecret(), now)
	if err != nil {
		return nil, err
	}
	if created {
		c.log.Info("executor: created the first signing secret of an app", "app", app)
	}
	if secrets, err = c.store.ActiveSigningSecrets(ctx, app, now); err != nil {
		return nil, err
	}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("app %s: %w", app, errNoSecret)
	}
	return secrets, nil
}

var errNoSecret = errors.New("no active signing secret")

// active returns the secrets of ss that have not expired at now.
func active(ss []*model.SigningSecret, now time.Time) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s.ExpiresAt.IsZero() || now.Before(s.ExpiresAt) {
			out = append(out, s.Secret)
		}
	}
	return out
}

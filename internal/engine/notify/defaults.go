package notify

import (
	"context"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/model"
)

// DefaultsTTL is how long an AppDefaults keeps an app's rules: a change of
// an app's defaults reaches every node within it.
const DefaultsTTL = 5 * time.Second

// Defaults is what AppDefaults reads of the store (store.Store implements
// it).
type Defaults interface {
	AppNotify(ctx context.Context, app string) ([]model.NotifyRule, error)
}

// AppDefaults caches the apps' default notification rules
// (store.Notifications.AppNotify) for DefaultsTTL, so that the executor
// can ask for every result whether its run's app notifies without a read
// of the store each time.
type AppDefaults struct {
	st  Defaults
	clk clock.Clock
	mu  sync.Mutex
	m   map[string]defaultsEntry
}

type defaultsEntry struct {
	rules []model.NotifyRule
	at    time.Time
}

// NewAppDefaults returns an empty cache over st.
func NewAppDefaults(st Defaults, clk clock.Clock) *AppDefaults {
	return &AppDefaults{st: st, clk: clock.Default(clk), m: map[string]defaultsEntry{}}
}

// Rules returns app's default rules, read from the store when the cached
// ones are older than DefaultsTTL.
func (d *AppDefaults) Rules(ctx context.Context, app string) ([]model.NotifyRule, error) {
	now := d.clk.Now()
	d.mu.Lock()
	e, ok := d.m[app]
	d.mu.Unlock()
	if ok && now.Sub(e.at) < DefaultsTTL {
		return e.rules, nil
	}
	rules, err := d.st.AppNotify(ctx, app)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.m[app] = defaultsEntry{rules: rules, at: now}
	d.mu.Unlock()
	return rules, nil
}

// Notifies reports whether t's final results are to be written to the
// notification outbox: t has rules, or its app has defaults (also when
// they cannot be read now: the notifier decides later).
func (d *AppDefaults) Notifies(t *model.Timer) bool {
	if len(t.Notify) > 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rules, err := d.Rules(ctx, t.App)
	return err != nil || len(rules) > 0
}

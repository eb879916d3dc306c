package action_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clockpkg "github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// countingStore counts the reads of signing secrets and can fail them.
type countingStore struct {
	action.SecretStore
	reads atomic.Int32
	down  atomic.Bool
}

func (s *countingStore) ActiveSigningSecrets(ctx context.Context, app string, now time.Time) ([]*model.SigningSecret, error) {
	if s.down.Load() {
		return nil, errors.New("store down (test)")
	}
	s.reads.Add(1)
	return s.SecretStore.ActiveSigningSecrets(ctx, app, now)
}

func openStore(t *testing.T) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "chime.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestSecretCache(t *testing.T) {
	t.Parallel()
	db := openStore(t)
	st := &countingStore{SecretStore: db}
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	tick := func(d time.Duration) { clock.Add(int64(d)) }
	c := action.NewSecretCache(st, action.SecretCacheOptions{TTL: 5 * time.Second, Clock: clockpkg.Func(func() time.Time { return time.Unix(0, clock.Load()) }),
		Logger: slog.New(slog.DiscardHandler)})
	ctx := t.Context()

	// An app without a secret gets one on its first callback.
	first, err := c.SigningSecrets(ctx, "lib")
	if err != nil || len(first) != 1 || !strings.HasPrefix(first[0], webhook.SecretPrefix) {
		t.Fatalf("first: %v, %v", first, err)
	}
	stored, err := st.ActiveSigningSecrets(ctx, "lib", now)
	if err != nil || len(stored) != 1 || stored[0].Secret != first[0] {
		t.Fatalf("stored: %v, %v", stored, err)
	}
	reads := st.reads.Load()

	// Within the TTL, the cache answers.
	for range 100 {
		if got, err := c.SigningSecrets(ctx, "lib"); err != nil || got[0] != first[0] {
			t.Fatalf("cached: %v, %v", got, err)
		}
	}
	if st.reads.Load() != reads {
		t.Fatalf("%d reads within the TTL", st.reads.Load()-reads)
	}

	// A rotation shows within the TTL: from half of it on, the secrets
	// read before sign while they are read again, then both.
	rot, err := db.RotateSigningSecret(ctx, "lib", webhook.NewSecret(), time.Unix(0, clock.Load()), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	tick(3 * time.Second)
	if got, _ := c.SigningSecrets(ctx, "lib"); len(got) != 1 { // stale while read again
		t.Fatalf("stale read: %v", got)
	}
	waitFor(t, func() bool { got, _ := c.SigningSecrets(ctx, "lib"); return len(got) == 2 })
	got, _ := c.SigningSecrets(ctx, "lib")
	if got[0] != rot.Secret || got[1] != first[0] {
		t.Fatalf("after rotation: %v, want [%s %s]", got, rot.Secret, first[0])
	}

	// The old secret stops signing when it expires, without waiting for
	// the TTL.
	tick(time.Hour)
	if got, _ := c.SigningSecrets(ctx, "lib"); len(got) != 1 || got[0] != rot.Secret {
		t.Fatalf("after the overlap: %v", got)
	}

	// A store outage: the secrets read before keep signing; an app never
	// read fails.
	st.down.Store(true)
	tick(time.Minute)
	if got, err := c.SigningSecrets(ctx, "lib"); err != nil || len(got) != 1 {
		t.Fatalf("during an outage: %v, %v", got, err)
	}
	if _, err := c.SigningSecrets(ctx, "other"); err == nil {
		t.Fatal("an unread app got secrets during an outage")
	}
}

// TestSecretRotationFollows: a rotation made through a node signs there
// from its commit on, each active secret signing; another node signs
// with it once its TTL (1 s by default) passed since its last read, never
// later, whether it was read since or not.
func TestSecretRotationFollows(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	clk := clockpkg.Func(func() time.Time { return time.Unix(0, clock.Load()) })
	quiet := slog.New(slog.DiscardHandler)
	rotating := action.NewSecretCache(st, action.SecretCacheOptions{Clock: clk, Logger: quiet})
	other := action.NewSecretCache(st, action.SecretCacheOptions{Clock: clk, Logger: quiet})
	ctx := t.Context()
	first, err := rotating.SigningSecrets(ctx, "pay")
	if err != nil || len(first) != 1 {
		t.Fatalf("first: %v, %v", first, err)
	}
	if got, err := other.SigningSecrets(ctx, "pay"); err != nil || !slices.Equal(got, first) {
		t.Fatalf("other node: %v, %v, want %v", got, err, first)
	}

	done := rotating.Rotating("pay")
	now := time.Unix(0, clock.Load())
	rot, err := st.RotateSigningSecret(ctx, "pay", webhook.NewSecret(), now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Committed: this node signs with both at once, before and after done.
	want := []string{rot.Secret, first[0]}
	if got, err := rotating.SigningSecrets(ctx, "pay"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("rotating node before done: %v, %v, want %v", got, err, want)
	}
	done()
	if got, err := rotating.SigningSecrets(ctx, "pay"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("rotating node after the rotation: %v, %v, want %v", got, err, want)
	}
	// The other node, idle since, follows once 1 s passed: its next
	// callback does not sign with what it read before.
	clock.Add(int64(action.DefaultSecretTTL))
	if got, err := other.SigningSecrets(ctx, "pay"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("other node 1 s later: %v, %v, want %v", got, err, want)
	}
}

// waitFor polls cond until it holds, failing after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "the condition", func() (bool, string) { return cond(), "not met" })
}

// TestSecretCacheConcurrent: callbacks of a new app at once share one
// read of the store, and all sign with the one secret it creates.
func TestSecretCacheConcurrent(t *testing.T) {
	t.Parallel()
	st := &countingStore{SecretStore: openStore(t)}
	c := action.NewSecretCache(st, action.SecretCacheOptions{Logger: slog.New(slog.DiscardHandler)})
	const n = 50
	got := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			s, err := c.SigningSecrets(t.Context(), "burst")
			if err != nil {
				errs <- err
				return
			}
			got <- s[0]
		}()
	}
	first := ""
	for range n {
		select {
		case err := <-errs:
			t.Fatal(err)
		case s := <-got:
			if first == "" {
				first = s
			}
			if s != first {
				t.Fatalf("two secrets: %s, %s", first, s)
			}
		}
	}
	if r := st.reads.Load(); r > 2 { // one read, and one more after creating the secret
		t.Fatalf("%d reads of the store for %d concurrent callbacks", r, n)
	}
}

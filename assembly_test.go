package chime_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// countingStore counts the calls of a few store methods.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *countingStore) count(op string) {
	s.mu.Lock()
	s.calls[op]++
	s.mu.Unlock()
}

func (s *countingStore) n(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func (s *countingStore) SaveTimer(ctx context.Context, w store.TimerWrite) ([]*model.Run, error) {
	s.count("SaveTimer")
	return s.Store.SaveTimer(ctx, w)
}

func (s *countingStore) ClaimRuns(ctx context.Context, claims []store.Claim) ([]store.ClaimedRun, error) {
	s.count("ClaimRuns")
	return s.Store.ClaimRuns(ctx, claims)
}

// countingRunner counts the actions it runs.
type countingRunner struct {
	next action.Runner
	mu   sync.Mutex
	runs int
}

func (r *countingRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	r.mu.Lock()
	r.runs++
	r.mu.Unlock()
	return r.next.Run(ctx, run, t)
}

func (r *countingRunner) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs
}

// TestConfigWrapStoreAndRunner: with WrapStore and WrapRunner, the node's
// every part uses the wrappers: Upsert and the engine's claims go through
// the wrapped store, Store returns it, and a handler's run goes through the
// wrapped handler runner.
func TestConfigWrapStoreAndRunner(t *testing.T) {
	var ws *countingStore
	var handler *countingRunner
	n := newNode(t, chime.Config{
		Test: chime.TestConfig{
			WrapStore: func(s store.Store) store.Store {
				ws = &countingStore{Store: s, calls: map[string]int{}}
				return ws
			},
			WrapRunner: func(typ string, r action.Runner) action.Runner {
				if typ != model.ActionHandler {
					return r
				}
				handler = &countingRunner{next: r}
				return handler
			},
		},
	})
	if ws == nil || handler == nil {
		t.Fatalf("New did not call the wrappers (store %v, handler runner %v)", ws != nil, handler != nil)
	}
	if nodeparts.Of(n).Store != store.Store(ws) {
		t.Errorf("Store() is not the wrapped store")
	}
	done := make(chan struct{}, 1)
	n.HandleFunc("tick", func(context.Context, *chime.Run) ([]byte, error) {
		done <- struct{}{}
		return nil, nil
	})
	start(t, n)
	if _, err := n.Upsert(context.Background(), chime.Timer{Name: "tick", Schedule: at(500 * time.Millisecond),
		Action: chime.HandlerAction("tick", nil)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
	if got := ws.n("SaveTimer"); got != 1 {
		t.Errorf("SaveTimer through the wrapper: %d calls, want 1 (Upsert)", got)
	}
	if got := ws.n("ClaimRuns"); got == 0 {
		t.Errorf("ClaimRuns through the wrapper: none; the engine bypassed it")
	}
	if got := handler.n(); got != 1 {
		t.Errorf("handler runs through the wrapper: %d, want 1", got)
	}
}

// nopRunner does nothing.
type nopRunner struct{}

func (nopRunner) Run(context.Context, *model.Run, *model.Timer) ([]byte, error) { return nil, nil }

// TestConfigWrapRunnerTypes: WrapRunner sees every runner of the node, the
// node's own and those of Runners, and no shell runner without AllowShell.
func TestConfigWrapRunnerTypes(t *testing.T) {
	tests := []struct {
		name string
		cfg  chime.Config
		want []string
	}{
		{name: "default", want: []string{model.ActionHandler, model.ActionHTTP}},
		{name: "shell", cfg: chime.Config{Security: chime.SecurityConfig{AllowShell: true}}, want: []string{model.ActionHandler, model.ActionHTTP, model.ActionShell}},
		{name: "shell runner given but not allowed", cfg: chime.Config{Actions: chime.ActionsConfig{Runners: map[string]action.Runner{model.ActionShell: nopRunner{}}}},
			want: []string{model.ActionHandler, model.ActionHTTP}},
		{name: "extra runner", cfg: chime.Config{Actions: chime.ActionsConfig{Runners: map[string]action.Runner{"custom": nopRunner{}}}},
			want: []string{"custom", model.ActionHandler, model.ActionHTTP}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			cfg := tc.cfg
			cfg.Test.WrapRunner = func(typ string, r action.Runner) action.Runner {
				seen[typ] = true
				return r
			}
			n := newNode(t, cfg)
			t.Cleanup(func() { n.Shutdown(context.Background()) })
			if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, tc.want) {
				t.Errorf("wrapped %v, want %v", got, tc.want)
			}
		})
	}
}

// TestConfigRedisPrefix: with RedisPrefix, the node's Redis keys (its slice
// locks, once it runs) start with the prefix.
func TestConfigRedisPrefix(t *testing.T) {
	url := testenv.RedisURL(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	prefix := "chimetest-prefix-" + time.Now().Format("150405.000000000")
	ctx := context.Background()
	t.Cleanup(func() {
		keys, _ := client.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			client.Del(ctx, keys...)
		}
	})
	n := newNode(t, chime.Config{Redis: url, Test: chime.TestConfig{RedisPrefix: prefix}})
	start(t, n)
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		keys, err := client.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no key under %q within 10s: the node did not use the prefix", prefix)
		}
	}
}

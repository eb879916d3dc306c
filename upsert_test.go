package chime_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// TestLibraryDeps checks that the library does not build the REST server
// (and with it promhttp and the web UI, which package api embeds): the
// timer rules they share live in package timers.
func TestLibraryDeps(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/chimehq/chime/internal/app/api", strings.HasPrefix(dep, "github.com/chimehq/chime/internal/app/api/"),
			strings.HasPrefix(dep, "github.com/prometheus/client_golang/prometheus/promhttp"):
			t.Errorf("the library depends on %s", dep)
		}
	}
}

// TestTimerCarriesRESTFields checks that chime.Timer has a field for every
// field of the REST API's timer that a client sets, so that Upsert cannot
// drop what was set through the API (a policy once was).
func TestTimerCarriesRESTFields(t *testing.T) {
	t.Parallel()
	// JSON name in the API -> field of chime.Timer.
	fields := map[string]string{
		"app": "App", "name": "Name", "description": "Description", "schedule": "Schedule",
		"timezone": "Timezone", "enabled": "Disabled", "action": "Action", "timeout": "Timeout",
		"retry": "Retry", "policy": "Policy", "history": "History", "after": "After",
		"priority": "Priority", "notify": "Notify",
		// mode and shards are top-level in the API, Policy.Mode and
		// Policy.Shards in the model and the library.
		"mode": "Policy", "shards": "Policy",
	}
	readOnly := map[string]bool{"id": true, "paused": true, "created_at": true, "updated_at": true, "next_fire_times": true, "disabled_reason": true}
	rest := reflect.TypeFor[api.Timer]()
	for i := range rest.NumField() {
		name, _, _ := strings.Cut(rest.Field(i).Tag.Get("json"), ",")
		if readOnly[name] {
			continue
		}
		f, ok := fields[name]
		if !ok {
			t.Errorf("REST field %q has no field in chime.Timer (add one, and to this map)", name)
			continue
		}
		if _, ok := reflect.TypeFor[chime.Timer]().FieldByName(f); !ok {
			t.Errorf("chime.Timer has no field %s for REST field %q", f, name)
		}
	}
}

// TestUpsertReplansOnPolicyChange checks that a change of policy alone
// replans the timer's runs, as a change through the REST API does (Upsert
// once did not).
func TestUpsertReplansOnPolicyChange(t *testing.T) {
	t.Parallel()
	n := newNode(t, chime.Config{})
	n.HandleFunc("job", func(ctx context.Context, run *chime.Run) ([]byte, error) { return nil, nil })
	ctx := context.Background()
	def := chime.Timer{Name: "job", Schedule: "@every 1m", Action: chime.HandlerAction("job", nil)}
	id, err := n.Upsert(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	pending := func() []*model.Run {
		runs, _, err := nodeparts.Of(n).Store.ListRuns(ctx, store.RunFilter{TimerID: id, Status: model.RunPending})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	if got := len(pending()); got < 5 {
		t.Fatalf("%d runs planned, want the look-ahead's", got)
	}
	def.Policy.EndAt = time.Now().Add(150 * time.Second).UTC()
	if _, err := n.Upsert(ctx, def); err != nil {
		t.Fatal(err)
	}
	for _, r := range pending() {
		if r.ScheduledAt.After(def.Policy.EndAt) {
			t.Errorf("run at %v left pending after the end bound %v", r.ScheduledAt, def.Policy.EndAt)
		}
	}
}

// TestUpsertKeepsRESTPolicy checks that a replica's Upsert of the
// definition a timer has after an edit through the REST API (its policy
// included) writes nothing and keeps the policy.
func TestUpsertKeepsRESTPolicy(t *testing.T) {
	t.Parallel()
	n := newNode(t, chime.Config{App: "myapp"})
	n.HandleFunc("job", func(ctx context.Context, run *chime.Run) ([]byte, error) { return nil, nil })
	srv := httptest.NewServer(api.New(api.Config{Store: nodeparts.Of(n).Store, Engine: nodeparts.Of(n).Engine, HandlerExists: n.HandlerExists,
		Logger: quiet()}).Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	def := chime.Timer{Name: "job", Schedule: "@every 1h", Action: chime.HandlerAction("job", map[string]int{"n": 1})}
	id, err := n.Upsert(ctx, def)
	if err != nil {
		t.Fatal(err)
	}

	// An operator sets a policy through the REST API.
	url := srv.URL + "/api/v1/timers/" + id
	code, _, body := testenv.Call(t, nil, "GET", url, "", nil)
	if code != 200 {
		t.Fatalf("GET: %d %s", code, body)
	}
	var rt api.Timer
	if err := json.Unmarshal(body, &rt); err != nil {
		t.Fatal(err)
	}
	rt.Policy = &api.Policy{Overlap: model.OverlapSkip, Misfire: model.MisfireLatest, MaxFires: 5}
	if code, _, body := testenv.Call(t, nil, "PUT", url, "", rt); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	edited, err := nodeparts.Of(n).Store.GetTimer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	// The code that defines the timer says the same policy: a replica's
	// Upsert finds nothing to change.
	def.Policy = model.Policy{Overlap: model.OverlapSkip, Misfire: model.MisfireLatest, MaxFires: 5}
	if id2, err := n.Upsert(ctx, def); err != nil || id2 != id {
		t.Fatalf("Upsert: id %s err %v", id2, err)
	}
	after, err := nodeparts.Of(n).Store.GetTimer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdatedAt.Equal(edited.UpdatedAt) || !after.Policy.Equal(edited.Policy) || after.Policy.MaxFires != 5 {
		t.Errorf("Upsert rewrote the timer: policy %+v, updated %v -> %v", after.Policy, edited.UpdatedAt, after.UpdatedAt)
	}
}

// TestUpsertGivesAppSigningSecret checks that a timer saved by the library
// gives its app a signing secret, as one saved through the REST API does,
// so that a receiver can fetch it before the first callback.
func TestUpsertGivesAppSigningSecret(t *testing.T) {
	t.Parallel()
	n := newNode(t, chime.Config{App: "signed"})
	n.HandleFunc("job", func(ctx context.Context, run *chime.Run) ([]byte, error) { return nil, nil })
	ctx := context.Background()
	if _, err := n.Upsert(ctx, chime.Timer{Name: "job", Schedule: "@every 1h", Action: chime.HandlerAction("job", nil)}); err != nil {
		t.Fatal(err)
	}
	ss, err := nodeparts.Of(n).Store.ActiveSigningSecrets(ctx, "signed", time.Now())
	if err != nil || len(ss) != 1 {
		t.Fatalf("%d signing secrets, err %v", len(ss), err)
	}
}

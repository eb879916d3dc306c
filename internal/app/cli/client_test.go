package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/api/apitest"
	"github.com/chimehq/chime/internal/store/sqlstore"
)

// apiServer starts the real API on a fresh SQLite store with a fake
// engine and returns its URL.
func apiServer(t *testing.T, mod ...func(*api.Config)) string {
	t.Helper()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "chime.db")
	st, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := api.Config{
		Store:    st,
		Engine:   &apitest.FakeEngine{Store: st},
		Gatherer: prometheus.NewRegistry(),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, m := range mod {
		m(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg).Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

type result struct {
	code           int
	stdout, stderr string
}

// chime runs the command line with args against server, with stdin, and
// returns what Main would: the exit code and the output streams.
func chime(t *testing.T, server, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	root := NewRootCmd()
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, "--server", server))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := 0
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(&errb, "chime:", err)
		code = 1
		var ee *ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		}
	}
	return result{code, out.String(), errb.String()}
}

func createArgs(name string) []string {
	return []string{"timer", "create", "--app", "demo", "--name", name, "--schedule", "@every 5s",
		"--url", "http://127.0.0.1:9/hook", "--header", "X-Trace=abc", "--body", `{"a":1}`, "-o", "json"}
}

func TestTimerLifecycle(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)

	r := chime(t, srv, "", createArgs("ping")...)
	if r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	var tm api.Timer
	if err := json.Unmarshal([]byte(r.stdout), &tm); err != nil {
		t.Fatalf("create -o json: %v\n%s", err, r.stdout)
	}
	if tm.Action.HTTP.Header["X-Trace"] != "abc" || tm.Action.HTTP.Body != `{"a":1}` || tm.Action.HTTP.Method != "POST" {
		t.Errorf("created action = %+v", tm.Action.HTTP)
	}

	r = chime(t, srv, "", "timer", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "NEXT FIRE") || !strings.Contains(r.stdout, tm.ID) ||
		!strings.Contains(r.stdout, "@every 5s") {
		t.Errorf("list: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = chime(t, srv, "", "timer", "get", tm.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "POST http://127.0.0.1:9/hook") || !strings.Contains(r.stdout, "Next fires:") {
		t.Errorf("get: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Update changes only the given fields.
	r = chime(t, srv, "", "timer", "update", tm.ID, "--schedule", "*/10 * * * *", "--tz", "Europe/Paris",
		"--header", "X-Trace=", "--max-attempts", "3", "-o", "json")
	if r.code != 0 {
		t.Fatalf("update: %d %s", r.code, r.stderr)
	}
	var up api.Timer
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	if up.Schedule != "*/10 * * * *" || up.Timezone != "Europe/Paris" || up.Retry.MaxAttempts != 3 ||
		len(up.Action.HTTP.Header) != 0 || up.Action.HTTP.Body != `{"a":1}` || up.Name != "ping" {
		t.Errorf("updated = %+v, action %+v", up, up.Action.HTTP)
	}

	r = chime(t, srv, "", "timer", "disable", tm.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "Enabled:") || !strings.Contains(r.stdout, "false") {
		t.Errorf("disable: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "timer", "enable", tm.ID, "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"enabled": true`) {
		t.Errorf("enable: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = chime(t, srv, "", "timer", "trigger", tm.ID, "-o", "json")
	var run api.Run
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil || run.TimerID != tm.ID {
		t.Fatalf("trigger: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "run", "list", "--timer", tm.ID, "--status", "pending")
	if r.code != 0 || !strings.Contains(r.stdout, run.ID) || !strings.Contains(r.stdout, "pending") {
		t.Errorf("run list: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "run", "get", run.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "Manual:") || !strings.Contains(r.stdout, tm.ID) {
		t.Errorf("run get: %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = chime(t, srv, "", "timer", "delete", tm.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "deleted timer "+tm.ID) {
		t.Errorf("delete: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = chime(t, srv, "", "timer", "get", tm.ID)
	if r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get deleted: %d\n%s", r.code, r.stderr)
	}
}

func TestTimerCreateFromFile(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	doc := `{"app":"demo","name":"from-file","schedule":"0 9 * * MON-FRI","timezone":"Europe/London",
	  "action":{"type":"http","http":{"method":"get","url":"https://example.com/"}},
	  "timeout":"5s","retry":{"max_attempts":2,"backoff":"2s"}}`
	path := filepath.Join(t.TempDir(), "timer.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	r := chime(t, srv, "", "timer", "create", "-f", path, "-o", "json")
	var tm api.Timer
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
		t.Fatalf("create -f: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if tm.Timeout != "5s" || tm.Retry.Backoff != "2s" || tm.Action.HTTP.Method != "GET" {
		t.Errorf("created from file = %+v", tm)
	}

	// Stdin, with a flag overriding the file.
	r = chime(t, srv, doc, "timer", "create", "-f", "-", "--name", "from-stdin", "--disabled", "-o", "json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
		t.Fatalf("create -f -: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if tm.Name != "from-stdin" || *tm.Enabled {
		t.Errorf("created from stdin = %+v", tm)
	}

	// The same file again: the API says conflict, exit 1.
	r = chime(t, srv, "", "timer", "create", "-f", path)
	if r.code != 1 || !strings.Contains(r.stderr, "already exists") || !strings.Contains(r.stderr, "HTTP 409") {
		t.Errorf("duplicate: %d %s", r.code, r.stderr)
	}
}

func TestListPaging(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	for _, n := range []string{"a", "b", "c"} {
		if r := chime(t, srv, "", createArgs(n)...); r.code != 0 {
			t.Fatalf("create %s: %s", n, r.stderr)
		}
	}
	r := chime(t, srv, "", "timer", "list", "--limit", "2")
	if r.code != 0 || !strings.Contains(r.stderr, "more timers: --cursor ") {
		t.Fatalf("list page 1: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cursor := strings.TrimSpace(strings.TrimPrefix(r.stderr, "more timers: --cursor "))
	r = chime(t, srv, "", "timer", "list", "--limit", "2", "--cursor", cursor, "-o", "json")
	var page api.TimerList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil || len(page.Timers) != 1 || page.NextCursor != "" {
		t.Errorf("list page 2: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"bad schedule is an API error", []string{"timer", "create", "--app", "a", "--name", "n",
			"--schedule", "0 24 * * *", "--url", "http://x.test/"}, 1, "schedule: hour: 24 is out of range 0-23"},
		{"bad url is an API error", []string{"timer", "create", "--app", "a", "--name", "n",
			"--schedule", "@every 1m", "--url", "ftp://x.test/"}, 1, "action.http.url:"},
		{"bad timeout is an API error", []string{"timer", "create", "--app", "a", "--name", "n",
			"--schedule", "@every 1m", "--url", "http://x.test/", "--timeout", "soon"}, 1, "timeout:"},
		{"unknown timer", []string{"timer", "get", "NOPE"}, 1, "not found"},
		{"unknown run", []string{"run", "get", "NOPE"}, 1, "not found"},
		{"runs of unknown timer", []string{"run", "list", "--timer", "NOPE"}, 1, "not found"},
		{"missing app", []string{"timer", "create", "--name", "n", "--schedule", "@daily", "--url", "http://x.test/"}, 2, "--app is required"},
		{"missing id", []string{"timer", "get"}, 2, "one timer ID"},
		{"too many ids", []string{"timer", "delete", "a", "b"}, 2, "one timer ID"},
		{"unknown flag", []string{"timer", "list", "--colour"}, 2, "unknown flag"},
		{"bad flag value", []string{"timer", "create", "--max-attempts", "many"}, 2, "invalid argument"},
		{"bad header", []string{"timer", "create", "--app", "a", "--name", "n", "--schedule", "@daily",
			"--url", "http://x.test/", "--header", "novalue"}, 2, "is not 'Name: value' or Name=value"},
		{"bad output", []string{"timer", "list", "-o", "yaml"}, 2, "--output"},
		{"nothing to update", []string{"timer", "update", "X"}, 2, "nothing to update"},
		{"upcoming without timer", []string{"run", "list", "--upcoming"}, 2, "it takes --timer"},
		{"upcoming since", []string{"run", "list", "--upcoming", "--timer", "X", "--since", "1h"}, 2, "it takes --timer"},
		{"bad since", []string{"run", "list", "--since", "yesterday"}, 2, "--since"},
		{"negative since", []string{"run", "list", "--since", "-1h"}, 2, "must be positive"},
		{"run list limit", []string{"run", "list", "--limit", "0"}, 2, "--limit"},
		{"all and cursor", []string{"run", "list", "--all", "--cursor", "x"}, 2, "--all"},
		{"unknown subcommand", []string{"timer", "explode"}, 2, "unknown command"},
		{"missing file", []string{"timer", "create", "-f", "/nonexistent/timer.json"}, 2, "read timer file"},
		{"bad enabled filter", []string{"timer", "list", "--enabled", "maybe"}, 2, "--enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := chime(t, srv, "", tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}

func TestServerUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close()
	start := time.Now()
	r := chime(t, url, "", "timer", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach") {
		t.Errorf("unreachable: %d %s", r.code, r.stderr)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

// TestTimerCreateAfter: --after makes a timer that runs after another, with
// no --schedule; get shows it, and update --after= clears it.
func TestTimerCreateAfter(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	if r := chime(t, srv, "", createArgs("extract")...); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	r := chime(t, srv, "", "timer", "create", "--app", "demo", "--name", "load", "--after", "demo/extract=success",
		"--url", "http://127.0.0.1:9/load", "-o", "json")
	if r.code != 0 {
		t.Fatalf("create --after: %d %s", r.code, r.stderr)
	}
	var tm api.Timer
	if err := json.Unmarshal([]byte(r.stdout), &tm); err != nil {
		t.Fatal(err)
	}
	if len(tm.After) != 1 || tm.After[0].On != "success" || tm.Schedule != "" {
		t.Fatalf("created %+v", tm)
	}
	if r := chime(t, srv, "", "timer", "get", tm.ID); r.code != 0 || !strings.Contains(r.stdout, "After:") ||
		!strings.Contains(r.stdout, tm.After[0].Timer+" on success") {
		t.Errorf("get: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := chime(t, srv, "", "timer", "create", "--app", "demo", "--name", "bad", "--after", "demo/extract",
		"--url", "http://127.0.0.1:9/x"); r.code != 2 || !strings.Contains(r.stderr, "TIMER=ON") {
		t.Errorf("create --after without =ON: %d %s", r.code, r.stderr)
	}
	// Clearing after leaves no schedule: refused by the server.
	if r := chime(t, srv, "", "timer", "update", tm.ID, "--after="); r.code == 0 || !strings.Contains(r.stderr, "schedule") {
		t.Errorf("update --after= without a schedule: %d %s", r.code, r.stderr)
	}
	r = chime(t, srv, "", "timer", "update", tm.ID, "--after=", "--schedule", "@hourly", "-o", "json")
	var up api.Timer
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &up) != nil || len(up.After) != 0 || up.Schedule != "@hourly" {
		t.Errorf("update --after= --schedule: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestTimerHeaderForms: --header takes 'Name: value' (as curl and the web
// UI write it) and Name=value; 'Name:' and Name= remove a header on update;
// anything else is a usage error.
func TestTimerHeaderForms(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	r := chime(t, srv, "", "timer", "create", "--app", "demo", "--name", "h", "--schedule", "@every 5s",
		"--url", "http://127.0.0.1:9/hook", "--header", "Content-Type: application/json", "--header", "X-Trace=a:b=c",
		"--header", "X-Spaced :  v  ", "-o", "json")
	var tm api.Timer
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
		t.Fatalf("create: %+v", r)
	}
	want := map[string]string{"Content-Type": "application/json", "X-Trace": "a:b=c", "X-Spaced": "v"}
	if got := tm.Action.HTTP.Header; !maps.Equal(got, want) {
		t.Errorf("headers %v, want %v", got, want)
	}
	r = chime(t, srv, "", "timer", "update", tm.ID, "--header", "X-Trace:", "--header", "X-Spaced=", "-o", "json")
	tm = api.Timer{}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &tm) != nil {
		t.Fatalf("update: %+v", r)
	}
	if got := tm.Action.HTTP.Header; !maps.Equal(got, map[string]string{"Content-Type": "application/json"}) {
		t.Errorf("headers after removing two: %v", got)
	}
	for _, bad := range []string{"X-Trace", ": v", "=v"} {
		r := chime(t, srv, "", "timer", "update", tm.ID, "--header", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "is not 'Name: value' or Name=value") {
			t.Errorf("--header %q: %+v, want exit 2", bad, r)
		}
	}
}

// TestTimerListSearchSortID: timer list passes --search and --sort to the
// API, and -o id prints the ids alone (as timer create does).
func TestTimerListSearchSortID(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	ids := map[string]string{}
	for _, c := range []struct{ name, schedule string }{{"ping-late", "@every 1h"}, {"ping-soon", "@every 5s"}, {"other", "@every 1m"}} {
		r := chime(t, srv, "", "timer", "create", "--app", "demo", "--name", c.name, "--schedule", c.schedule,
			"--url", "http://127.0.0.1:9/hook", "-o", "id")
		if r.code != 0 || !regexp.MustCompile(`^[0-9A-Z]{26}\n$`).MatchString(r.stdout) {
			t.Fatalf("create -o id: %+v", r)
		}
		ids[c.name] = strings.TrimSpace(r.stdout)
	}
	r := chime(t, srv, "", "timer", "list", "--search", "PING", "--sort", "next_fire", "-o", "id")
	got := strings.Fields(r.stdout)
	slices.Sort(got)
	want := []string{ids["ping-late"], ids["ping-soon"]}
	slices.Sort(want)
	if r.code != 0 || !slices.Equal(got, want) {
		t.Errorf("list --search PING --sort next_fire -o id: %+v, want the ids %v", r, want)
	}
	r = chime(t, srv, "", "timer", "list", "--search", "other")
	if r.code != 0 || !strings.Contains(r.stdout, ids["other"]) || strings.Contains(r.stdout, ids["ping-soon"]) {
		t.Errorf("list --search other: %+v", r)
	}
	r = chime(t, srv, "", "timer", "list", "--sort", "name")
	if r.code != 1 || !strings.Contains(r.stderr, "sort") {
		t.Errorf("list --sort name: %+v, want the API's 400 on sort", r)
	}
}

// TestTimerGetNextFires: timer get shows the timer's next fires from GET
// /api/v1/timers/{id}/next, with when each is due when its jitter moves it.
func TestTimerGetNextFires(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	body := `{"app": "demo", "name": "jittered", "schedule": "0 * * * * *", "policy": {"jitter": "30s"},
		"action": {"type": "http", "http": {"url": "http://127.0.0.1:9/hook"}}}`
	r := chime(t, srv, body, "timer", "create", "-f", "-", "-o", "id")
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	r = chime(t, srv, "", "timer", "get", id)
	if r.code != 0 || !strings.Contains(r.stdout, "Next fires:") || !strings.Contains(r.stdout, ", jitter)") {
		t.Fatalf("get: %+v", r)
	}
	if n := strings.Count(r.stdout, ":00Z"); n < 10 {
		t.Errorf("get shows %d fires, want 10:\n%s", n, r.stdout)
	}
}

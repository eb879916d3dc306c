package executor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// TestAppSecretsAtFire: an action's {{secret.NAME}} references are
// resolved when it runs, for the secret's hosts only; a reference to a
// secret that does not exist or may not go there fails the run with
// nothing sent; the run's output, error and request never show the value;
// a redirect to another host is not followed.
func TestAppSecretsAtFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const value = "app-s3cret-value"
	var mu sync.Mutex
	var got []string // what the receivers got: host, userinfo, X-Client, body
	record := func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, pw, _ := r.BasicAuth()
		mu.Lock()
		got = append(got, r.Host+" "+user+":"+pw+" "+r.Header.Get("X-Client")+" "+string(b))
		mu.Unlock()
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { record(r) }))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, otherURL+"/stolen", http.StatusTemporaryRedirect)
			return
		}
		io.WriteString(w, "echo: "+r.Header.Get("X-Client"))
	}))
	defer srv.Close()
	hostURL := strings.Replace(srv.URL, "http://", "http://u:{{secret.API}}@", 1)

	st, err := sqlstore.Open(ctx, "sqlite::memory:", sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().Truncate(time.Second)
	if err := st.PutAppSecret(ctx, &model.AppSecret{App: "a", Name: "API", Value: value, Hosts: []string{"127.0.0.1"},
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(now)
	e, err := New(Config{Store: st, Index: memindex.New(1), NodeID: "n1", Clock: clk, Local: clk,
		Runners: map[string]action.Runner{model.ActionHTTP: action.NewHTTPRunnerWith(action.HTTPOptions{Egress: &egress.Policy{}})},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go e.rec.loop()
	defer e.rec.close(context.Background())

	tests := []struct {
		name, url, header string
		wantStatus        model.RunStatus
		wantErr           string
		wantGot           string // what the receivers got, "" for nothing
	}{
		{"resolved", hostURL + "/hook", "id {{secret.API}}", model.RunSucceeded, "",
			"u:" + value + " id " + value + ` {"k":"` + value + `"}`},
		{"other host", strings.Replace(otherURL, "http://", "http://u:{{secret.API}}@", 1) + "/hook", "{{secret.API}}", model.RunFailed,
			`may not be sent to host "localhost"`, ""},
		{"missing secret", srv.URL + "/hook", "{{secret.NOPE}}", model.RunFailed, `app secret "NOPE" does not exist`, ""},
		{"redirect off host", srv.URL + "/redirect", "{{secret.API}}", model.RunFailed, "not followed", "127.0.0.1:"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			tm := &model.Timer{ID: "t" + string(rune('0'+i)), App: "a", Name: tc.name, Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
				Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: tc.url,
					Header: map[string]string{"X-Client": tc.header}, Body: `{"k":"{{secret.API}}"}`}},
				Timeout: 10 * time.Second, Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now}
			if _, err := st.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
				t.Fatal(err)
			}
			r := &model.Run{ID: model.RunID(tm.ID, now), TimerID: tm.ID, ScheduledAt: now, DueAt: now}
			if _, err := st.InsertRuns(ctx, []*model.Run{r}); err != nil {
				t.Fatal(err)
			}
			won, err := e.Claim(ctx, []index.Entry{{RunID: r.ID, TimerID: tm.ID, DueAt: now}})
			if err != nil || len(won) != 1 {
				t.Fatalf("claim = %v, %v", won, err)
			}
			e.execute(won[0])
			var run *model.Run
			waitFor(t, "the run's result", func() bool {
				run, err = st.GetRun(ctx, r.ID)
				return err == nil && run.Status != model.RunRunning && run.Status != model.RunPending
			})
			if run.Status != tc.wantStatus || !strings.Contains(run.Error, tc.wantErr) {
				t.Errorf("run %s %q, want %s %q", run.Status, run.Error, tc.wantStatus, tc.wantErr)
			}
			b, _ := json.Marshal(run)
			if strings.Contains(string(b), value) {
				t.Errorf("the run shows the secret: %s", b)
			}
			if tc.wantStatus == model.RunSucceeded && (run.Output != "echo: id "+model.Redacted || run.Request == nil ||
				run.Request.Header["X-Client"] != "id "+model.Redacted) {
				t.Errorf("run output %q request %+v", run.Output, run.Request)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tc.wantGot == "" && len(got) > 0:
				t.Errorf("sent %q, want nothing", got)
			case tc.wantGot != "" && (len(got) != 1 || !strings.Contains(got[0], tc.wantGot)):
				t.Errorf("receivers got %q, want one request with %q", got, tc.wantGot)
			}
		})
	}
}

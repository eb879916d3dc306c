package builtin

import (
	"context"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// reportEnd is the end of the seeded period.
var reportEnd = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

// seedReport fills s with the runs the report tests count:
//
//	billing/invoices: 5 succeeded at their first attempt (delays 10 to 50
//	  ms, durations 100, 100, 200, 300, 400 ms), the first at the period's
//	  start exactly; one skipped (claimed: an attempt, but no fire), one
//	  pending; one at the period's end and
//	  one before its start, neither in it.
//	billing/sync: succeeded (delay 1 ms, 50 ms), failed (2 ms, 10 ms),
//	  failed at its third attempt (20 ms), failed (4 ms, 40 ms).
//	billing/idle: no run.
//	shipping/labels: 2 failed (delay 1 s, 5 s).
func seedReport(t *testing.T, s store.Store) (invoices, syn, labels *model.Timer) {
	t.Helper()
	ctx := context.Background()
	mk := func(app, name string) *model.Timer {
		tm := storetest.NewTimer(app, name)
		if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
		return tm
	}
	invoices, syn, labels = mk("billing", "invoices"), mk("billing", "sync"), mk("shipping", "labels")
	mk("billing", "idle")
	ms := time.Millisecond
	// fire inserts the run of tm at at and plays attempts attempts, the
	// first delay after at, each lasting dur; the last ends in status.
	fire := func(tm *model.Timer, at time.Time, delay, dur time.Duration, attempts int, status model.RunStatus) {
		t.Helper()
		runs := storetest.NewRuns(tm.ID, at, time.Second, 1)
		if _, err := s.InsertRuns(ctx, runs); err != nil {
			t.Fatal(err)
		}
		r := runs[0]
		start := at.Add(delay)
		for i := 1; i <= attempts; i++ {
			got, err := s.ClaimRuns(ctx, []store.Claim{{RunID: r.ID, Node: "n1", LeaseUntil: start.Add(time.Hour), Now: start}})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim %s: %v %d", r.ID, err, len(got))
			}
			res := model.Result{RunID: r.ID, Node: "n1", Attempt: i, Status: status, StartedAt: start, FinishedAt: start.Add(dur)}
			if i < attempts {
				res.Status, res.RetryAt = model.RunFailed, start.Add(time.Minute)
			}
			if err := storetest.Finish(ctx, s, res); err != nil {
				t.Fatal(err)
			}
			start = start.Add(time.Minute)
		}
		if status == model.RunSkipped && attempts == 0 {
			if _, err := s.SetRunStatus(ctx, r.ID, model.RunPending, model.RunSkipped, "overlap"); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := time.Hour
	start := reportEnd.Add(-24 * h)
	fire(invoices, start, 50*ms, 100*ms, 1, model.RunSucceeded)
	for i, d := range []time.Duration{10, 20, 30, 40} {
		fire(invoices, reportEnd.Add(-time.Duration(10-i)*h), d*ms, time.Duration(i+1)*100*ms, 1, model.RunSucceeded)
	}
	fire(invoices, reportEnd.Add(-2*h), 7*ms, 0, 1, model.RunSkipped) // claimed, not run: no fire, no delay
	fire(invoices, reportEnd.Add(-1*h), 0, 0, 0, model.RunPending)
	fire(invoices, reportEnd, 5*ms, 5*ms, 1, model.RunFailed)               // at the end: out
	fire(invoices, start.Add(-time.Second), 5*ms, 5*ms, 1, model.RunFailed) // before the start: out
	fire(syn, reportEnd.Add(-6*h), 1*ms, 50*ms, 1, model.RunSucceeded)
	fire(syn, reportEnd.Add(-5*h), 2*ms, 10*ms, 1, model.RunFailed)
	fire(syn, reportEnd.Add(-4*h), 3*ms, 20*ms, 3, model.RunFailed)
	fire(syn, reportEnd.Add(-3*h), 4*ms, 40*ms, 1, model.RunFailed)
	fire(labels, reportEnd.Add(-2*h), time.Second, 5*time.Second, 1, model.RunFailed)
	fire(labels, reportEnd.Add(-1*h), time.Second, 5*time.Second, 1, model.RunFailed)
	return invoices, syn, labels
}

func TestBuildReport(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite::memory:")
	inv, syn, lab := seedReport(t, s)
	from := reportEnd.Add(-24 * time.Hour)

	rep, err := BuildReport(context.Background(), s, from, reportEnd, []string{"billing"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{From: from, To: reportEnd, Period: "24h0m0s", Apps: []string{"billing"},
		Runs: 11, Fires: 9, Succeeded: 6, Failed: 3, Skipped: 1, Pending: 1, FailureRate: 0.333, Attempts: 12, Retried: 1,
		Delay: Delay{Count: 8, P50MS: 10, P90MS: 50, P99MS: 50, MaxMS: 50},
		Slowest: []TimerStat{
			{ID: inv.ID, App: "billing", Name: "invoices", Finished: 5, AvgDurationMS: 220, MaxDurationMS: 400},
			{ID: syn.ID, App: "billing", Name: "sync", Finished: 4, Failed: 3, FailureRate: 0.75, AvgDurationMS: 30, MaxDurationMS: 50},
		},
		MostFailing: []TimerStat{
			{ID: syn.ID, App: "billing", Name: "sync", Finished: 4, Failed: 3, FailureRate: 0.75, AvgDurationMS: 30, MaxDurationMS: 50},
		},
	}
	if g, w := toJSON(rep), toJSON(want); g != w {
		t.Fatalf("report\n got %s\nwant %s", g, w)
	}

	// Every app, top 1.
	rep, err = BuildReport(context.Background(), s, from, reportEnd, []string{"*"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 13 || rep.Fires != 11 || rep.Failed != 5 || rep.FailureRate != 0.455 || rep.Attempts != 14 ||
		rep.Delay != (Delay{Count: 10, P50MS: 20, P90MS: 1000, P99MS: 1000, MaxMS: 1000}) {
		t.Fatalf("every app: %s", toJSON(rep))
	}
	if len(rep.Slowest) != 1 || rep.Slowest[0].ID != lab.ID || rep.Slowest[0].AvgDurationMS != 5000 ||
		len(rep.MostFailing) != 1 || rep.MostFailing[0].ID != syn.ID {
		t.Fatalf("every app, top 1: slowest %+v, most failing %+v", rep.Slowest, rep.MostFailing)
	}

	// The text and the HTML say the same.
	text := rep.Text()
	for _, w := range []string{"every app, 2030-01-01 00:00 UTC to 2030-01-02 00:00 UTC", "runs 13, fires 11: succeeded 6, failed 5 (45.5%)",
		"p50 20 ms, p90 1000 ms, p99 1000 ms, max 1000 ms", "1. shipping/labels: average 5000 ms", "1. billing/sync: 3 failed of 4 (75.0%)"} {
		if !strings.Contains(text, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
	html, ctype, err := rep.Render(FormatHTML)
	if err != nil || ctype != "text/html" {
		t.Fatal(err, ctype)
	}
	for _, w := range []string{"<td>shipping/labels</td><td>5000</td>", "<td>billing/sync</td><td>3</td><td>4</td><td>75.0%</td>", "<td>13</td><td>11</td><td>6</td><td>5</td>"} {
		if !strings.Contains(string(html), w) {
			t.Errorf("html lacks %q:\n%s", w, html)
		}
	}
	// Names are escaped.
	rep.Slowest[0].Name = "<b>&"
	if h := rep.HTML(); !strings.Contains(h, "<td>shipping/&lt;b&gt;&amp;</td>") {
		t.Errorf("html does not escape a name:\n%s", h)
	}
	rep.Slowest[0].Name = "labels"

	// An empty period.
	rep, err = BuildReport(context.Background(), s, reportEnd.Add(time.Hour), reportEnd.Add(2*time.Hour), []string{"billing"}, 5)
	if err != nil || rep.Runs != 0 || len(rep.Slowest) != 0 || !strings.Contains(rep.Text(), "none") {
		t.Fatalf("empty: %v %s", err, toJSON(rep))
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestReportValidate(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	g := &GenerateReport{Roots: []string{root}}
	bad := map[string]string{
		`{}`:                                               "period is required",
		`{"period": "3 days"}`:                             `period "3 days" is not a Go duration`,
		`{"period": "0h"}`:                                 "must be positive",
		`{"period": "400d"}`:                               "longer than 366 days",
		`{"period": "24h", "format": "pdf"}`:               `format "pdf"`,
		`{"period": "24h", "top": 51}`:                     "top 51",
		`{"period": "24h", "apps": ["*", "a"]}`:            `"*" (every app) goes alone`,
		`{"period": "24h", "apps": [""]}`:                  "apps[0] is empty",
		`{"period": "24h", "webhook": {}}`:                 "webhook.url is required",
		`{"period": "24h", "webhook": {"url": "ftp://x"}}`: "must be an http or https URL",
		`{"period": "24h", "email": {"to": ["a@b.c"]}}`:    "--smtp-host",
		`{"period": "24h", "file": {"dir": "rel"}}`:        `file.dir "rel" must be an absolute path`,
		`{"period": "24h", "file": {}}`:                    "file.dir is required",
		`{"period": "24h", "file": {"dir": "/etc"}}`:       "not inside a --output-root",
		`{"period": "24h", "to": "x"}`:                     "unknown field",
	}
	for args, want := range bad {
		if err := g.ValidateArgs(json.RawMessage(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
	withMail := &GenerateReport{SMTP: SMTPConfig{Host: "localhost", From: "chime@example.com"}}
	if err := withMail.ValidateArgs(json.RawMessage(`{"period": "1d", "email": {"to": ["nope"]}}`)); err == nil || !strings.Contains(err.Error(), `email.to: "nope" is not an email address`) {
		t.Errorf("bad address: %v", err)
	}
	for _, good := range []string{`{"period": "7d"}`, `{"period": "2w", "apps": ["*"], "format": "html", "top": 50}`,
		`{"period": "90m", "webhook": {"url": "https://example.com/r"}, "file": {"dir": "` + root + `"}}`} {
		if err := g.ValidateArgs(json.RawMessage(good)); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
}

// reportRun is a run of a generate_report timer of app billing, scheduled
// at the end of the seeded period.
func reportRun(args string) *chime.Run {
	return &chime.Run{Run: &model.Run{ID: model.RunID("tmr-report", reportEnd), TimerID: "tmr-report", ScheduledAt: reportEnd, Attempt: 1, Node: "n1"},
		Timer: &model.Timer{ID: "tmr-report", App: "billing", Name: "daily-report"}, Args: json.RawMessage(args)}
}

// TestReportDestinations: one run delivers the report to a webhook that
// verifies its signature with the app's secret, by email through a local
// SMTP server, and into a file; the output is the JSON report.
func TestReportDestinations(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite::memory:")
	seedReport(t, s)

	var mu sync.Mutex
	var got struct {
		header http.Header
		body   []byte
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got.header, got.body = r.Header.Clone(), b
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	mailSrv := testenv.NewSMTPServer(t, nil)
	dir := filepath.Join(t.TempDir(), "reports")
	os.Mkdir(dir, 0o700)

	runner := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: &egress.Policy{},
		Secrets: action.NewSecretCache(s, action.SecretCacheOptions{})})
	g := &GenerateReport{Store: s, Webhook: runner.Run, Roots: []string{dir},
		SMTP: SMTPConfig{Host: "127.0.0.1", Port: mailSrv.Port(), From: "Chime <chime@example.com>"}}
	args := `{"period": "24h", "format": "html",
		"webhook": {"url": "` + hook.URL + `/report"},
		"email": {"to": ["ops@example.com"]},
		"file": {"dir": "` + dir + `"}}`
	if err := g.ValidateArgs(json.RawMessage(args)); err != nil {
		t.Fatal(err)
	}
	run := reportRun(args)
	out, err := g.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out, &rep); err != nil || rep.Runs != 11 || rep.Failed != 3 || rep.Period != "24h" {
		t.Fatalf("output %s: %v", out, err)
	}

	// The webhook: the JSON report, signed with billing's secret.
	mu.Lock()
	header, body := got.header, got.body
	mu.Unlock()
	secrets, err := s.ActiveSigningSecrets(context.Background(), "billing", time.Now())
	if err != nil || len(secrets) != 1 {
		t.Fatalf("secrets of billing: %v %v", secrets, err)
	}
	if err := webhook.Verify(secrets[0].Secret, header, body); err != nil {
		t.Fatalf("webhook signature: %v", err)
	}
	if header.Get("webhook-id") != run.ID || header.Get("Content-Type") != "application/json" || string(body) != string(out) {
		t.Fatalf("webhook headers %v body %s", header, body)
	}

	// The email: HTML, the default subject, the run's Message-ID.
	msgs := mailSrv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d emails", len(msgs))
	}
	head, qp, _ := strings.Cut(msgs[0].Data, "\r\n\r\n")
	text, _ := io.ReadAll(quotedprintable.NewReader(strings.NewReader(qp)))
	for _, w := range []string{"Subject: chime report: billing, 2030-01-01 00:00 UTC to 2030-01-02 00:00 UTC",
		"Content-Type: text/html; charset=utf-8", "Message-ID: <" + run.ID + "@example.com>"} {
		if !strings.Contains(head, w) {
			t.Errorf("email lacks %q:\n%s", w, head)
		}
	}
	if !strings.Contains(string(text), "<td>billing/sync</td><td>3</td><td>4</td><td>75.0%</td>") {
		t.Errorf("email body:\n%s", text)
	}

	// The file: named by the period's end, 0600, the HTML report.
	f := filepath.Join(dir, "chime-report-20300102T000000Z.html")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 || !strings.Contains(string(b), "<td>billing/invoices</td><td>220</td><td>400</td><td>5</td>") {
		t.Fatalf("file %s (%v):\n%s", f, fi.Mode(), b)
	}
}

// TestReportDestinationFails: a destination that fails fails the run,
// after the others were delivered; the output is the report still.
func TestReportDestinationFails(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite::memory:")
	seedReport(t, s)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer hook.Close()
	dir := t.TempDir()
	runner := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: &egress.Policy{}, Secrets: action.NewSecretCache(s, action.SecretCacheOptions{})})
	g := &GenerateReport{Store: s, Webhook: runner.Run, Roots: []string{dir}}
	out, err := g.Run(context.Background(), reportRun(`{"period": "1d", "format": "json", "webhook": {"url": "`+hook.URL+`"}, "file": {"dir": "`+dir+`"}}`))
	if err == nil || !strings.Contains(err.Error(), "webhook: http status 502") {
		t.Fatalf("err %v", err)
	}
	b, ferr := os.ReadFile(filepath.Join(dir, "chime-report-20300102T000000Z.json"))
	var rep Report
	if ferr != nil || json.Unmarshal(b, &rep) != nil || rep.Runs != 11 || len(out) == 0 {
		t.Fatalf("file %s: %v; output %s", b, ferr, out)
	}
}

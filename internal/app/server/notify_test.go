package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/builtin"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/webhook"
)

// hookReceiver is a real webhook receiver: it records each notification
// it gets, with whether its Standard Webhooks signature verified.
type hookReceiver struct {
	srv    *httptest.Server
	secret atomic.Value // string
	mu     sync.Mutex
	got    []receivedHook
	status atomic.Int32 // answer; 0 is 204
}

type receivedHook struct {
	on, id string
	body   map[string]any
	signed bool
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if code := h.status.Load(); code != 0 {
			w.WriteHeader(int(code))
			return
		}
		var body map[string]any
		json.Unmarshal(b, &body)
		secret, _ := h.secret.Load().(string)
		signed := secret != "" && webhook.Verify(secret, r.Header, b) == nil
		h.mu.Lock()
		h.got = append(h.got, receivedHook{on: r.Header.Get("X-Chime-Notification"), id: r.Header.Get("webhook-id"), body: body, signed: signed})
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) hooks() []receivedHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]receivedHook(nil), h.got...)
}

func (h *hookReceiver) count(on string) int {
	n := 0
	for _, g := range h.hooks() {
		if g.on == on {
			n++
		}
	}
	return n
}

// target is the timers' callback: it fails while fail is set.
func newTarget(t *testing.T, fail *atomic.Bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// fire triggers the timer and waits for the run to end; it returns the
// run's id.
func fire(t *testing.T, base, timerID, want string) string {
	t.Helper()
	code, out := post(t, base+"/api/v1/timers/"+timerID+"/trigger", ``)
	if code != 201 {
		t.Fatalf("trigger: %d %v", code, out)
	}
	id := out["id"].(string)
	testenv.Eventually(t, 10*time.Second, "run "+id+" "+want, func() (bool, string) {
		r := getJSON(t, base+"/api/v1/runs/"+id)
		return r["status"] == want, fmt.Sprint(r["status"])
	})
	return id
}

// runNotifications returns the notifications GET /api/v1/runs/{id} shows.
func runNotifications(t *testing.T, base, runID string) []map[string]any {
	t.Helper()
	r := getJSON(t, base+"/api/v1/runs/"+runID)
	var out []map[string]any
	for _, n := range asList(r["notifications"]) {
		out = append(out, n.(map[string]any))
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

// TestNotifyWebhooksThroughAPI: a timer's failure, consecutive_failures
// (threshold 2) and recovery webhooks reach a real receiver, signed with
// the app's secret, each with the timer, the run, its error, attempts and
// links; the streak is told once until a success; the run shows what was
// sent.
func TestNotifyWebhooksThroughAPI(t *testing.T) {
	t.Parallel()
	base := startServer(t, Config{})
	recv := newHookReceiver(t)
	var fail atomic.Bool
	fail.Store(true)
	target := newTarget(t, &fail)
	code, out := post(t, base+"/api/v1/timers", `{"app": "billing", "name": "invoices", "schedule": "@every 1h",
		"retry": {"max_attempts": 1}, "priority": 7,
		"action": {"type": "http", "http": {"url": "`+target+`"}},
		"notify": [{"on": "failure", "webhook": {"url": "`+recv.srv.URL+`/failure"}},
			{"on": "consecutive_failures", "threshold": 2, "webhook": {"url": "`+recv.srv.URL+`/streak"}},
			{"on": "recovery", "webhook": {"url": "`+recv.srv.URL+`/recovery"}}]}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, out)
	}
	if out["priority"] != 7.0 || len(asList(out["notify"])) != 3 {
		t.Fatalf("create answer: priority %v notify %v", out["priority"], out["notify"])
	}
	id := out["id"].(string)
	secret := getJSON(t, base+"/api/v1/apps/billing/signing-secret")["secret"].(string)
	recv.secret.Store(secret)

	// fail, fail, fail, succeed, fail, fail
	var runs []string
	for i, ok := range []bool{false, false, false, true, false, false} {
		fail.Store(!ok)
		want := "failed"
		if ok {
			want = "succeeded"
		}
		runs = append(runs, fire(t, base, id, want))
		// Each run's notifications are expanded before the next run, so
		// that the test reads them run by run (the rules themselves do
		// not depend on it).
		wantN := map[int]int{0: 1, 1: 2, 2: 1, 3: 1, 4: 1, 5: 2}[i]
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("run %d's %d notifications sent", i, wantN), func() (bool, string) {
			ns := runNotifications(t, base, runs[i])
			sent := 0
			for _, n := range ns {
				if n["status"] == "sent" {
					sent++
				}
			}
			return sent == wantN && len(ns) == wantN, fmt.Sprint(ns)
		})
	}
	if n := recv.count("failure"); n != 5 {
		t.Errorf("failure webhooks = %d, want 5", n)
	}
	if n := recv.count("consecutive_failures"); n != 2 {
		t.Errorf("consecutive_failures webhooks = %d, want 2 (runs 2 and 6: once per streak)", n)
	}
	if n := recv.count("recovery"); n != 1 {
		t.Errorf("recovery webhooks = %d, want 1", n)
	}
	for _, h := range recv.hooks() {
		if !h.signed {
			t.Errorf("%s webhook %s: signature does not verify", h.on, h.id)
		}
		run, _ := h.body["run"].(map[string]any)
		timer, _ := h.body["timer"].(map[string]any)
		links, _ := h.body["links"].(map[string]any)
		if timer["id"] != id || timer["app"] != "billing" || timer["name"] != "invoices" || run["id"] == nil || h.body["attempts"] != 1.0 ||
			!strings.HasSuffix(fmt.Sprint(links["run"]), "/runs/"+fmt.Sprint(run["id"])) {
			t.Errorf("%s webhook body = %v", h.on, h.body)
		}
		if h.on != "recovery" && !strings.Contains(fmt.Sprint(h.body["error"]), "500") {
			t.Errorf("%s webhook error = %v, want the run's", h.on, h.body["error"])
		}
		if h.on == "consecutive_failures" && h.body["consecutive_failures"] != 2.0 {
			t.Errorf("streak webhook consecutive_failures = %v", h.body["consecutive_failures"])
		}
	}
	// The target shows the webhook URL's origin only: the URL is a secret.
	ns := runNotifications(t, base, runs[3])
	if len(ns) != 1 || ns[0]["on"] != "recovery" || ns[0]["channel"] != "webhook" || ns[0]["target"] != recv.srv.URL+"/<redacted>" ||
		ns[0]["attempts"] != 1.0 || ns[0]["sent_at"] == nil || ns[0]["error"] != "" {
		t.Errorf("recovery run's notifications = %v", ns)
	}
}

// TestNotifyUndeliverableThroughAPI: a webhook that answers 503 is tried
// again with backoff, its error recorded, and neither blocks the timer's
// runs nor changes their results; once the receiver answers, it is sent.
func TestNotifyUndeliverableThroughAPI(t *testing.T) {
	t.Parallel()
	base := startServer(t, Config{NotifyBackoff: 100 * time.Millisecond})
	recv := newHookReceiver(t)
	recv.status.Store(http.StatusServiceUnavailable)
	var fail atomic.Bool
	fail.Store(true)
	target := newTarget(t, &fail)
	code, out := post(t, base+"/api/v1/timers", `{"app": "a", "name": "down", "schedule": "@every 1h", "retry": {"max_attempts": 1},
		"action": {"type": "http", "http": {"url": "`+target+`"}},
		"notify": [{"on": "failure", "webhook": {"url": "`+recv.srv.URL+`"}}]}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, out)
	}
	id := out["id"].(string)
	run := fire(t, base, id, "failed")
	testenv.Eventually(t, 20*time.Second, "the notification retried", func() (bool, string) {
		ns := runNotifications(t, base, run)
		return len(ns) == 1 && ns[0]["attempts"].(float64) >= 3 && ns[0]["status"] == "pending" &&
			strings.Contains(ns[0]["error"].(string), "503"), fmt.Sprint(ns)
	})
	r := getJSON(t, base+"/api/v1/runs/"+run)
	if r["status"] != "failed" || r["attempt"] != 1.0 || !strings.Contains(r["error"].(string), "500") {
		t.Errorf("run after undeliverable notifications = %v", r)
	}
	// The timer's runs go on meanwhile.
	fail.Store(false)
	fire(t, base, id, "succeeded")
	recv.status.Store(0)
	testenv.Eventually(t, 20*time.Second, "the notification sent once the receiver answers", func() (bool, string) {
		ns := runNotifications(t, base, run)
		return len(ns) == 1 && ns[0]["status"] == "sent" && ns[0]["sent_at"] != nil, fmt.Sprint(ns)
	})
	if n := recv.count("failure"); n != 1 {
		t.Errorf("failure webhooks received = %d, want 1", n)
	}
}

// TestNotifyEmailThroughAPI: a failure email goes out through the SMTP
// settings of send_email to a local SMTP server.
func TestNotifyEmailThroughAPI(t *testing.T) {
	t.Parallel()
	smtpSrv := testenv.NewSMTPServer(t, nil)
	base := startServer(t, Config{SMTP: builtin.SMTPConfig{Host: "127.0.0.1", Port: smtpSrv.Port(), From: "chime@example.com"}})
	var fail atomic.Bool
	fail.Store(true)
	target := newTarget(t, &fail)
	code, out := post(t, base+"/api/v1/timers", `{"app": "a", "name": "mailed", "schedule": "@every 1h", "retry": {"max_attempts": 1},
		"action": {"type": "http", "http": {"url": "`+target+`"}},
		"notify": [{"on": "failure", "email": {"to": ["ops@example.com", "Dev <dev@example.com>"]}}]}`)
	if code != 201 {
		t.Fatalf("create: %d %v", code, out)
	}
	run := fire(t, base, out["id"].(string), "failed")
	testenv.Eventually(t, 10*time.Second, "the email", func() (bool, string) { return len(smtpSrv.Messages()) == 1, "" })
	m := smtpSrv.Messages()[0]
	if len(m.To) != 2 || !strings.Contains(m.Data, "Subject: chime: a/mailed failed") || !strings.Contains(m.Data, run) {
		t.Errorf("email to %v:\n%s", m.To, m.Data)
	}
	testenv.Eventually(t, 10*time.Second, "the email recorded sent", func() (bool, string) {
		ns := runNotifications(t, base, run)
		return len(ns) == 1 && ns[0]["channel"] == "email" && ns[0]["status"] == "sent" &&
			ns[0]["target"] == "ops@example.com, Dev <dev@example.com>", fmt.Sprint(ns)
	})
}

// TestPriorityNotifyValidation: a bad priority or notify rule is a 400
// naming the field.
func TestPriorityNotifyValidation(t *testing.T) {
	t.Parallel()
	base := startServer(t, Config{})
	for extra, field := range map[string]string{
		`"priority": 10`: "priority",
		`"priority": -1`: "priority",
		`"notify": [{"on": "sometimes", "webhook": {"url": "http://127.0.0.1:9/"}}]`:                "notify[0].on",
		`"notify": [{"on": "failure"}]`:                                                             "notify[0]",
		`"notify": [{"on": "consecutive_failures", "webhook": {"url": "http://127.0.0.1:9/"}}]`:     "notify[0].threshold",
		`"notify": [{"on": "failure", "webhook": {"url": "ftp://x"}}]`:                              "notify[0].webhook.url",
		`"notify": [{"on": "failure", "email": {"to": ["not an address"]}}]`:                        "notify[0].email.to",
		`"notify": [{"on": "recovery", "threshold": 2, "webhook": {"url": "http://127.0.0.1:9/"}}]`: "notify[0].threshold",
	} {
		code, out := post(t, base+"/api/v1/timers", `{"app": "a", "name": "v", "schedule": "@every 1h",
			"action": {"type": "http", "http": {"url": "http://127.0.0.1:9/"}}, `+extra+`}`)
		e, _ := out["error"].(map[string]any)
		if code != 400 || e["field"] != field {
			t.Errorf("%s: %d %v, want 400 on %s", extra, code, out, field)
		}
	}
	code, out := post(t, base+"/api/v1/timers", `{"app": "a", "name": "d", "schedule": "@every 1h",
		"action": {"type": "http", "http": {"url": "http://127.0.0.1:9/"}}}`)
	if code != 201 || out["priority"] != 5.0 {
		t.Errorf("default priority: %d %v", code, out["priority"])
	}
}

// putJSON sends body with PUT and returns the status and the answer.
func putJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestNotifyAppDefaultsThroughAPI: an app's default rules apply to its
// timers that set none, and not to a timer that sets its own.
func TestNotifyAppDefaultsThroughAPI(t *testing.T) {
	t.Parallel()
	base := startServer(t, Config{})
	recv := newHookReceiver(t)
	var fail atomic.Bool
	fail.Store(true)
	target := newTarget(t, &fail)
	if code, out := putJSON(t, base+"/api/v1/apps/ops/notify", `{"notify": [{"on": "nope"}]}`); code != 400 {
		t.Fatalf("bad defaults: %d %v", code, out)
	}
	code, out := putJSON(t, base+"/api/v1/apps/ops/notify", `{"notify": [{"on": "failure", "webhook": {"url": "`+recv.srv.URL+`/app"}}]}`)
	if code != 200 || len(asList(out["notify"])) != 1 {
		t.Fatalf("put defaults: %d %v", code, out)
	}
	if got := getJSON(t, base+"/api/v1/apps/ops/notify"); len(asList(got["notify"])) != 1 || got["app"] != "ops" {
		t.Fatalf("get defaults: %v", got)
	}
	mk := func(name, notify string) string {
		code, out := post(t, base+"/api/v1/timers", `{"app": "ops", "name": "`+name+`", "schedule": "@every 1h", "retry": {"max_attempts": 1},
			"action": {"type": "http", "http": {"url": "`+target+`"}}`+notify+`}`)
		if code != 201 {
			t.Fatalf("create: %d %v", code, out)
		}
		return out["id"].(string)
	}
	plain := mk("plain", "")
	own := mk("own", `, "notify": [{"on": "recovery", "webhook": {"url": "`+recv.srv.URL+`/own"}}]`)
	r1 := fire(t, base, plain, "failed")
	r2 := fire(t, base, own, "failed")
	testenv.Eventually(t, 10*time.Second, "the app's default webhook", func() (bool, string) {
		ns := runNotifications(t, base, r1)
		return len(ns) == 1 && ns[0]["status"] == "sent" && ns[0]["target"] == recv.srv.URL+"/<redacted>", fmt.Sprint(ns)
	})
	if ns := runNotifications(t, base, r2); len(ns) != 0 {
		t.Errorf("a timer with its own rules got the app's: %v", ns)
	}
}

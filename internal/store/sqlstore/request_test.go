package sqlstore

import (
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// TestDerivedHeaderNames: the headers the stored request leaves out are
// named as the HTTP runner (package action) and package webhook send them.
func TestDerivedHeaderNames(t *testing.T) {
	t.Parallel()
	want := []string{model.HeaderRunID, webhook.HeaderID, model.HeaderTimerID, model.HeaderScheduledAt,
		"User-Agent", model.HeaderAttempt, model.HeaderNode, model.HeaderDueAt, webhook.HeaderTimestamp}
	if len(want) != len(derivedHeaders) {
		t.Fatalf("%d derived headers, want %d", len(derivedHeaders), len(want))
	}
	for i, d := range derivedHeaders {
		if c := http.CanonicalHeaderKey(want[i]); d.name != c {
			t.Errorf("derived header %d = %q, want %q", i, d.name, c)
		}
	}
}

// TestRequestText: the stored form of a request leaves out the headers its
// run's columns give (only those that cannot change for a result that is
// retried), keeps those whose value differs from the column, and reads
// back as the request that was sent; a request stored whole before this
// form reads as it is.
func TestRequestText(t *testing.T) {
	t.Parallel()
	sched := time.Date(2026, 12, 1, 22, 0, 0, 123456789, time.UTC)
	due := sched.Add(7 * time.Millisecond)
	start := due.Add(2 * time.Millisecond)
	sent := func(edit func(h map[string]string)) *model.SentRequest {
		h := map[string]string{
			"X-Chime-Run-Id": "run1", "Webhook-Id": "run1", "X-Chime-Timer-Id": "tmr1",
			"X-Chime-Scheduled-At": sched.Format(time.RFC3339Nano), "X-Chime-Due-At": due.Format(time.RFC3339Nano),
			"X-Chime-Attempt": "1", "X-Chime-Node": "n1", "User-Agent": "chime",
			"Webhook-Timestamp": "1796162400", "Webhook-Signature": "v1,c2lnbmF0dXJl", "Authorization": model.Redacted,
		}
		if edit != nil {
			edit(h)
		}
		return &model.SentRequest{Type: model.ActionHTTP, Method: "POST", URL: "http://h/x", Header: h, Body: `{"a":1}`}
	}
	result := func(req *model.SentRequest) model.Result {
		return model.Result{RunID: "run1", TimerID: "tmr1", Node: "n1", Attempt: 1, Status: model.RunSucceeded,
			StartedAt: start, FinishedAt: start.Add(time.Millisecond), Request: req, ScheduledAt: sched, DueAt: due}
	}
	row := &model.Run{ID: "run1", TimerID: "tmr1", Node: "n1", Attempt: 1, ScheduledAt: sched, DueAt: due, StartedAt: &start}
	for _, tc := range []struct {
		name       string
		res        func() model.Result
		run        *model.Run
		kept, left []string // header values in, and out of, the stored text
	}{
		{name: "finished", res: func() model.Result { return result(sent(nil)) }, run: row,
			kept: []string{"v1,c2lnbmF0dXJl", "Authorization"},
			left: []string{"run1", "tmr1", "n1", "X-Chime", "Webhook-Id", "Webhook-Timestamp", "User-Agent"}},
		{name: "retried", res: func() model.Result {
			r := result(sent(nil))
			r.Status, r.RetryAt = model.RunFailed, start.Add(time.Minute)
			return r
		}, run: func() *model.Run {
			// Claimed again by another node for its next attempt.
			r := *row
			r.Node, r.Attempt, r.DueAt = "n2", 2, start.Add(time.Minute)
			return &r
		}(),
			kept: []string{"X-Chime-Attempt", "X-Chime-Node", "X-Chime-Due-At", "Webhook-Timestamp"},
			left: []string{"run1", "tmr1", "X-Chime-Scheduled-At", "User-Agent"}},
		{name: "values that differ from the row", res: func() model.Result {
			return result(sent(func(h map[string]string) {
				h["X-Chime-Node"], h["Webhook-Timestamp"], h["User-Agent"] = "elsewhere", "1796162401", "mine"
			}))
		}, run: row, kept: []string{"elsewhere", "1796162401", "mine"}, left: []string{"run1", "X-Chime-Due-At"}},
		{name: "instants not told", res: func() model.Result {
			r := result(sent(nil))
			r.ScheduledAt, r.DueAt = time.Time{}, time.Time{}
			return r
		}, run: row, kept: []string{"X-Chime-Scheduled-At", "X-Chime-Due-At"}, left: []string{"run1"}},
		{name: "only derived headers", res: func() model.Result {
			return result(sent(func(h map[string]string) {
				delete(h, "Webhook-Signature")
				delete(h, "Authorization")
			}))
		}, run: row, left: []string{"header"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := tc.res()
			text := requestText(res)
			for _, s := range tc.kept {
				if !strings.Contains(text, s) {
					t.Errorf("stored %s: want %q in it", text, s)
				}
			}
			for _, s := range tc.left {
				if strings.Contains(text, s) {
					t.Errorf("stored %s: want no %q in it", text, s)
				}
			}
			got := rebuildRequest(text, tc.run)
			if got == nil || !maps.Equal(got.Header, res.Request.Header) || got.URL != res.Request.URL ||
				got.Method != res.Request.Method || got.Body != res.Request.Body {
				t.Errorf("read back %+v, want %+v", got, res.Request)
			}
		})
	}
	t.Run("stored whole", func(t *testing.T) {
		t.Parallel()
		want := sent(nil)
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := rebuildRequest(string(b), row); got == nil || !maps.Equal(got.Header, want.Header) {
			t.Errorf("read back %+v, want %+v", got, want)
		}
	})
}

// TestRequestJSON: the stored form of an HTTP request, written by hand, is
// what json.Marshal gives for it byte for byte, whatever its strings hold
// and whichever headers are left out; a request of another kind goes
// through json.Marshal.
func TestRequestJSON(t *testing.T) {
	t.Parallel()
	odd := []string{"", "plain", `q"uote`, `back\slash`, "<html>&amp;", "tab\there\nnew", "\x00\x1f\x7f", "é ünïcode",
		"\u2028\u2029", "bad\xffutf8", "http://u:p@h/x?a=1&b=2"}
	for i, v := range odd {
		for _, derived := range []uint32{0, 1, 1<<2 | 1<<4, 1<<len(derivedHeaders) - 1} {
			req := &model.SentRequest{Type: model.ActionHTTP, Method: v, URL: odd[(i+1)%len(odd)], Body: odd[(i+2)%len(odd)],
				Header: map[string]string{"X-Chime-Run-Id": "run1", "Webhook-Id": v, "User-Agent": "chime", "X-" + v: v,
					"Webhook-Signature": "v1,abc", "A": odd[(i+3)%len(odd)]}}
			if i == 0 {
				req.Header = nil
			}
			want := storedRequest{SentRequest: *req, Derived: derived}
			if derived != 0 && req.Header != nil {
				want.Header = maps.Clone(req.Header)
				for j, d := range derivedHeaders {
					if derived&(1<<j) != 0 {
						delete(want.Header, d.name)
					}
				}
			}
			b, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendRequestJSON(nil, req, derived); string(got) != string(b) {
				t.Errorf("appendRequestJSON(%q, %b)\n = %s\nwant %s", v, derived, got, b)
			}
		}
	}
	handler := model.Result{RunID: "r", Request: &model.SentRequest{Type: model.ActionHandler, Handler: "h", Args: []byte(`{"n":1}`)}}
	if got, want := requestText(handler), `{"type":"handler","handler":"h","args":{"n":1}}`; got != want {
		t.Errorf("requestText of a handler = %s, want %s", got, want)
	}
}

// BenchmarkRequestText is the stored form of a signed callback's request,
// as the recorder writes one per HTTP fire.
func BenchmarkRequestText(b *testing.B) {
	sched := time.Now()
	start := sched.Add(time.Millisecond)
	h := http.Header{}
	h.Set(model.HeaderRunID, "run_abcdefghijklmnop")
	h.Set(webhook.HeaderID, "run_abcdefghijklmnop")
	h.Set(model.HeaderTimerID, "tmr_abcdefghijklmnop")
	h.Set(model.HeaderScheduledAt, sched.UTC().Format(time.RFC3339Nano))
	h.Set(model.HeaderDueAt, sched.UTC().Format(time.RFC3339Nano))
	h.Set(model.HeaderAttempt, "1")
	h.Set(model.HeaderNode, "node-1")
	h.Set("User-Agent", "chime")
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(start.Unix(), 10))
	h.Set(webhook.HeaderSignature, "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=")
	a := &model.HTTPAction{Method: "POST", URL: "http://127.0.0.1:9090/fire"}
	res := model.Result{RunID: "run_abcdefghijklmnop", TimerID: "tmr_abcdefghijklmnop", Node: "node-1", Attempt: 1,
		Status: model.RunSucceeded, StartedAt: start, FinishedAt: start, ScheduledAt: sched, DueAt: sched,
		Request: model.SentHTTP(a, a.Method, a.URL, h, "")}
	b.ReportAllocs()
	for b.Loop() {
		if requestText(res) == "" {
			b.Fatal("no text")
		}
	}
}

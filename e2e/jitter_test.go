package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

// TestJitterThroughAPI: a timer created through the REST API with
// policy.jitter and policy.dst reads them back; each callback carries the
// nominal X-Chime-Scheduled-At and the jittered X-Chime-Due-At, arrives at
// the jittered instant, and the run listing shows both.
func TestJitterThroughAPI(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, nil)
	n := startNode(t, "jitter", nodeConfig{})
	base := n.url("")
	const window = 800 * time.Millisecond
	req := httpTimer("e2e", "jitter", "* * * * * *", "POST", rcv.url("/jitter"), "", nil)
	req["policy"] = map[string]any{"jitter": "800ms", "dst": "both"}
	var created struct {
		ID     string `json:"id"`
		Policy struct {
			Jitter string `json:"jitter"`
			DST    string `json:"dst"`
		} `json:"policy"`
	}
	callJSON(t, "POST", base+"/api/v1/timers", req, http.StatusCreated, &created)
	if created.Policy.Jitter != "800ms" || created.Policy.DST != "both" {
		t.Fatalf("policy read back as %+v", created.Policy)
	}
	waitUntil(t, 20*time.Second, "5 callbacks", func() (bool, string) {
		return len(forTimer(rcv.snapshot(), created.ID)) >= 5, "not yet"
	})
	due := map[string]time.Time{}
	for _, c := range forTimer(rcv.snapshot(), created.ID) {
		d, err := time.Parse(time.RFC3339Nano, c.Header.Get("X-Chime-Due-At"))
		if err != nil || c.ScheduledAt.IsZero() {
			t.Errorf("callback %v: X-Chime-Due-At %q, X-Chime-Scheduled-At %q", c, c.Header.Get("X-Chime-Due-At"), c.ScheduledRaw)
			continue
		}
		if want := c.ScheduledAt.Add(model.JitterOffset(created.ID, c.ScheduledAt, window)); !d.Equal(want) {
			t.Errorf("callback %v: due at %v, want %v (scheduled plus its offset)", c, d, want)
		}
		if c.ScheduledAt.Nanosecond() != 0 || c.RunID != model.RunID(created.ID, c.ScheduledAt) {
			t.Errorf("callback %v: the run id and scheduled_at are not the nominal instant's", c)
		}
		if early := d.Sub(c.Received); early > earlySlack {
			t.Errorf("callback %v arrived %v before its due_at", c, early)
		}
		if late := c.Received.Sub(d); late > maxDelay {
			t.Errorf("callback %v arrived %v after its due_at", c, late)
		}
		due[c.RunID] = d
	}
	var page struct {
		Runs []struct {
			ID          string    `json:"id"`
			ScheduledAt time.Time `json:"scheduled_at"`
			DueAt       time.Time `json:"due_at"`
		} `json:"runs"`
	}
	callJSON(t, "GET", base+"/api/v1/timers/"+created.ID+"/runs?limit=1000", nil, http.StatusOK, &page)
	matched := 0
	for _, r := range page.Runs {
		if d, ok := due[r.ID]; ok {
			matched++
			if !r.DueAt.Equal(d) || r.DueAt.Sub(r.ScheduledAt) >= window || r.DueAt.Before(r.ScheduledAt) {
				t.Errorf("run %s: scheduled_at %v due_at %v, callback said due %v", r.ID, r.ScheduledAt, r.DueAt, d)
			}
		}
	}
	if matched < len(due) {
		t.Errorf("%d of %d called back runs listed", matched, len(due))
	}
}

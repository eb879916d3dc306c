// The stored form of a run's recorded request.

package sqlstore

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// A recorded HTTP request (model.SentRequest) repeats in its headers what
// the run's row holds already: its id (X-Chime-Run-Id and the signature's
// Webhook-Id), timer, instants, attempt and node, and the default
// User-Agent. Stored whole, those made a finished run's row about 660
// bytes instead of about 300: on SQLite, where the runs table is a
// WITHOUT ROWID table clustered by id (migration 0003) whose interior
// pages hold whole rows, that was 1.7 times the leaf pages and 3.7 times
// the interior pages (docs/performance.md, "Row size and the save's
// tail"). The stored form therefore leaves out each such header whose
// value is exactly the one its column gives, and names it in a bit set
// (storedRequest.Derived); reading the run puts it back from the row
// (rebuildRequest), so GET /api/v1/runs/{id} and the UI show the request
// as it was sent. A header whose value differs from its column (a custom
// runner's, or a clock that disagrees) is stored as it is.
//
// The signature (Webhook-Signature) is stored: it cannot be rebuilt
// without the app's secrets, which may have rotated since, and it is what
// a receiver's operator compares.
//
// Caveat: the headers of the attempt's node, attempt, due instant and
// start (X-Chime-Node, X-Chime-Attempt, X-Chime-Due-At, Webhook-Timestamp)
// are left out only for a result that ends the run: a failed attempt that
// is retried keeps its request while the row is claimed again under
// another attempt, node and due instant. The others never change for a
// run. Rows written before this form have no bit set and read as stored.

// A derived header: its canonical name and whether it may change while
// the row lives on (see the caveat above).
type derivedHeader struct {
	name    string
	mutable bool
}

// derivedHeaders are the headers the stored form may leave out, in the
// order of their bits in storedRequest.Derived. Append only: the bits are
// stored.
var derivedHeaders = [...]derivedHeader{
	{"X-Chime-Run-Id", false},
	{"Webhook-Id", false},
	{"X-Chime-Timer-Id", false},
	{"X-Chime-Scheduled-At", false},
	{"User-Agent", false},
	{"X-Chime-Attempt", true},
	{"X-Chime-Node", true},
	{"X-Chime-Due-At", true},
	{"Webhook-Timestamp", true},
}

// storedRequest is the stored JSON of a request: the request without its
// derived headers, and which of derivedHeaders it had.
type storedRequest struct {
	model.SentRequest
	Derived uint32 `json:"d,omitempty"`
}

// runFacts are the columns a derived header is rebuilt from.
type runFacts struct {
	id, timerID, node string
	attempt           int
	scheduled, due    time.Time
	started           time.Time
}

// value returns the value of derived header i for f, and false when f
// does not tell it.
func (f runFacts) value(i int) (string, bool) {
	switch derivedHeaders[i].name {
	case "X-Chime-Run-Id", "Webhook-Id":
		return f.id, f.id != ""
	case "X-Chime-Timer-Id":
		return f.timerID, f.timerID != ""
	case "X-Chime-Scheduled-At":
		return f.scheduled.UTC().Format(time.RFC3339Nano), !f.scheduled.IsZero()
	case "User-Agent":
		return "chime", true
	case "X-Chime-Attempt":
		return strconv.Itoa(f.attempt), true
	case "X-Chime-Node":
		return f.node, f.node != ""
	case "X-Chime-Due-At":
		return f.due.UTC().Format(time.RFC3339Nano), !f.due.IsZero()
	case "Webhook-Timestamp":
		return strconv.FormatInt(f.started.Unix(), 10), !f.started.IsZero()
	}
	return "", false
}

// requestText is the stored form of result r's request: its JSON without
// the headers its row gives (see storedRequest), or "" (none, or one too
// big to keep whole).
func requestText(r model.Result) string {
	if r.Request == nil {
		return ""
	}
	v := storedRequest{SentRequest: *r.Request}
	if len(v.Header) > 0 {
		final := r.RetryAt.IsZero() || r.Status != model.RunFailed
		f := runFacts{id: r.RunID, timerID: r.TimerID, node: r.Node, attempt: r.Attempt,
			scheduled: r.ScheduledAt, due: r.DueAt, started: r.StartedAt}
		var kept map[string]string
		for i, d := range derivedHeaders {
			got, ok := v.Header[d.name]
			if !ok || d.mutable && !final {
				continue
			}
			if want, ok := f.value(i); !ok || got != want {
				continue
			}
			if kept == nil {
				kept = make(map[string]string, len(v.Header))
				for k, hv := range v.Header {
					kept[k] = hv
				}
			}
			delete(kept, d.name)
			v.Derived |= 1 << i
		}
		if kept != nil {
			v.Header = kept
			if len(kept) == 0 {
				v.Header = nil
			}
		}
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > store.MaxResultText {
		return ""
	}
	return string(b)
}

// rebuildRequest decodes the stored request text of run r (requestText)
// and puts back the headers it left out, from r's columns. A text that
// does not decode gives nil.
func rebuildRequest(text string, r *model.Run) *model.SentRequest {
	var v storedRequest
	if json.Unmarshal([]byte(text), &v) != nil {
		return nil
	}
	if v.Derived != 0 {
		f := runFacts{id: r.ID, timerID: r.TimerID, node: r.Node, attempt: r.Attempt,
			scheduled: r.ScheduledAt, due: r.DueAt}
		if r.StartedAt != nil {
			f.started = *r.StartedAt
		}
		if v.Header == nil {
			v.Header = make(map[string]string, len(derivedHeaders))
		}
		for i := range derivedHeaders {
			if v.Derived&(1<<i) == 0 {
				continue
			}
			if val, ok := f.value(i); ok {
				v.Header[derivedHeaders[i].name] = val
			}
		}
	}
	return &v.SentRequest
}

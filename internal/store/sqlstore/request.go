// The stored form of a run's recorded request.

package sqlstore

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
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
	var buf [64]byte
	b, ok := f.appendValue(buf[:0], i)
	return string(b), ok
}

// appendValue appends the value of derived header i for f to dst, and
// reports false when f does not tell it.
func (f runFacts) appendValue(dst []byte, i int) ([]byte, bool) {
	switch derivedHeaders[i].name {
	case "X-Chime-Run-Id", "Webhook-Id":
		return append(dst, f.id...), f.id != ""
	case "X-Chime-Timer-Id":
		return append(dst, f.timerID...), f.timerID != ""
	case "X-Chime-Scheduled-At":
		return f.scheduled.UTC().AppendFormat(dst, time.RFC3339Nano), !f.scheduled.IsZero()
	case "User-Agent":
		return append(dst, "chime"...), true
	case "X-Chime-Attempt":
		return strconv.AppendInt(dst, int64(f.attempt), 10), true
	case "X-Chime-Node":
		return append(dst, f.node...), f.node != ""
	case "X-Chime-Due-At":
		return f.due.UTC().AppendFormat(dst, time.RFC3339Nano), !f.due.IsZero()
	case "Webhook-Timestamp":
		return strconv.AppendInt(dst, f.started.Unix(), 10), !f.started.IsZero()
	}
	return dst, false
}

// requestText is the stored form of result r's request: its JSON without
// the headers its row gives (see storedRequest), or "" (none, or one too
// big to keep whole).
func requestText(r model.Result) string {
	if r.Request == nil {
		return ""
	}
	req := r.Request
	var derived uint32
	if len(req.Header) > 0 {
		final := r.RetryAt.IsZero() || r.Status != model.RunFailed
		f := runFacts{id: r.RunID, timerID: r.TimerID, node: r.Node, attempt: r.Attempt,
			scheduled: r.ScheduledAt, due: r.DueAt, started: r.StartedAt}
		var buf [64]byte
		for i, d := range derivedHeaders {
			got, ok := req.Header[d.name]
			if !ok || d.mutable && !final {
				continue
			}
			if want, ok := f.appendValue(buf[:0], i); ok && string(want) == got {
				derived |= 1 << i
			}
		}
	}
	var b []byte
	if plainHTTP(req) {
		b = appendRequestJSON(make([]byte, 0, requestSize(req)), req, derived)
	} else {
		v := storedRequest{SentRequest: *req, Derived: derived}
		if derived != 0 {
			kept := make(map[string]string, len(req.Header))
			for k, hv := range req.Header {
				kept[k] = hv
			}
			for i, d := range derivedHeaders {
				if derived&(1<<i) != 0 {
					delete(kept, d.name)
				}
			}
			v.Header = kept
			if len(kept) == 0 {
				v.Header = nil
			}
		}
		var err error
		if b, err = json.Marshal(v); err != nil {
			return ""
		}
	}
	if len(b) > store.MaxResultText {
		return ""
	}
	return string(b)
}

// plainHTTP reports whether req has only the fields of an HTTP request
// (type, method, URL, headers, body), which appendRequestJSON writes.
func plainHTTP(req *model.SentRequest) bool {
	return req.Handler == "" && req.Args == nil && req.Command == "" && req.CommandArgs == nil &&
		req.Env == nil && req.Dir == ""
}

// appendRequestJSON appends the JSON of the stored form of an HTTP request
// (plainHTTP) whose derived headers are the bits of derived: what
// json.Marshal gives for its storedRequest, byte for byte (fields in
// their order, empty ones left out, header names sorted, strings escaped
// as encoding/json escapes them), without its reflection and without
// copying the header map: the recorder writes one per HTTP callback.
func appendRequestJSON(b []byte, req *model.SentRequest, derived uint32) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, req.Type)
	if req.Method != "" {
		b = appendJSONString(append(b, `,"method":`...), req.Method)
	}
	if req.URL != "" {
		b = appendJSONString(append(b, `,"url":`...), req.URL)
	}
	var names [24]string
	keys := names[:0]
	for k := range req.Header {
		if derived == 0 || !isDerived(k, derived) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		b = append(b, `,"header":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = appendJSONString(append(b, ':'), req.Header[k])
		}
		b = append(b, '}')
	}
	if req.Body != "" {
		b = appendJSONString(append(b, `,"body":`...), req.Body)
	}
	if derived != 0 {
		b = strconv.AppendUint(append(b, `,"d":`...), uint64(derived), 10)
	}
	return append(b, '}')
}

// isDerived reports whether header k is one of the bits of derived.
func isDerived(k string, derived uint32) bool {
	for i, d := range derivedHeaders {
		if derived&(1<<i) != 0 && d.name == k {
			return true
		}
	}
	return false
}

// appendJSONString appends s as encoding/json writes a string: a string
// of plain characters is copied between quotes, any other is left to
// encoding/json itself (its escapes of control characters, quotes, HTML
// characters, U+2028 and U+2029, invalid UTF-8).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/model"
)

// fire is one callback the receiver got.
type fire struct {
	runID   string
	timerID string
	sched   int64 // X-Chime-Scheduled-At, Unix ns
	recv    int64 // receive time, Unix ns
}

// firstDeliveries returns the first callback of each run, in the order of
// fires, and how many runs were delivered more than once.
func firstDeliveries(fires []fire) (first []fire, duplicated int) {
	seen := make(map[string]int, len(fires))
	for _, f := range fires {
		seen[f.runID]++
		switch seen[f.runID] {
		case 1:
			first = append(first, f)
		case 2:
			duplicated++
		}
	}
	return first, duplicated
}

// fireLog is where a bench run sends its callbacks and reads them back: the
// receiver in the bench process, or a remote one (`chime bench receive`).
// Fires are only appended between resets, so a snapshot is a prefix of any
// later one.
type fireLog interface {
	// fireURL is the URL the timers' HTTP actions POST to.
	fireURL() string
	// count returns how many callbacks were recorded.
	count(ctx context.Context) (int, error)
	// snapshot returns the recorded callbacks, in the order received. The
	// caller must not modify the slice.
	snapshot(ctx context.Context) ([]fire, error)
}

// receiver is an HTTP server that records every callback with its receive
// time. Callbacks are the fires: the delay of a fire is its receive time
// minus its X-Chime-Scheduled-At.
//
// It serves POST /fire (a callback), GET /fires (the recorded callbacks, in
// pages: see serveFires) and DELETE /fires or POST /reset (forget them). The
// bench runs one in process on loopback; `chime bench receive` runs one in a
// process of its own.
type receiver struct {
	mu    sync.Mutex
	fires firesHeld
	bad   int   // callbacks without usable headers
	epoch int64 // incremented by each reset

	srv  *http.Server
	ln   net.Listener
	base string     // http://host:port
	errc chan error // Serve's error, if it fails
}

// startReceiver starts a receiver listening on addr (host:port).
func startReceiver(addr string) (*receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("receiver: listen: %w", err)
	}
	r := &receiver{ln: ln, base: "http://" + ln.Addr().String(), fires: newFiresHeld(), errc: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fire", r.serveFire)
	mux.HandleFunc("GET /fires", r.serveFires)
	mux.HandleFunc("DELETE /fires", r.serveReset)
	mux.HandleFunc("POST /reset", r.serveReset)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		// Serve fails only if the listener breaks; in process, the
		// missing callbacks then show as missed fires.
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.errc <- fmt.Errorf("receiver: serve: %w", err)
		}
	}()
	return r, nil
}

// serveFire records one callback.
func (r *receiver) serveFire(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	id := req.Header.Get(model.HeaderRunID)
	sched, err := time.Parse(time.RFC3339Nano, req.Header.Get(model.HeaderScheduledAt))
	r.mu.Lock()
	if id == "" || err != nil {
		r.bad++
	} else {
		r.fires.add(fire{runID: id, timerID: req.Header.Get(model.HeaderTimerID), sched: sched.UnixNano(), recv: now})
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// wireFire is a fire as GET /fires sends it.
type wireFire struct {
	RunID   string `json:"run_id"`
	TimerID string `json:"timer_id"`
	Sched   int64  `json:"sched_ns"` // X-Chime-Scheduled-At, Unix ns
	Recv    int64  `json:"recv_ns"`  // receive time, Unix ns
}

// firesPage is the body of GET /fires and, without fires, of a reset.
type firesPage struct {
	Fires []wireFire `json:"fires"`
	Next  int        `json:"next"`  // index after the last fire of the page
	Total int        `json:"total"` // fires recorded so far
	Bad   int        `json:"bad"`   // callbacks without usable headers
	Epoch int64      `json:"epoch"` // changes with every reset
}

// maxPage bounds the fires of one GET /fires response.
const maxPage = 20000

// serveFires answers GET /fires?since=N&limit=L with the recorded fires
// from index N (default 0) on, at most L of them (default and at most
// maxPage; 0 for the counts alone). A client reads them all by asking again
// from next until next reaches total, and sees from epoch whether the
// receiver was reset meanwhile.
func (r *receiver) serveFires(w http.ResponseWriter, req *http.Request) {
	since, err := intParam(req, "since", 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	limit, err := intParam(req, "limit", maxPage)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	limit = min(limit, maxPage)
	r.mu.Lock()
	p := firesPage{Total: r.fires.len(), Bad: r.bad, Epoch: r.epoch, Next: since}
	if since < r.fires.len() {
		page := r.fires.slice(since, min(r.fires.len(), since+limit))
		p.Fires = make([]wireFire, len(page))
		for i, f := range page {
			p.Fires[i] = wireFire{RunID: f.runID, TimerID: f.timerID, Sched: f.sched, Recv: f.recv}
		}
		p.Next = since + len(page)
	}
	r.mu.Unlock()
	writeJSON(w, p)
}

// serveReset forgets the recorded fires.
func (r *receiver) serveReset(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	r.fires = newFiresHeld()
	r.bad = 0
	r.epoch++
	p := firesPage{Epoch: r.epoch}
	r.mu.Unlock()
	writeJSON(w, p)
}

// intParam returns the non-negative integer query parameter name of req, or
// def if it is absent.
func intParam(req *http.Request, name string, def int) (int, error) {
	v := req.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: want a non-negative integer, got %q", name, v)
	}
	return n, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (r *receiver) fireURL() string { return r.base + "/fire" }

func (r *receiver) count(context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fires.len(), nil
}

func (r *receiver) snapshot(context.Context) ([]fire, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fires.slice(0, r.fires.len()), nil
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// Receive runs a receiver on addr (host:port; port 0 picks one) until ctx
// ends: the separate receiver process of `chime bench --receiver`. It writes
// the receiver's base URL, which --receiver takes, as a line to w once it
// listens.
func Receive(ctx context.Context, addr string, w io.Writer, log *slog.Logger) error {
	r, err := startReceiver(addr)
	if err != nil {
		return fmt.Errorf("bench receive: %w", err)
	}
	defer r.close()
	if _, err := fmt.Fprintln(w, r.base); err != nil {
		return fmt.Errorf("bench receive: %w", err)
	}
	log.Info("bench receive: listening", "url", r.base)
	select {
	case <-ctx.Done():
	case err := <-r.errc:
		return fmt.Errorf("bench receive: %w", err)
	}
	r.mu.Lock()
	n, bad := r.fires.len(), r.bad
	r.mu.Unlock()
	log.Info("bench receive: stopped", "fires", n, "bad", bad)
	return nil
}

// remoteReceiver reads the fires of a receiver in another process (`chime
// bench receive`) over HTTP. It keeps the fires already read and asks only
// for newer ones.
type remoteReceiver struct {
	base   string // http://host:port
	client *http.Client
	page   int // fires asked for per request

	mu    sync.Mutex
	epoch int64
	fires []fire
}

// newRemoteReceiver checks rawURL, the receiver's base URL, and resets the
// receiver for a new run.
func newRemoteReceiver(ctx context.Context, rawURL string) (*remoteReceiver, error) {
	u, err := url.Parse(rawURL)
	if err == nil && ((u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		err = errors.New("not an http:// URL")
	}
	if err != nil {
		return nil, fmt.Errorf("bench: receiver URL %q: want http://host:port: %w", rawURL, err)
	}
	r := &remoteReceiver{base: strings.TrimSuffix(rawURL, "/"), client: &http.Client{Timeout: 30 * time.Second}, page: maxPage}
	if err := r.reset(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// reset makes the receiver forget its fires.
func (r *remoteReceiver) reset(ctx context.Context) error {
	p, err := r.get(ctx, http.MethodDelete, "/fires")
	if err != nil {
		return fmt.Errorf("bench: reset receiver: %w", err)
	}
	r.mu.Lock()
	r.epoch, r.fires = p.Epoch, nil
	r.mu.Unlock()
	return nil
}

func (r *remoteReceiver) fireURL() string { return r.base + "/fire" }

func (r *remoteReceiver) count(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.get(ctx, http.MethodGet, "/fires?limit=0")
	if err != nil {
		return 0, fmt.Errorf("bench: receiver count: %w", err)
	}
	if p.Epoch != r.epoch {
		return 0, errReceiverReset
	}
	return p.Total, nil
}

func (r *remoteReceiver) snapshot(ctx context.Context) ([]fire, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		p, err := r.get(ctx, http.MethodGet, fmt.Sprintf("/fires?since=%d&limit=%d", len(r.fires), r.page))
		if err != nil {
			return nil, fmt.Errorf("bench: receiver fires: %w", err)
		}
		if p.Epoch != r.epoch || p.Total < len(r.fires) {
			return nil, errReceiverReset
		}
		for _, f := range p.Fires {
			r.fires = append(r.fires, fire{runID: f.RunID, timerID: f.TimerID, sched: f.Sched, recv: f.Recv})
		}
		if len(p.Fires) == 0 || len(r.fires) >= p.Total {
			return slices.Clip(r.fires), nil
		}
	}
}

var errReceiverReset = errors.New("bench: the receiver was reset during the run (another bench using it?)")

// get sends a request without body to the receiver and decodes its answer.
func (r *remoteReceiver) get(ctx context.Context, method, path string) (*firesPage, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	var p firesPage
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return nil, fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return &p, nil
}

// timedRunner wraps the runner of the timers' action (HTTP or handler) and
// records when each action starts, so that a report splits a fire's delay
// into dispatch (claim, pool) and callback (HTTP) parts.
type timedRunner struct {
	next   action.Runner
	mu     sync.Mutex
	starts blocks[[2]int64] // scheduled, started (Unix ns)
}

// Run records the start and performs the action.
func (r *timedRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	r.starts.add([2]int64{run.ScheduledAt.UnixNano(), now})
	r.mu.Unlock()
	return r.next.Run(ctx, run, t)
}

// Lane forwards the wrapped runner's lanes (executor.Laner), so that the
// node sends the bench's callbacks as it sends any: "" when it has none.
func (r *timedRunner) Lane(t *model.Timer) (string, int) {
	if l, ok := r.next.(executor.Laner); ok {
		return l.Lane(t)
	}
	return "", 0
}

// startDelays returns the start delays of actions scheduled in [from, to).
func (r *timedRunner) startDelays(from, to time.Time) Delays {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []int64
	for i := range r.starts.len() {
		s := r.starts.at(i)
		if s[0] >= from.UnixNano() && s[0] < to.UnixNano() {
			ds = append(ds, s[1]-s[0])
		}
	}
	return delays(ds)
}

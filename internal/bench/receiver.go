package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/model"
)

// fire is one callback the receiver got.
type fire struct {
	runID   string
	timerID string
	sched   int64 // X-Chime-Scheduled-At, Unix ns
	recv    int64 // receive time, Unix ns
}

// receiver is an HTTP server on loopback that records every callback with
// its receive time. Callbacks are the fires: the delay of a fire is its
// receive time minus its X-Chime-Scheduled-At.
type receiver struct {
	mu    sync.Mutex
	fires []fire
	bad   int // callbacks without usable headers

	srv *http.Server
	ln  net.Listener
	url string
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: listen: %w", err)
	}
	r := &receiver{ln: ln, url: "http://" + ln.Addr().String() + "/fire", fires: make([]fire, 0, 1<<16)}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// Serve fails only if the listener breaks; the missing
			// callbacks then show as missed fires.
			_ = err
		}
	}()
	return r, nil
}

// ServeHTTP records one callback.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	id := req.Header.Get(executor.HeaderRunID)
	sched, err := time.Parse(time.RFC3339Nano, req.Header.Get(executor.HeaderScheduledAt))
	r.mu.Lock()
	if id == "" || err != nil {
		r.bad++
	} else {
		r.fires = append(r.fires, fire{runID: id, timerID: req.Header.Get(executor.HeaderTimerID), sched: sched.UnixNano(), recv: now})
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// count returns how many callbacks were recorded.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fires)
}

// snapshot returns a copy of the recorded callbacks.
func (r *receiver) snapshot() []fire {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fire(nil), r.fires...)
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// timedRunner wraps the HTTP runner and records when each action starts,
// so that a report splits a fire's delay into dispatch (claim, pool) and
// callback (HTTP) parts.
type timedRunner struct {
	next   executor.Runner
	mu     sync.Mutex
	starts [][2]int64 // scheduled, started (Unix ns)
}

// Run records the start and performs the action.
func (r *timedRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	r.starts = append(r.starts, [2]int64{run.ScheduledAt.UnixNano(), now})
	r.mu.Unlock()
	return r.next.Run(ctx, run, t)
}

// startDelays returns the start delays of actions scheduled in [from, to).
func (r *timedRunner) startDelays(from, to time.Time) Delays {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []int64
	for _, s := range r.starts {
		if s[0] >= from.UnixNano() && s[0] < to.UnixNano() {
			ds = append(ds, s[1]-s[0])
		}
	}
	return delays(ds)
}

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// The bare-client baseline of the herd scenario: what a plain Go HTTP
// client, with none of chime's code in its path, takes to send a herd of
// callbacks to the same receiver on the same machine. It is the floor a
// herd can reach here; the herd scenario reports chime's delays as a ratio
// of it.

// DefaultBaselineConns is Config.BaselineConns's default: the connections
// (and sending goroutines, one per connection) of the bare client. Of 2 to
// 256 for a herd of 1,000 on the 2-core reference machine
// (docs/performance.md, "What is measured"), 4 was the fastest in the first sweep and
// 2 to 16 were within that machine's noise of each other in the second;
// 256, the shape of chime's herd (one request in flight per connection),
// was two to three times slower at the median. On more cores, try more.
const DefaultBaselineConns = 4

// baselineTimerPrefix starts the X-Chime-Timer-ID of the baseline's
// requests, so that the receiver's records tell them from chime's fires.
const baselineTimerPrefix = "baseline-"

// baseline is the bare client: conns goroutines, each with an HTTP
// transport of its own holding one keep-alive connection to the receiver,
// opened and warmed before the first herd. At each instant the goroutines,
// started ahead and waiting on one channel, are released together and
// share the herd's requests, built ahead, through an atomic counter.
type baseline struct {
	url     string
	conns   int
	timers  int
	node    string // X-Chime-Node of the requests: the node's id
	secret  []string
	clients []*http.Client
	errs    atomic.Int64
}

// newBaseline returns a bare client for timers requests per herd to url
// over conns connections, opened and warmed before it returns.
func newBaseline(ctx context.Context, url string, conns, timers int, node string) (*baseline, error) {
	b := &baseline{url: url, conns: conns, timers: timers, node: node, secret: []string{webhook.NewSecret()}}
	for range conns {
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1,
			MaxIdleConnsPerHost: 1,
			MaxConnsPerHost:     1,
			IdleConnTimeout:     5 * time.Minute,
			DisableCompression:  true,
		}
		b.clients = append(b.clients, &http.Client{Transport: tr})
	}
	// Warm every connection: one request each, all at once.
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for _, c := range b.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if err := warm(ctx, c, url); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		b.close()
		return nil, fmt.Errorf("bench: baseline: warm connections: %w", err)
	}
	return b, nil
}

// warm sends one request that the receiver does not record as a fire
// (GET /fires?limit=0, the counts alone) over c.
func warm(ctx context.Context, c *http.Client, fireURL string) error {
	u := fireURL[:len(fireURL)-len("/fire")] + "/fires?limit=0"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func (b *baseline) close() {
	for _, c := range b.clients {
		c.CloseIdleConnections()
	}
}

// requests builds the herd of instant at: one POST per timer with the
// headers chime's callbacks carry (the X-Chime ones, the three signature
// headers with a signature of the same length, User-Agent) and the same
// empty body, so that the receiver reads the same bytes from either.
func (b *baseline) requests(ctx context.Context, at time.Time) ([]*http.Request, error) {
	reqs := make([]*http.Request, b.timers)
	sched := at.UTC().Format(time.RFC3339Nano)
	for i := range reqs {
		timerID := fmt.Sprintf("%s%d", baselineTimerPrefix, i)
		runID := model.RunID(timerID, at)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, http.NoBody)
		if err != nil {
			return nil, fmt.Errorf("bench: baseline: %w", err)
		}
		h := req.Header
		h.Set(model.HeaderTimerID, timerID)
		h.Set(model.HeaderRunID, runID)
		h.Set(model.HeaderScheduledAt, sched)
		h.Set(model.HeaderAttempt, strconv.Itoa(1))
		h.Set(model.HeaderNode, b.node)
		if err := webhook.SetHeaders(h, b.secret, runID, at, nil); err != nil {
			return nil, fmt.Errorf("bench: baseline: %w", err)
		}
		h.Set("User-Agent", "chime")
		reqs[i] = req
	}
	return reqs, nil
}

// fire sends reqs at the instant at: the goroutines start now, wait for
// the instant, and are released together. It returns when every request
// was answered.
func (b *baseline) fire(ctx context.Context, at time.Time, reqs []*http.Request) {
	release := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, c := range b.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			for {
				i := int(next.Add(1)) - 1
				if i >= len(reqs) {
					return
				}
				resp, err := c.Do(reqs[i])
				if err != nil {
					b.errs.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					b.errs.Add(1)
				}
			}
		}()
	}
	t := time.NewTimer(time.Until(at))
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	close(release)
	wg.Wait()
}

// run sends a herd at every instant of instants, building each herd's
// requests lead before its instant; it returns when the last herd was
// sent or ctx ended.
func (b *baseline) run(ctx context.Context, instants []time.Time, lead time.Duration) {
	for _, at := range instants {
		if time.Until(at) > lead {
			t := time.NewTimer(time.Until(at) - lead)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		reqs, err := b.requests(ctx, at)
		if err != nil {
			b.errs.Add(int64(b.timers))
			continue
		}
		if ctx.Err() != nil {
			return
		}
		b.fire(ctx, at, reqs)
	}
}

package executor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// herdSize is the runs of one herd in BenchmarkHTTPHerd.
const herdSize = 1000

// herdReceiver answers 204 to every request, as chime bench's receiver
// does, and notes when each arrived.
type herdReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []time.Time
	// addrs are the connections the current herd came over.
	addrs map[string]bool
	want  int
	done  chan struct{}
	// conns counts the connections accepted.
	conns atomic.Int64
}

func newHerdReceiver(b *testing.B) *herdReceiver {
	r := &herdReceiver{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		now := time.Now()
		r.mu.Lock()
		r.got = append(r.got, now)
		r.addrs[req.RemoteAddr] = true
		if len(r.got) == r.want {
			close(r.done)
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	r.srv.Start()
	b.Cleanup(r.srv.Close)
	return r
}

// expect readies the receiver for n requests; the channel is closed when
// the last arrives.
func (r *herdReceiver) expect(n int) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got, r.want, r.done, r.addrs = r.got[:0], n, make(chan struct{}), map[string]bool{}
	return r.done
}

// delays returns each request's arrival after at, sorted.
func (r *herdReceiver) delays(at time.Time) ([]time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]time.Duration, len(r.got))
	for i, t := range r.got {
		out[i] = t.Sub(at)
	}
	slices.Sort(out)
	return out, len(r.addrs)
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// herdStats accumulates what BenchmarkHTTPHerd reports.
type herdStats struct {
	cpu        time.Duration
	p50, p99   time.Duration
	last       time.Duration
	herds, ops int
	conns      int
}

func (s *herdStats) add(cpu time.Duration, d []time.Duration, conns int) {
	s.conns += conns
	s.cpu += cpu
	s.p50 += d[len(d)/2]
	s.p99 += d[len(d)*99/100]
	s.last += d[len(d)-1]
	s.herds++
	s.ops += len(d)
}

func (s *herdStats) report(b *testing.B, r *herdReceiver) {
	b.ReportMetric(float64(r.conns.Load()), "conns")
	b.ReportMetric(float64(s.conns)/float64(s.herds), "conns/herd")
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(s.herds) }
	b.ReportMetric(float64(s.cpu.Microseconds())/float64(s.ops), "cpu-µs/callback")
	b.ReportMetric(ms(s.p50), "p50-ms")
	b.ReportMetric(ms(s.p99), "p99-ms")
	b.ReportMetric(ms(s.last), "last-ms")
}

// BenchmarkHTTPHerd sends herds of 1,000 signed callbacks due at one
// instant to a receiver on loopback in the same process: "chime" submits
// them, claimed ahead (untimed), to an executor with the node's HTTP runner
// (signing, egress dialer, lanes), metrics and a recorder over an
// in-memory store; "bare" sends the same requests, built ahead, from 4
// goroutines over 4 warm keep-alive connections, as chime bench's
// baseline does. Per callback: the process's CPU (client, receiver and,
// for chime, the recording of the result) from the instant to the last
// result; per herd: the receipt delays after the instant (p50, p99, last),
// averaged over the herds. b.N is rounded up to whole herds.
func BenchmarkHTTPHerd(b *testing.B) {
	b.Run("chime", func(b *testing.B) {
		rcv := newHerdReceiver(b)
		st := &benchStore{
			timer: &model.Timer{ID: "tmr_herd", App: "bench", Timeout: time.Minute, Retry: model.RetryPolicy{MaxAttempts: 1},
				Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: http.MethodPost, URL: rcv.srv.URL + "/fire"}}},
			runs:     map[string]*model.Run{},
			recorded: &sync.WaitGroup{},
		}
		runner := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: egress.Default(), Secrets: action.NewSecretCache(herdSecrets{secret: &model.SigningSecret{App: "bench", Version: 1, Secret: webhook.NewSecret()}}, action.SecretCacheOptions{TTL: time.Hour})})
		e, err := New(Config{Store: st, Index: memindex.New(1), NodeID: "bench-0000",
			Runners: map[string]action.Runner{model.ActionHTTP: runner}, Lease: time.Hour,
			Metrics: metrics.New(nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = e.Stop(ctx)
		})
		var s herdStats
		ctx := context.Background()
		b.ReportAllocs()
		for h := 0; h*herdSize < b.N; h++ {
			b.StopTimer()
			at := time.Now().Add(time.Duration(h) * time.Microsecond)
			entries := make([]index.Entry, herdSize)
			for i := range entries {
				id := model.RunID(st.timer.ID+strconv.Itoa(i), at)
				st.runs[id] = &model.Run{ID: id, TimerID: st.timer.ID, Attempt: 1, Node: "bench-0000", ScheduledAt: at, DueAt: at}
				entries[i] = index.Entry{RunID: id, TimerID: st.timer.ID, DueAt: at}
			}
			crs, err := e.Claim(ctx, entries)
			if err != nil || len(crs) != herdSize {
				b.Fatalf("claim: %d of %d, %v", len(crs), herdSize, err)
			}
			done := rcv.expect(herdSize)
			st.recorded.Add(herdSize)
			b.StartTimer()
			cpu, start := processCPU(), time.Now()
			e.SubmitAll(crs)
			<-done
			st.recorded.Wait()
			cpu = processCPU() - cpu
			d, conns := rcv.delays(start)
			s.add(cpu, d, conns)
		}
		s.report(b, rcv)
	})
	b.Run("bare", func(b *testing.B) {
		rcv := newHerdReceiver(b)
		const conns = 4
		clients := make([]*http.Client, conns)
		for i := range clients {
			clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}
			rcv.expect(1)
			resp, err := clients[i].Get(rcv.srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
		secret := []string{webhook.NewSecret()}
		var s herdStats
		b.ReportAllocs()
		for h := 0; h*herdSize < b.N; h++ {
			b.StopTimer()
			at := time.Now()
			reqs := make([]*http.Request, herdSize)
			for i := range reqs {
				timerID := fmt.Sprintf("tmr_herd%d", i)
				runID := model.RunID(timerID, at)
				req, err := http.NewRequest(http.MethodPost, rcv.srv.URL+"/fire", http.NoBody)
				if err != nil {
					b.Fatal(err)
				}
				hd := req.Header
				hd.Set(model.HeaderTimerID, timerID)
				hd.Set(model.HeaderRunID, runID)
				hd.Set(model.HeaderScheduledAt, at.UTC().Format(time.RFC3339Nano))
				hd.Set(model.HeaderDueAt, at.UTC().Format(time.RFC3339Nano))
				hd.Set(model.HeaderAttempt, "1")
				hd.Set(model.HeaderNode, "bench-0000")
				if err := webhook.SetHeaders(hd, secret, runID, at, nil); err != nil {
					b.Fatal(err)
				}
				hd.Set("User-Agent", "chime")
				reqs[i] = req
			}
			done := rcv.expect(herdSize)
			b.StartTimer()
			cpu, start := processCPU(), time.Now()
			var next atomic.Int64
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Go(func() {
					for {
						i := int(next.Add(1)) - 1
						if i >= len(reqs) {
							return
						}
						resp, err := c.Do(reqs[i])
						if err != nil {
							b.Error(err)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			<-done
			wg.Wait()
			cpu = processCPU() - cpu
			d, conns := rcv.delays(start)
			s.add(cpu, d, conns)
		}
		s.report(b, rcv)
	})
}

// herdSecrets is the store under the node's SecretCache: one secret.
type herdSecrets struct {
	store.SigningSecrets
	secret *model.SigningSecret
}

func (s herdSecrets) ActiveSigningSecrets(context.Context, string, time.Time) ([]*model.SigningSecret, error) {
	return []*model.SigningSecret{s.secret}, nil
}

var _ Store = (*benchStore)(nil)

// DirectedRuns: none are placed on the bench's node.
func (s *benchStore) DirectedRuns(context.Context, string, time.Time, int) ([]*model.Run, error) {
	return nil, nil
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/model"
)

// The api scenario: what the REST API costs by schedule frequency. Two
// classes of timers, every-second and hourly, go through create, update,
// disable and enable in the same run, their requests interleaved so that
// both see the same node (whose every-second timers fire meanwhile); then a
// second phase enables many every-second timers at once and waits for each
// to fire.

const apiMixText = "per class: every-second '* * * * * *' and hourly 'S M * * * *' (S, M spread over the hour), HTTP callbacks, requests interleaved"

// apiClass is one class of the api scenario's timers.
type apiClass struct {
	name string                // as reported
	spec func(i, n int) string // schedule of the i-th of n timers
	// updated is the schedule an update gives the i-th timer: other fires
	// at about the same rate, so that the timer must be replanned however
	// the node tells a change.
	updated func(i, n int) string
}

// Indexes of apiClasses.
const (
	everySecond = 0
	hourly      = 1
)

var apiClasses = [2]apiClass{
	everySecond: {name: "every-second",
		spec:    func(int, int) string { return "* * * * * *" },
		updated: func(int, int) string { return "1-59 * * * * *" }},
	hourly: {name: "hourly",
		spec:    func(i, n int) string { return hourlySpec(i * 3600 / max(n, 1)) },
		updated: func(i, n int) string { return hourlySpec(i*3600/max(n, 1) + 1800) }},
}

// hourlySpec fires at second s of every hour.
func hourlySpec(s int) string {
	s %= 3600
	return fmt.Sprintf("%d %d * * * *", s%60, s/60)
}

// The api scenario's operations, in the order run.
var apiOps = []string{"create", "update", "disable", "enable"}

// APIResult is the outcome of the api scenario.
type APIResult struct {
	TimersPerClass int     `json:"timers_per_class"`
	Concurrency    int     `json:"concurrency"` // requests in flight
	Ops            []APIOp `json:"ops"`         // create, update, disable, enable
	// FireDelay is the fire delay of the every-second timers' fires due
	// while the operations ran; Duplicated counts the runs of those
	// operations' timers delivered more than once.
	FireDelay  Delays             `json:"every_second_fire_delay"`
	Duplicated int                `json:"duplicated"`
	Resources  Resources          `json:"resources"`
	Store      map[string]OpStats `json:"store_ops"`
	EnableMany *EnableManyResult  `json:"enable_many,omitempty"`
}

// APIOp is one operation of the api scenario, per class.
type APIOp struct {
	Op          string    `json:"op"`
	Seconds     float64   `json:"seconds"` // wall time of the operation's requests, both classes
	EverySecond OpLatency `json:"every_second"`
	Hourly      OpLatency `json:"hourly"`
	P99Ratio    float64   `json:"p99_ratio"` // every-second p99 / hourly p99
}

// OpLatency summarises the requests of one operation and class: latency
// in milliseconds, and requests answered per second of the operation's
// wall time.
type OpLatency struct {
	Count     int     `json:"count"`
	Errors    int     `json:"errors"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
	PerSecond float64 `json:"per_second"`
}

// EnableManyResult is the api scenario's second phase: Timers every-second
// timers created disabled, then all enabled through the API.
type EnableManyResult struct {
	Timers        int     `json:"timers"`
	CreateSeconds float64 `json:"create_seconds"` // creating them disabled, through the store (not in the figures)
	// EnableSeconds is the time from the first enable request sent to the
	// last one answered.
	EnableSeconds float64   `json:"enable_seconds"`
	Enable        OpLatency `json:"enable"`
	// Fired is how many of the timers fired at least once; AllFired
	// whether all that were enabled did within enableFireWait of the last
	// enable, and AllFiredSeconds the time from the last enable answered
	// to the last of those first fires received (or to the end of the
	// wait).
	Fired           int     `json:"fired"`
	AllFired        bool    `json:"all_fired"`
	AllFiredSeconds float64 `json:"all_fired_seconds"`
	// FirstFire is, per timer, the time from its enable answered to its
	// first fire received; FirstFireDelay that fire's delay (received −
	// scheduled).
	FirstFire      Delays `json:"first_fire_after_enable"`
	FirstFireDelay Delays `json:"first_fire_delay"`
	Fires          int    `json:"fires"` // callbacks received during the phase
	// AnonMiBAtEnd is the anonymous RSS when the phase ended (every timer
	// fired, or the wait ran out); Resources.PeakAnonMiB is its peak.
	AnonMiBAtEnd float64            `json:"anon_rss_at_end_mib"`
	Resources    Resources          `json:"resources"`
	Store        map[string]OpStats `json:"store_ops"`
}

// enableFireWait bounds the wait, after the last enable, for every enabled
// timer to have fired.
const enableFireWait = 2 * time.Minute

// apiRequestTimeout bounds one API request of the bench.
const apiRequestTimeout = 2 * time.Minute

func runAPI(ctx context.Context, cfg Config) (*APIResult, error) {
	n, err := newNode(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer n.shutdown()
	log := cfg.Logger
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	base, stopAPI, err := serveAPI(n)
	if err != nil {
		return nil, err
	}
	defer stopAPI()
	c := newAPIClient(base, cfg.Concurrency, log)
	defer c.http.CloseIdleConnections()
	res := &APIResult{TimersPerClass: cfg.Timers, Concurrency: cfg.Concurrency}

	stopProf, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopProf != nil {
			stopProf()
		}
	}()
	smp := startSampler(peakProfile(cfg, ".peak"))
	n.store.record(true)
	fired0, err := n.recv.count(ctx)
	if err != nil {
		smp.done()
		return nil, err
	}
	start := time.Now()
	ids, err := res.runOps(ctx, c, cfg.Timers, n.recv.fireURL())
	end := time.Now()
	n.store.record(false)
	res.Store = n.store.stats()
	res.Resources = smp.done()
	if err != nil {
		return nil, err
	}
	log.Info("bench: api: operations done", "seconds", end.Sub(start).Seconds())

	// The fires of the every-second timers due while the operations ran,
	// read after them: reading a remote receiver is no cost of the node.
	fires, err := n.recv.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	mine := map[string]int{}
	for class := range ids {
		for _, id := range ids[class] {
			if id != "" {
				mine[id] = class
			}
		}
	}
	var own []fire
	for _, f := range fires[min(fired0, len(fires)):] {
		if _, ok := mine[f.timerID]; ok {
			own = append(own, f)
		}
	}
	first, dups := firstDeliveries(own)
	res.Duplicated = dups
	var ds []int64
	for _, f := range first {
		if mine[f.timerID] == everySecond && f.sched >= start.UnixNano() && f.sched < end.UnixNano() {
			ds = append(ds, f.recv-f.sched)
		}
	}
	res.FireDelay = delays(ds)

	if cfg.Enable > 0 {
		// The second phase on a node without the first one's fires: its
		// timers disabled (not deleted, which would fail the runs in
		// flight).
		var calls []apiCall
		for class := range ids {
			for _, id := range ids[class] {
				if id != "" {
					calls = append(calls, apiCall{class: class, method: http.MethodPost, path: "/timers/" + id + "/disable"})
				}
			}
		}
		if r := c.do(ctx, calls); r.errors > 0 {
			log.Warn("bench: api: some timers of the first phase were not disabled", "failed", r.errors, "first", r.firstErr)
		}
		n.store.reset()
		if res.EnableMany, err = enableMany(ctx, n, c, cfg.Enable); err != nil {
			return nil, err
		}
	}
	err = stopProf()
	stopProf = nil
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return res, nil
}

// runOps creates timers timers of each class through the API, then updates,
// disables and enables them all, one operation after the other, and
// records each operation in a. It returns the timer ids by class (empty
// where the creation failed).
func (a *APIResult) runOps(ctx context.Context, c *apiClient, timers int, hook string) ([2][]string, error) {
	var ids [2][]string
	for class := range ids {
		ids[class] = make([]string, timers)
	}
	for _, op := range apiOps {
		calls := make([]apiCall, 0, 2*timers)
		// Interleaved, every-second then hourly, so that both classes see
		// the same node at the same moments.
		for i := 0; i < timers; i++ {
			for class, cl := range apiClasses {
				name := fmt.Sprintf("api-%s-%d", cl.name, i)
				call := apiCall{class: class}
				id := ids[class][i]
				switch op {
				case "create":
					call.method, call.path = http.MethodPost, "/timers"
					call.body = apiTimerBody(name, cl.spec(i, timers), hook)
					call.answer = func(b []byte) error {
						var t api.Timer
						if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
							return fmt.Errorf("create answered without a timer id: %.200s", b)
						}
						ids[class][i] = t.ID
						return nil
					}
				case "update":
					call.method, call.path = http.MethodPut, "/timers/"+id
					call.body = apiTimerBody(name, cl.updated(i, timers), hook)
				default: // disable, enable
					call.method, call.path = http.MethodPost, "/timers/"+id+"/"+op
				}
				if op != "create" && id == "" {
					call.skip = true // its creation failed
				}
				calls = append(calls, call)
			}
		}
		r := c.do(ctx, calls)
		if ctx.Err() != nil {
			return ids, errInterrupted
		}
		o := APIOp{Op: op, Seconds: r.wall.Seconds(), EverySecond: r.latency(everySecond), Hourly: r.latency(hourly)}
		if o.Hourly.P99 > 0 {
			o.P99Ratio = o.EverySecond.P99 / o.Hourly.P99
		}
		a.Ops = append(a.Ops, o)
		if r.firstErr != nil {
			c.warn(op, r)
		}
	}
	return ids, nil
}

// enableMany creates n every-second timers disabled through the store,
// then enables them all through the API and waits for each to fire once.
func enableMany(ctx context.Context, nd *node, c *apiClient, n int) (*EnableManyResult, error) {
	log := nd.cfg.Logger
	res := &EnableManyResult{Timers: n}
	fc, err := startFireCounter()
	if err != nil {
		return nil, err
	}
	defer fc.close()
	t0 := time.Now()
	timers := make([]*model.Timer, n)
	for i := range timers {
		t := nd.timer(fmt.Sprintf("enable-%d", i), "* * * * * *", t0)
		t.Enabled = false
		t.Action = model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: fc.fireURL()}}
		timers[i] = t
	}
	if err := nd.createTimers(ctx, timers); err != nil {
		return nil, err
	}
	res.CreateSeconds = time.Since(t0).Seconds()
	log.Info("bench: api: timers created disabled", "timers", n, "seconds", res.CreateSeconds)

	smp := startSampler(peakProfile(nd.cfg, ".enable.peak"))
	nd.store.record(true)
	calls := make([]apiCall, n)
	for i, t := range timers {
		calls[i] = apiCall{class: everySecond, method: http.MethodPost, path: "/timers/" + t.ID + "/enable"}
	}
	r := c.do(ctx, calls)
	if ctx.Err() != nil {
		smp.done()
		return nil, errInterrupted
	}
	if r.firstErr != nil {
		c.warn("enable (second phase)", r)
	}
	res.EnableSeconds = r.wall.Seconds()
	res.Enable = r.latency(everySecond)
	var last time.Time // the last enable answered
	enabled := 0
	for _, cr := range r.calls {
		if !cr.failed {
			enabled++
			last = maxTime(last, cr.end)
		}
	}
	log.Info("bench: api: timers enabled", "timers", enabled, "seconds", res.EnableSeconds)
	res.AllFired = waitFor(ctx, enableFireWait, func() bool { return fc.timers() >= enabled })
	waited := time.Since(last)
	nd.store.record(false)
	res.Store = nd.store.stats()
	res.Resources = smp.done()
	res.AnonMiBAtEnd = mib(anonRSS())
	firsts, total := fc.snapshot()
	// The timers fire until the node stops: stop it before their receiver.
	nd.stopEngine()

	res.Fires = total
	res.Fired = len(firsts)
	var after, delay []int64
	var lastFirst int64
	for i, t := range timers {
		f, ok := firsts[t.ID]
		if !ok {
			continue
		}
		lastFirst = max(lastFirst, f.recv)
		delay = append(delay, f.recv-f.sched)
		if !r.calls[i].failed {
			after = append(after, f.recv-r.calls[i].end.UnixNano())
		}
	}
	res.FirstFire, res.FirstFireDelay = delays(after), delays(delay)
	res.AllFiredSeconds = waited.Seconds()
	if res.AllFired && !last.IsZero() {
		res.AllFiredSeconds = max(0, float64(lastFirst-last.UnixNano())/1e9)
	}
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// apiTimerBody is the JSON of a timer with an HTTP action to hook, as the
// API takes it.
func apiTimerBody(name, spec, hook string) []byte {
	b, _ := json.Marshal(api.Timer{
		App: "bench", Name: name, Schedule: spec, Timezone: "UTC",
		Action:  &api.Action{Type: model.ActionHTTP, HTTP: &api.HTTPAction{Method: "POST", URL: hook}},
		Timeout: "10s", Retry: &api.Retry{MaxAttempts: 1, Backoff: "1s"},
	})
	return b
}

// serveAPI serves the node's REST API on loopback, built as `chime serve`
// builds it (without its access settings: auth is off with no token), and
// returns its base URL (http://127.0.0.1:port/api/v1) and a function that
// stops it.
func serveAPI(n *node) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: api listen: %w", err)
	}
	h := api.New(api.Config{Store: n.store, Engine: n.eng, Clock: n.eng.Clock(), Logger: n.cfg.Logger,
		HandlerExists: n.node.HandlerExists, ValidateArgs: n.node.ValidateArgs}).Handler()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/api/v1", func() { srv.Close() }, nil
}

// apiClient sends the api scenario's requests, a fixed number in flight.
type apiClient struct {
	base   string
	http   *http.Client
	conc   int
	logger *slog.Logger
}

func newAPIClient(base string, conc int, log *slog.Logger) *apiClient {
	// As many idle connections as requests in flight: the default two per
	// host would open (and leave in TIME_WAIT) a connection per request.
	tr := &http.Transport{MaxIdleConns: 2 * conc, MaxIdleConnsPerHost: 2 * conc, IdleConnTimeout: time.Minute}
	return &apiClient{base: base, conc: conc, logger: log, http: &http.Client{Timeout: apiRequestTimeout, Transport: tr}}
}

// apiCall is one request: its class, and what to send.
type apiCall struct {
	class  int
	method string
	path   string // under the base URL
	body   []byte // JSON; nil for none
	// answer, when set, reads the body of a 2xx answer; its error counts
	// the call as failed.
	answer func([]byte) error
	skip   bool // not sent, counted as failed (the timer it is for does not exist)
}

// callResult is how one call went.
type callResult struct {
	ns     int64     // latency
	end    time.Time // when the answer was read
	failed bool
}

// callResults are the results of a batch of calls, in the calls' order.
type callResults struct {
	calls []callResult
	class []int
	wall  time.Duration

	mu       sync.Mutex
	firstErr error
	errors   int
}

// fail counts a failed call.
func (r *callResults) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors++
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// failed returns how many calls failed so far.
func (r *callResults) failed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}

// latency summarises the calls of class: latencies of the calls sent
// (failed ones too: they took that long), errors, and answers per second of
// the batch's wall time.
func (r *callResults) latency(class int) OpLatency {
	var ns []int64
	errs, ok := 0, 0
	for i, cr := range r.calls {
		if r.class[i] != class {
			continue
		}
		if cr.failed {
			errs++
		} else {
			ok++
		}
		if cr.ns > 0 {
			ns = append(ns, cr.ns)
		}
	}
	d := delays(ns)
	l := OpLatency{Count: d.Count, Errors: errs, P50: d.P50, P90: d.P90, P99: d.P99, Max: d.Max}
	if r.wall > 0 {
		l.PerSecond = float64(ok) / r.wall.Seconds()
	}
	return l
}

// do sends calls in order with c.conc in flight and returns how each went.
func (c *apiClient) do(ctx context.Context, calls []apiCall) *callResults {
	r := &callResults{calls: make([]callResult, len(calls)), class: make([]int, len(calls))}
	for i, call := range calls {
		r.class[i] = call.class
	}
	var next, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		// A long batch says how far it is, with -v.
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				c.logger.Info("bench: api: requests answered", "done", done.Load(), "of", len(calls), "failed", r.failed())
			}
		}
	}()
	defer close(stop)
	for w := 0; w < c.conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(calls) {
					return
				}
				cr, err := c.send(ctx, calls[i])
				r.calls[i] = cr
				done.Add(1)
				if err != nil {
					r.fail(err)
				}
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(start)
	return r
}

// progressEvery is how often a batch of requests logs its progress.
const progressEvery = 30 * time.Second

// send makes one call and times it.
func (c *apiClient) send(ctx context.Context, call apiCall) (callResult, error) {
	if call.skip {
		return callResult{failed: true}, errors.New("not sent: the timer was not created")
	}
	var body io.Reader
	if call.body != nil {
		body = bytes.NewReader(call.body)
	}
	req, err := http.NewRequestWithContext(ctx, call.method, c.base+call.path, body)
	if err != nil {
		return callResult{failed: true}, err
	}
	if call.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	var b []byte
	if err == nil {
		b, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	end := time.Now()
	cr := callResult{ns: end.Sub(start).Nanoseconds(), end: end}
	switch {
	case err != nil:
	case resp.StatusCode/100 != 2:
		err = fmt.Errorf("%s %s: %s: %.300s", call.method, call.path, resp.Status, strings.TrimSpace(string(b)))
	case call.answer != nil:
		err = call.answer(b)
	}
	cr.failed = err != nil
	return cr, err
}

// warn logs the failed calls of an operation.
func (c *apiClient) warn(op string, r *callResults) {
	c.logger.Warn("bench: api: requests failed", "op", op, "failed", r.errors, "first", r.firstErr)
}

// fireCounter is the receiver of the second phase: it keeps the first fire
// of each timer and counts the others, so that thousands of timers firing
// every second for minutes do not fill the bench's memory (which is the
// node's: the figure of that phase) with callbacks.
type fireCounter struct {
	mu    sync.Mutex
	first map[string]fire // timer id → its first fire
	total int

	srv  *http.Server
	base string
}

func startFireCounter() (*fireCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: fire counter: listen: %w", err)
	}
	fc := &fireCounter{first: map[string]fire{}, base: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fire", fc.serveFire)
	fc.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go fc.srv.Serve(ln)
	return fc, nil
}

func (fc *fireCounter) serveFire(w http.ResponseWriter, req *http.Request) {
	now := time.Now().UnixNano()
	id := req.Header.Get(model.HeaderTimerID)
	sched, err := time.Parse(time.RFC3339Nano, req.Header.Get(model.HeaderScheduledAt))
	fc.mu.Lock()
	fc.total++
	if _, seen := fc.first[id]; !seen && id != "" && err == nil {
		fc.first[id] = fire{runID: req.Header.Get(model.HeaderRunID), timerID: id, sched: sched.UnixNano(), recv: now}
	}
	fc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (fc *fireCounter) fireURL() string { return fc.base + "/fire" }

// timers returns how many timers have fired.
func (fc *fireCounter) timers() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.first)
}

// snapshot returns the first fire of each timer and the callbacks counted.
func (fc *fireCounter) snapshot() (map[string]fire, int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	m := make(map[string]fire, len(fc.first))
	for k, v := range fc.first {
		m[k] = v
	}
	return m, fc.total
}

func (fc *fireCounter) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = fc.srv.Shutdown(ctx)
}

// The targets the api scenario reports against: what a save costs
// (docs/performance.md, "Current figures").
const (
	targetP99MS      = 20.0             // every operation, every class
	targetP99Ratio   = 1.5              // every-second p99 / hourly p99
	targetEnableN    = 10000            // timers enabled at once …
	targetEnableTime = 60 * time.Second // … within this
)

// rows writes the api scenario's results as rows of the report's table
// (row and delay are the table's own).
func (a *APIResult) rows(row func(k, format string, args ...any), delay func(string, Delays)) {
	row("requests", "%d in flight through the REST API on loopback, %d timers per class, classes interleaved", a.Concurrency, a.TimersPerClass)
	delay("fire delay (every-second timers, during the operations)", a.FireDelay)
	row("duplicated", "%d", a.Duplicated)
	resRows(row, "operations", a.Resources)
	if e := a.EnableMany; e != nil {
		row("enable many", "%d every-second timers, created disabled through the store (%.1f s), then enabled through the API", e.Timers, e.CreateSeconds)
		row("enable", "all in %.1f s (%.0f/s): p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms  (n=%d, errors %d)",
			e.EnableSeconds, e.Enable.PerSecond, e.Enable.P50, e.Enable.P90, e.Enable.P99, e.Enable.Max, e.Enable.Count, e.Enable.Errors)
		switch {
		case e.AllFired && e.AllFiredSeconds == 0:
			row("fired", "all %d at least once by the time the last enable was answered", e.Fired)
		case e.AllFired:
			row("fired", "all %d at least once, the last %.2f s after the last enable", e.Fired, e.AllFiredSeconds)
		default:
			row("fired", "%d of %d at least once, %.0f s after the last enable (the wait's end)", e.Fired, e.Timers-e.Enable.Errors, e.AllFiredSeconds)
		}
		delay("first fire after enable", e.FirstFire)
		delay("first fire delay", e.FirstFireDelay)
		row("callbacks", "%d during the phase", e.Fires)
		resRows(row, "enable phase", e.Resources)
		row("anonymous RSS at end", "%.0f MiB", e.AnonMiBAtEnd)
	}
	row("targets", "%s", strings.Join(a.targets(), "; "))
}

// resRows writes the resources of a phase.
func resRows(row func(k, format string, args ...any), phase string, x Resources) {
	row("cpu ("+phase+")", "%.1f s (%.2f cores)", x.CPUSeconds, x.CPUCores)
	row("memory ("+phase+")", "peak RSS %.0f MiB (anonymous %.0f MiB at +%.0f s), peak Go %.0f MiB, peak live heap %.0f MiB (at +%.0f s), live heap at end %.0f MiB",
		x.PeakRSSMiB, x.PeakAnonMiB, x.PeakAnonAt, x.PeakGoMiB, x.PeakLiveMiB, x.PeakLiveAt, x.HeapMiB)
}

// targets says how the figures compare with the targets above.
func (a *APIResult) targets() []string {
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "missed"
	}
	var worst, worstRatio, worstHourly struct {
		v    float64
		what string
	}
	for _, o := range a.Ops {
		for _, c := range []struct {
			name string
			l    OpLatency
		}{{apiClasses[everySecond].name, o.EverySecond}, {apiClasses[hourly].name, o.Hourly}} {
			if c.l.P99 >= worst.v {
				worst.v, worst.what = c.l.P99, o.Op+" "+c.name
			}
		}
		if o.P99Ratio >= worstRatio.v {
			worstRatio.v, worstRatio.what = o.P99Ratio, o.Op
		}
		if o.Hourly.P99 >= worstHourly.v {
			worstHourly.v, worstHourly.what = o.Hourly.P99, o.Op
		}
	}
	out := []string{
		fmt.Sprintf("p99 <= %.0f ms: %s (worst %s %.1f ms)", targetP99MS, yes(worst.v <= targetP99MS), worst.what, worst.v),
		// The classes share the node (on SQLite, one writer): a slow
		// every-second class slows the hourly one too, and the ratio
		// alone would hide it.
		fmt.Sprintf("every-second p99 <= %.1fx hourly: %s (worst %s %.2fx; hourly p99 up to %.1f ms, %s)", targetP99Ratio,
			yes(worstRatio.v <= targetP99Ratio), worstRatio.what, worstRatio.v, worstHourly.v, worstHourly.what),
	}
	if e := a.EnableMany; e != nil {
		s := fmt.Sprintf("enable %d in < %.0f s: %s (%.1f s)", targetEnableN, targetEnableTime.Seconds(),
			yes(e.EnableSeconds < targetEnableTime.Seconds() && e.Enable.Errors == 0), e.EnableSeconds)
		if e.Timers != targetEnableN {
			s = fmt.Sprintf("enable %d in < %.0f s: not measured (%d enabled in %.1f s)", targetEnableN, targetEnableTime.Seconds(), e.Timers, e.EnableSeconds)
		}
		out = append(out, s)
	}
	return out
}

// writeTables writes the per-operation table and the store calls of each
// phase, after the report's table.
func (a *APIResult) writeTables(w io.Writer) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tclass\tp50 ms\tp90 ms\tp99 ms\tmax ms\treq/s\terrors\tp99 ratio\t")
	for _, o := range a.Ops {
		for class, l := range []OpLatency{o.EverySecond, o.Hourly} {
			ratio := ""
			if class == everySecond {
				ratio = fmt.Sprintf("%.2f", o.P99Ratio)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%d\t%s\t\n",
				o.Op, apiClasses[class].name, l.P50, l.P90, l.P99, l.Max, l.PerSecond, l.Errors, ratio)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeOps(w, "operations", a.Store); err != nil {
		return err
	}
	if a.EnableMany != nil {
		return writeOps(w, "enable phase", a.EnableMany.Store)
	}
	return nil
}

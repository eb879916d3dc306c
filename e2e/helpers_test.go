package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

// chimeBin is the binary that TestMain builds.
var chimeBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("CHIME_E2E_BIN"); bin != "" {
		// Test a given binary (for example an older build, to bisect).
		chimeBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "chime-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	chimeBin = filepath.Join(dir, "chime")
	cmd := exec.Command("go", "build", "-o", chimeBin, "./cmd/chime")
	cmd.Dir = root
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/chime in %s: %v\n", root, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %v\n", chimeBin, time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// moduleRoot returns the directory of go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// waitUntil is testenv.Eventually: it polls cond until it holds and fails
// the test with desc (and the last detail cond returned) when the deadline
// passes.
func waitUntil(t testing.TB, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, timeout, desc, cond)
}

// eventually is testenv.Poll: it polls cond until it holds or the timeout
// passes, and returns whether it held and the last detail cond returned:
// for a condition whose failure the test reports with t.Errorf and goes on.
func eventually(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	return testenv.Poll(timeout, cond)
}

// ---------------------------------------------------------------------------
// Nodes

// nodeConfig says how to start a node. Zero fields take test defaults: a
// temp data dir and a SQLite file in it.
type nodeConfig struct {
	DataDir string
	DB      string
	Redis   string
	NodeID  string
	Extra   []string // more flags
	Env     []string // more environment variables (KEY=value), after the test's own
}

// node is one chime serve process; it can be stopped and started again on
// the same port, data dir and database.
type node struct {
	t       testing.TB
	name    string
	addr    string // 127.0.0.1:port
	args    []string
	env     []string
	logPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current process has exited
	waitErr error
}

// startNode starts a node and waits until it is ready. The node is killed
// at the end of the test; if the test failed, its log is printed.
func startNode(t testing.TB, name string, cfg nodeConfig) *node {
	t.Helper()
	n := launchNode(t, name, cfg)
	n.waitReady(30 * time.Second)
	return n
}

// launchNode is startNode without the wait for /readyz: for a node that is
// not meant to become ready (see waitAnswering).
func launchNode(t testing.TB, name string, cfg nodeConfig) *node {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(t.TempDir(), name)
	}
	if cfg.DB == "" {
		cfg.DB = "sqlite://" + filepath.Join(cfg.DataDir, "chime.db")
	}
	n := &node{
		t:       t,
		name:    name,
		addr:    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		env:     cfg.Env,
		logPath: filepath.Join(t.TempDir(), name+".log"),
	}
	n.args = []string{"serve", "--listen", n.addr, "--data-dir", cfg.DataDir, "--db", cfg.DB}
	if cfg.Redis != "" {
		n.args = append(n.args, "--redis", cfg.Redis)
	}
	if cfg.NodeID != "" {
		n.args = append(n.args, "--node-id", cfg.NodeID)
	}
	n.args = append(n.args, cfg.Extra...)
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			n.dumpLog()
		}
	})
	n.start()
	return n
}

// start starts the process (again) with the same arguments; the log file is
// appended to.
func (n *node) start() {
	n.t.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatalf("%s: open log: %v", n.name, err)
	}
	fmt.Fprintf(logf, "==== e2e: %s start %s%s %s\n", time.Now().Format(time.RFC3339Nano),
		strings.Join(append(slices.Clone(n.env), ""), " "), chimeBin, strings.Join(n.args, " "))
	cmd := exec.Command(chimeBin, n.args...)
	if len(n.env) > 0 {
		cmd.Env = append(os.Environ(), n.env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.t.Fatalf("%s: start: %v", n.name, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.exited, n.waitErr = cmd, exited, nil
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.waitErr = err
		n.mu.Unlock()
		close(exited)
	}()
}

// running reports whether the current process is still alive.
func (n *node) running() bool {
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// waitReady polls /readyz until it answers 200.
func (n *node) waitReady(timeout time.Duration) {
	n.t.Helper()
	c := &http.Client{Timeout: time.Second}
	waitUntil(n.t, timeout, n.name+" /readyz", func() (bool, string) {
		if !n.running() {
			n.mu.Lock()
			err := n.waitErr
			n.mu.Unlock()
			n.t.Fatalf("%s exited before it was ready: %v\n%s", n.name, err, n.logTail(40))
		}
		resp, err := c.Get(n.url("/readyz"))
		if err != nil {
			return false, err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, body)
	})
}

// waitAnswering polls /readyz until it answers at all (any status) and
// returns that answer.
func (n *node) waitAnswering(timeout time.Duration) (int, string) {
	n.t.Helper()
	c := &http.Client{Timeout: time.Second}
	var code int
	var body string
	waitUntil(n.t, timeout, n.name+" /readyz to answer", func() (bool, string) {
		if !n.running() {
			n.mu.Lock()
			err := n.waitErr
			n.mu.Unlock()
			n.t.Fatalf("%s exited: %v\n%s", n.name, err, n.logTail(40))
		}
		resp, err := c.Get(n.url("/readyz"))
		if err != nil {
			return false, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, string(b)
		return true, ""
	})
	return code, body
}

// stop sends sig and waits for the process to exit.
func (n *node) stop(sig syscall.Signal) {
	n.t.Helper()
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Signal(sig); err != nil {
		n.t.Logf("%s: signal %v: %v", n.name, sig, err)
	}
	select {
	case <-exited:
	case <-time.After(45 * time.Second):
		cmd.Process.Kill()
		<-exited
		n.t.Errorf("%s did not exit within 45s of %v; killed", n.name, sig)
	}
	n.mu.Lock()
	err := n.waitErr
	n.mu.Unlock()
	if sig == syscall.SIGTERM && err != nil {
		n.t.Errorf("%s: exit after SIGTERM: %v (want a clean exit)", n.name, err)
	}
}

// kill kills the process if it still runs (clean-up).
func (n *node) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	cmd.Process.Kill()
	<-exited
}

func (n *node) url(path string) string { return "http://" + n.addr + path }

func (n *node) logTail(lines int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = append([]string{fmt.Sprintf("... (%d lines before)", len(all)-lines)}, all[len(all)-lines:]...)
	}
	return strings.Join(all, "\n")
}

func (n *node) dumpLog() {
	n.t.Logf("---- log of %s (%s) ----\n%s\n---- end of %s log ----", n.name, n.logPath, n.logTail(400), n.name)
}

// ---------------------------------------------------------------------------
// REST API

var apiClient = &http.Client{Timeout: 10 * time.Second}

// call sends a request with a JSON body (a string is sent as is; nil sends
// no body) and returns the status and the answer's body.
func call(t testing.TB, method, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("marshal request: %v", err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, url, err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	return resp.StatusCode, data
}

// callJSON is call that wants status want and decodes the answer into out.
func callJSON(t testing.TB, method, url string, body any, want int, out any) {
	t.Helper()
	code, data := call(t, method, url, body)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, url, code, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, data, err)
		}
	}
}

type timerResp struct {
	ID            string      `json:"id"`
	App           string      `json:"app"`
	Name          string      `json:"name"`
	Schedule      string      `json:"schedule"`
	CreatedAt     time.Time   `json:"created_at"`
	NextFireTimes []time.Time `json:"next_fire_times"`
}

type runResp struct {
	ID          string     `json:"id"`
	TimerID     string     `json:"timer_id"`
	ScheduledAt time.Time  `json:"scheduled_at"`
	Status      string     `json:"status"`
	Attempt     int        `json:"attempt"`
	StartedAt   *time.Time `json:"started_at"`
	Node        string     `json:"node"`
	Error       string     `json:"error"`
}

type nodeResp struct {
	ID     string   `json:"id"`
	Addr   string   `json:"addr"`
	Slices []string `json:"slices"`
}

// httpTimer returns a timer request whose action is an HTTP callback.
func httpTimer(app, name, schedule, method, url, body string, header map[string]string) map[string]any {
	h := map[string]any{"method": method, "url": url}
	if body != "" {
		h["body"] = body
	}
	if header != nil {
		h["header"] = header
	}
	return map[string]any{
		"app": app, "name": name, "schedule": schedule,
		"action": map[string]any{"type": "http", "http": h},
	}
}

func createTimer(t testing.TB, base string, req map[string]any) timerResp {
	t.Helper()
	var tm timerResp
	callJSON(t, "POST", base+"/api/v1/timers", req, http.StatusCreated, &tm)
	if tm.ID == "" {
		t.Fatalf("create timer %v: answer has no id", req["name"])
	}
	return tm
}

// timerRuns lists all of a timer's runs (every page).
func timerRuns(t testing.TB, base, timerID string) []runResp {
	t.Helper()
	var all []runResp
	cursor := ""
	for {
		var page struct {
			Runs       []runResp `json:"runs"`
			NextCursor string    `json:"next_cursor"`
		}
		u := base + "/api/v1/timers/" + timerID + "/runs?limit=1000"
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		callJSON(t, "GET", u, nil, http.StatusOK, &page)
		all = append(all, page.Runs...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// ---------------------------------------------------------------------------
// Receiver

// callback is one HTTP callback as the receiver saw it.
type callback struct {
	TimerID      string
	RunID        string
	Node         string // X-Chime-Node
	ScheduledRaw string
	ScheduledAt  time.Time // zero if X-Chime-Scheduled-At did not parse
	Attempt      int       // 0 if X-Chime-Attempt did not parse
	Method       string
	Path         string
	Body         string
	Header       http.Header
	Received     time.Time
	// Ctx is the request's context, done when the sender gives up (or the
	// receiver closes): a respond func that holds a callback open waits on
	// it too.
	Ctx context.Context
}

// Delay is how late the callback arrived after its nominal instant.
func (c callback) Delay() time.Duration { return c.Received.Sub(c.ScheduledAt) }

func (c callback) String() string {
	return fmt.Sprintf("timer %s run %s scheduled %s attempt %d node %q received %s",
		c.TimerID, c.RunID, c.ScheduledRaw, c.Attempt, c.Node, c.Received.Format("15:04:05.000"))
}

// receiver records every callback it gets. respond, if set, chooses the
// status to answer (default 200).
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	calls   []callback
	respond func(c callback, nthForRun int) int
}

func newReceiver(t testing.TB, respond func(c callback, nthForRun int) int) *receiver {
	r := &receiver{respond: respond}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	c := callback{
		TimerID:      req.Header.Get("X-Chime-Timer-ID"),
		RunID:        req.Header.Get("X-Chime-Run-ID"),
		Node:         req.Header.Get("X-Chime-Node"),
		ScheduledRaw: req.Header.Get("X-Chime-Scheduled-At"),
		Method:       req.Method,
		Path:         req.URL.Path,
		Body:         string(body),
		Header:       req.Header.Clone(),
		Received:     now,
		Ctx:          req.Context(),
	}
	if ts, err := time.Parse(time.RFC3339Nano, c.ScheduledRaw); err == nil {
		c.ScheduledAt = ts
	}
	if a, err := strconv.Atoi(req.Header.Get("X-Chime-Attempt")); err == nil {
		c.Attempt = a
	}
	r.mu.Lock()
	nth := 1
	for _, p := range r.calls {
		if p.RunID == c.RunID {
			nth++
		}
	}
	r.calls = append(r.calls, c)
	respond := r.respond
	r.mu.Unlock()
	code := http.StatusOK
	if respond != nil {
		code = respond(c, nth)
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, "e2e %d", code)
}

func (r *receiver) url(path string) string { return r.srv.URL + path }

// snapshot returns a copy of the callbacks so far.
func (r *receiver) snapshot() []callback {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// forTimer returns the callbacks of one timer, in arrival order.
func forTimer(calls []callback, timerID string) []callback {
	var out []callback
	for _, c := range calls {
		if c.TimerID == timerID {
			out = append(out, c)
		}
	}
	return out
}

// byInstant groups the callbacks by (timer, scheduled instant).
type fireKey struct {
	timer string
	at    int64 // UnixNano of the scheduled instant
}

// percentile returns the p-th percentile (0..100) of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}

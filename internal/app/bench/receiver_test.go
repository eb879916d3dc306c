package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/chimehq/chime/model"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startTestReceiver runs Receive, the code of `chime bench receive`, on
// 127.0.0.1:0 until the test ends, and returns the URL it prints.
func startTestReceiver(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Receive(ctx, "127.0.0.1:0", pw, slog.New(slog.NewTextHandler(io.Discard, nil)))
		pw.Close()
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, pr)
		close(lines)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Receive: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Receive did not return 10s after its context ended")
		}
	})
	select {
	case u, ok := <-lines:
		if !ok || !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("Receive printed %q, want its URL", u)
		}
		return u
	case err := <-done:
		t.Fatalf("Receive returned before printing its URL: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Receive printed no URL within 10s")
	}
	return ""
}

// TestRemoteReceiver runs a short steady run with Config.Receiver pointing
// at a receiver started as `chime bench receive` starts one, and checks that
// every fire due in the window arrived there once.
func TestRemoteReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("bench with a remote receiver: skipped with -short")
	}
	u := startTestReceiver(t)
	// Fires left from an earlier run must not count: the bench resets
	// the receiver first.
	postFires(t, u, "stale", 3)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rep, table := runLogged(ctx, t, Config{
		Scenario: Steady, Rate: 50, Duration: 2 * time.Second, Warmup: time.Second, Drain: 15 * time.Second,
		Lookahead: 20 * time.Second, Receiver: u,
	})
	if rep.Params.Receiver != u || !strings.Contains(table, "receiver  ") {
		t.Errorf("params name receiver %q, want %q in params and table", rep.Params.Receiver, u)
	}
	s := rep.Steady
	if want := 50 * 2; s.Expected < want*9/10 || s.Received == 0 {
		t.Errorf("expected %d fires in the window (want about %d), received %d", s.Expected, want, s.Received)
	}
	if s.Missed != 0 || s.Duplicated != 0 {
		t.Errorf("missed %d, duplicated %d fires; want none", s.Missed, s.Duplicated)
	}
	if int64(s.UniqueFired) != s.RunsSucceeded {
		t.Errorf("%d fires received but %d runs recorded succeeded", s.UniqueFired, s.RunsSucceeded)
	}
	p := getFires(t, u+"/fires?limit=0")
	if p.Total < s.UniqueFired || p.Total > s.UniqueFired+s.Duplicated {
		t.Errorf("receiver holds %d fires; the report counts %d distinct", p.Total, s.UniqueFired)
	}
}

// TestReceiverPages checks GET /fires paging, the remote client reading in
// pages and only new fires, the counts, and the reset.
func TestReceiverPages(t *testing.T) {
	u := startTestReceiver(t)
	ctx := context.Background()
	postFires(t, u, "a", 25)
	req, err := http.NewRequest(http.MethodPost, u+"/fire", nil) // no headers: bad
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}

	p := getFires(t, u+"/fires?since=20&limit=10")
	if len(p.Fires) != 5 || p.Next != 25 || p.Total != 25 || p.Bad != 1 || p.Fires[0].RunID != "a-20" {
		t.Errorf("since=20&limit=10: %d fires from %+v, next %d, total %d, bad %d", len(p.Fires), p.Fires, p.Next, p.Total, p.Bad)
	}
	if p := getFires(t, u+"/fires?since=30"); len(p.Fires) != 0 || p.Next != 30 || p.Total != 25 {
		t.Errorf("since=30: %d fires, next %d, total %d", len(p.Fires), p.Next, p.Total)
	}
	if resp, err := http.Get(u + "/fires?since=-1"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("since=-1: %s, want 400", resp.Status)
	}

	// A client resets the receiver, then reads in pages of 10.
	r, err := newRemoteReceiver(ctx, u+"/")
	if err != nil {
		t.Fatal(err)
	}
	r.page = 10
	if c, err := r.count(ctx); err != nil || c != 0 {
		t.Fatalf("count after reset = %d, %v; want 0", c, err)
	}
	postFires(t, u, "b", 23)
	fires, err := r.snapshot(ctx)
	if err != nil || len(fires) != 23 {
		t.Fatalf("snapshot = %d fires, %v; want 23", len(fires), err)
	}
	for i, f := range fires {
		if want := fmt.Sprintf("b-%d", i); f.runID != want || f.timerID != "timer-"+want || f.recv < f.sched {
			t.Errorf("fire %d = %+v, want run %s in order", i, f, want)
		}
	}
	postFires(t, u, "c", 4)
	if fires, err = r.snapshot(ctx); err != nil || len(fires) != 27 || fires[26].runID != "c-3" {
		t.Fatalf("snapshot after 4 more = %d fires, %v", len(fires), err)
	}
	if c, err := r.count(ctx); err != nil || c != 27 {
		t.Errorf("count = %d, %v; want 27", c, err)
	}

	// Another client resetting it spoils the first one's run.
	resp, err := http.Post(u+"/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := r.snapshot(ctx); err != errReceiverReset {
		t.Errorf("snapshot after a foreign reset: %v, want %v", err, errReceiverReset)
	}
	if _, err := r.count(ctx); err != errReceiverReset {
		t.Errorf("count after a foreign reset: %v, want %v", err, errReceiverReset)
	}
	if _, err := newRemoteReceiver(ctx, "127.0.0.1:9090"); err == nil {
		t.Error("receiver URL without scheme accepted")
	}
}

// postFires sends n callbacks to the receiver at u as the HTTP runner does,
// with run ids prefix-0, prefix-1, …
func postFires(t *testing.T, u, prefix string, n int) {
	t.Helper()
	sched := time.Now().UTC().Format(time.RFC3339Nano)
	for i := 0; i < n; i++ {
		req, err := http.NewRequest(http.MethodPost, u+"/fire", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%s-%d", prefix, i)
		req.Header.Set(model.HeaderRunID, id)
		req.Header.Set(model.HeaderTimerID, "timer-"+id)
		req.Header.Set(model.HeaderScheduledAt, sched)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /fire: %s", resp.Status)
		}
	}
}

func getFires(t *testing.T, u string) firesPage {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	var p firesPage
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return p
}

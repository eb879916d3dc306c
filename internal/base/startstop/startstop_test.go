package startstop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// part is a Service with a loop, counting its start and stop work.
type part struct {
	name    string
	life    Base
	failing error
	log     *[]string
	mu      *sync.Mutex
	starts  int
	stops   int
}

func (p *part) record(s string) {
	if p.log != nil {
		p.mu.Lock()
		*p.log = append(*p.log, s)
		p.mu.Unlock()
	}
}

func (p *part) Start(ctx context.Context) error {
	return p.life.Start(ctx, p.name, func(ctx context.Context) error {
		p.starts++
		if p.failing != nil {
			return p.failing
		}
		p.life.Go(func() { <-ctx.Done() })
		p.record("start " + p.name)
		return nil
	})
}

func (p *part) Stop(ctx context.Context) error {
	return p.life.Stop(ctx, func(context.Context) error {
		p.stops++
		p.record("stop " + p.name)
		return nil
	})
}

func TestBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name       string
		steps      []string // "start", "stop"
		wantErr    []bool
		wantStarts int
		wantStops  int
	}{
		{"start, stop", []string{"start", "stop"}, []bool{false, false}, 1, 1},
		{"start twice", []string{"start", "start", "stop"}, []bool{false, false, false}, 1, 1},
		{"stop twice", []string{"start", "stop", "stop"}, []bool{false, false, false}, 1, 1},
		{"stop without start", []string{"stop", "stop"}, []bool{false, false}, 0, 0},
		{"start after stop", []string{"start", "stop", "start"}, []bool{false, false, true}, 1, 1},
		{"start after a stop without start", []string{"stop", "start"}, []bool{false, true}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &part{name: "p"}
			for i, step := range tt.steps {
				var err error
				if step == "start" {
					err = p.Start(ctx)
				} else {
					err = p.Stop(ctx)
				}
				if (err != nil) != tt.wantErr[i] {
					t.Fatalf("step %d (%s): err = %v, want error %v", i, step, err, tt.wantErr[i])
				}
				if err != nil && !errors.Is(err, ErrStopped) {
					t.Fatalf("step %d: err = %v, want ErrStopped", i, err)
				}
			}
			if p.starts != tt.wantStarts || p.stops != tt.wantStops {
				t.Errorf("starts, stops = %d, %d; want %d, %d", p.starts, p.stops, tt.wantStarts, tt.wantStops)
			}
		})
	}
}

func TestBaseFailedStartIsRetryable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	p := &part{name: "p", failing: boom}
	if err := p.Start(ctx); !errors.Is(err, boom) {
		t.Fatalf("Start = %v, want boom", err)
	}
	if p.life.Running() {
		t.Fatal("Running after a failed start")
	}
	p.failing = nil
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start after a failed start = %v", err)
	}
	if !p.life.Running() {
		t.Fatal("not Running after Start")
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStartCtxCancelDoesNotStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	p := &part{name: "p"}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if !p.life.Running() {
		t.Fatal("cancelling Start's context stopped the part")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start of a running part with a cancelled context = %v", err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	p := &part{name: "p"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _ = p.Start(context.Background()) })
		wg.Go(func() { _ = p.Stop(context.Background()) })
	}
	wg.Wait()
	_ = p.Stop(context.Background())
	if p.starts > 1 || p.stops > p.starts {
		t.Errorf("starts, stops = %d, %d", p.starts, p.stops)
	}
}

func TestStartAllStopsInReverseOnFailure(t *testing.T) {
	t.Parallel()
	var log []string
	var mu sync.Mutex
	a := &part{name: "a", log: &log, mu: &mu}
	b := &part{name: "b", log: &log, mu: &mu}
	c := &part{name: "c", log: &log, mu: &mu, failing: errors.New("c broke")}
	err := StartAll(context.Background(), context.Background(), a, b, c)
	if err == nil {
		t.Fatal("StartAll with a failing part returned nil")
	}
	want := []string{"start a", "start b", "stop b", "stop a"}
	if !slices.Equal(log, want) {
		t.Errorf("log = %v, want %v", log, want)
	}
}

func TestStopBoundedByCtx(t *testing.T) {
	t.Parallel()
	var b Base
	release := make(chan struct{})
	if err := b.Start(context.Background(), "stuck", func(context.Context) error {
		b.Go(func() { <-release })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Stop(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop of a stuck part = %v, want context.Canceled", err)
	}
	close(release)
	if b.Running() {
		t.Error("Running after Stop")
	}
}

// TestRunningDoesNotWaitForStart: Running answers while a start is in
// progress (a health check must not hang on a slow start).
func TestRunningDoesNotWaitForStart(t *testing.T) {
	t.Parallel()
	var b Base
	inStart, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.Start(context.Background(), "slow", func(context.Context) error {
			close(inStart)
			<-release
			return nil
		})
	}()
	<-inStart
	if b.Running() {
		t.Error("Running during Start")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !b.Running() {
		t.Error("not Running after Start")
	}
	if err := b.Stop(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

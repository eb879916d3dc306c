// Package startstop gives chime's background parts one lifecycle. Every
// part (trigger, scheduler, executor, and the engine's loops) is a Service:
// Start(ctx) error starts it and returns once it runs, or with the error
// that kept it from starting; Stop(ctx) error stops it and returns once it
// stopped. Both are safe to call twice, concurrently, and Stop without
// Start.
//
// A part embeds a Base (as a named field, so that Base's methods do not
// become the part's) and writes its Start and Stop as calls of Base.Start
// and Base.Stop with its own start and stop work.
//
// Parts are one-shot: Start after Stop returns ErrStopped (a stopped part
// has released its pool, its locks and its slices; build a new one). A
// Start that failed leaves the part as it was before, so it may be tried
// again.
//
// The model is riverqueue/river's startstop package (BaseStartStop).
package startstop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Service is a part with a lifecycle.
type Service interface {
	// Start starts the part and returns once it runs. The part must not
	// stop when ctx is cancelled: only Stop stops it (ctx bounds the
	// start's own work and carries its values).
	Start(ctx context.Context) error
	// Stop stops the part and returns once it stopped, or when ctx is
	// done (the part then stops as soon as it can).
	Stop(ctx context.Context) error
}

// ErrStopped is returned by Start once the part was stopped.
var ErrStopped = errors.New("already stopped: a stopped part cannot start again")

type state int32

const (
	idle state = iota
	running
	stopped
)

// Base makes a part's Start and Stop idempotent. Its zero value is ready.
type Base struct {
	// mu serialises Start and Stop; it is held while the start function
	// runs. running mirrors state == running for Running, which must not
	// wait for a start in progress (a health check calls it).
	mu      sync.Mutex
	running atomic.Bool
	state   state
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	// stopping is closed when the Stop that stopped the part returned.
	stopping chan struct{}
}

// Start runs start once, with a context that Stop cancels (and ctx's
// cancellation does not; it keeps ctx's values). It returns nil at once if
// the part runs already and ErrStopped, wrapped with name, if it was
// stopped. If start fails, the goroutines it began with Go are cancelled
// and waited for, the part stays startable, and the error is returned
// wrapped with name.
func (b *Base) Start(ctx context.Context, name string, start func(ctx context.Context) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case running:
		return nil
	case stopped:
		return fmt.Errorf("%s: %w", name, ErrStopped)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if start != nil {
		if err := start(runCtx); err != nil {
			cancel()
			b.wg.Wait()
			return fmt.Errorf("start %s: %w", name, err)
		}
	}
	b.cancel = cancel
	b.state = running
	b.running.Store(true)
	return nil
}

// Go runs f in a goroutine that Stop waits for. Call it from the start
// function; f should return when the start function's context is done.
func (b *Base) Go(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// Stop stops the part once: it cancels the start function's context,
// waits for the goroutines begun with Go, then runs stop (which may be
// nil) and returns its error. Stop of a part that is not running only
// marks it stopped and returns nil; a Stop during another waits for it. If
// ctx is done before the goroutines returned, Stop returns ctx's error
// without running stop; the part is stopped all the same (its goroutines
// return when they can).
func (b *Base) Stop(ctx context.Context, stop func(ctx context.Context) error) error {
	b.mu.Lock()
	if b.state != running {
		b.state = stopped
		wait := b.stopping
		b.mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return fmt.Errorf("stop: %w", ctx.Err())
			}
		}
		return nil
	}
	b.state = stopped
	b.running.Store(false)
	b.stopping = make(chan struct{})
	defer close(b.stopping)
	b.cancel()
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", ctx.Err())
	}
	if stop != nil {
		return stop(ctx)
	}
	return nil
}

// Running reports whether the part started and has not been stopped. It
// does not wait for a Start or a Stop in progress.
func (b *Base) Running() bool { return b.running.Load() }

// StartAll starts services in order. If one fails, those already started
// are stopped, in reverse order, with stopCtx, and the error is returned.
func StartAll(ctx, stopCtx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			started := make([]Service, i)
			for j := range i {
				started[j] = services[i-1-j]
			}
			_ = StopAll(stopCtx, started...)
			return err
		}
	}
	return nil
}

// StopAll stops services in the order given (the reverse of the start
// order, as a rule) and returns their errors joined. Every service is
// stopped, whatever the errors.
func StopAll(ctx context.Context, services ...Service) error {
	var errs []error
	for _, s := range services {
		if err := s.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

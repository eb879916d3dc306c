// Package startstoptest checks that a part keeps the lifecycle of package
// startstop, for the tests of each part.
package startstoptest

import (
	"context"
	"errors"
	"testing"

	"github.com/chimehq/chime/internal/base/startstop"
)

// Lifecycle checks, on parts made by newService, that Start and Stop are
// safe twice, that Stop without Start returns nil, and that a stopped part
// does not start again (ErrStopped). It returns the part it stopped, for
// checks of the part's own state after Stop.
func Lifecycle[S startstop.Service](t testing.TB, newService func() S) S {
	t.Helper()
	ctx := context.Background()
	s := newService()
	for i := range 2 {
		if err := s.Start(ctx); err != nil {
			t.Fatalf("Start %d: %v", i, err)
		}
	}
	for i := range 2 {
		if err := s.Stop(ctx); err != nil {
			t.Fatalf("Stop %d: %v", i, err)
		}
	}
	if err := s.Start(ctx); !errors.Is(err, startstop.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	if err := newService().Stop(ctx); err != nil {
		t.Errorf("Stop without Start = %v", err)
	}
	return s
}

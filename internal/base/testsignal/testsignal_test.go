package testsignal

import "testing"

func TestSignal(t *testing.T) {
	t.Parallel()
	var zero Signal[int]
	zero.Signal(1) // production: a no-op

	var s Signal[string]
	s.Init(t)
	s.RequireEmpty()
	go s.Signal("done")
	if v := s.Wait(); v != "done" {
		t.Errorf("Wait = %q, want done", v)
	}
	s.Signal("again")
	if v := <-s.C(); v != "again" {
		t.Errorf("C gave %q, want again", v)
	}
	s.RequireEmpty()
}

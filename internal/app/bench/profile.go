package bench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"
)

// Profiles and traces of a measured phase, on request.

// startCPUProfile starts a CPU profile into path; the returned func stops
// it. With an empty path it does nothing.
func startCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// startTrace writes an execution trace of the next traceFor into path (with
// an empty path it does nothing). The returned func stops it early.
func startTrace(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: trace: %w", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			trace.Stop()
			f.Close()
		})
	}
	time.AfterFunc(traceFor, stop)
	return stop, nil
}

// traceFor bounds a trace: at thousands of fires per second, seconds of
// trace are hundreds of megabytes.
const traceFor = 5 * time.Second

// writeHeapProfile writes the live heap, after a GC, to path.
func writeHeapProfile(path string) error { return writeProfile(path, true) }

// writeProfile writes a heap profile to path, after a GC if gc is set;
// without, its in-use figures are those of the last GC.
func writeProfile(path string, gc bool) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	if gc {
		runtime.GC()
	}
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bench: heap profile: %w", err)
	}
	return nil
}

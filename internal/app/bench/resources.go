package bench

import (
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// CPU and memory of the process over a measured phase.

// sampler measures the process's resources over a phase.
type sampler struct {
	start   time.Time
	cpu0    time.Duration
	peak    atomic.Int64 // Go runtime memory
	anon    atomic.Int64 // anonymous RSS
	anonAt  atomic.Int64 // when anon peaked, ns after start
	live    atomic.Int64 // live heap marked by a GC
	liveAt  atomic.Int64 // when live peaked, ns after start
	stop    chan struct{}
	stopped chan struct{}

	// profile, when set, is where a heap profile is written each time the
	// live heap marked by a GC rises past profiled·profileStep: the
	// profile of the highest live heap of the phase, which the GC's
	// headroom doubles into the peak of the Go memory.
	profile  string
	profiled int64
	profErr  error
}

// profileStep is how much the live heap must grow past the last peak
// profile for the next one (each costs a walk of the heap profile).
const profileStep = 1.05

// startSampler starts sampling; peakProfile, when not empty, names the
// heap profile written at the peak of the live heap (see sampler.profile).
func startSampler(peakProfile string) *sampler {
	s := &sampler{start: time.Now(), cpu0: cpuTime(), stop: make(chan struct{}), stopped: make(chan struct{}), profile: peakProfile}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(m)
	at := int64(time.Since(s.start))
	if m[0].Value.Kind() == metrics.KindUint64 {
		storeMax(&s.peak, int64(m[0].Value.Uint64()))
	}
	if storeMax(&s.anon, anonRSS()) {
		s.anonAt.Store(at)
	}
	if m[1].Value.Kind() == metrics.KindUint64 {
		live := int64(m[1].Value.Uint64())
		if storeMax(&s.live, live) {
			s.liveAt.Store(at)
		}
		if s.profile != "" && float64(live) > float64(s.profiled)*profileStep {
			// No GC first: the profile is that of the last GC, which
			// marked this live heap.
			if err := writeProfile(s.profile, false); err != nil && s.profErr == nil {
				s.profErr = err
			}
			s.profiled = live
		}
	}
}

// storeMax raises p to v if v is larger, and reports whether it did.
func storeMax(p *atomic.Int64, v int64) bool {
	for {
		old := p.Load()
		if v <= old {
			return false
		}
		if p.CompareAndSwap(old, v) {
			return true
		}
	}
}

// done stops sampling and returns the resources used since start.
func (s *sampler) done() Resources {
	close(s.stop)
	<-s.stopped
	s.sample()
	if s.profErr != nil {
		slog.Warn("bench: peak heap profile", "err", s.profErr)
	}
	wall := time.Since(s.start).Seconds()
	cpu := (cpuTime() - s.cpu0).Seconds()
	r := Resources{CPUSeconds: cpu, PeakRSSMiB: mib(maxRSS()), PeakAnonMiB: mib(s.anon.Load()), PeakGoMiB: mib(s.peak.Load()),
		PeakLiveMiB: mib(s.live.Load()), PeakAnonAt: time.Duration(s.anonAt.Load()).Seconds(),
		PeakLiveAt: time.Duration(s.liveAt.Load()).Seconds(), HeapMiB: liveHeapMiB()}
	if wall > 0 {
		r.CPUCores = cpu / wall
	}
	return r
}

// peakProfile is where a phase's heap profile at the peak of the live heap
// goes: cfg.MemProfile with suffix, or nowhere without --memprofile.
func peakProfile(cfg Config, suffix string) string {
	if cfg.MemProfile == "" {
		return ""
	}
	return cfg.MemProfile + suffix
}

// liveHeapMiB runs a GC and returns the live heap.
func liveHeapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mib(int64(ms.HeapAlloc))
}

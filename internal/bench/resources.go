package bench

import (
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
	stop    chan struct{}
	stopped chan struct{}
}

func startSampler() *sampler {
	s := &sampler{start: time.Now(), cpu0: cpuTime(), stop: make(chan struct{}), stopped: make(chan struct{})}
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
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() == metrics.KindUint64 {
		storeMax(&s.peak, int64(m[0].Value.Uint64()))
	}
	storeMax(&s.anon, anonRSS())
}

// storeMax raises p to v if v is larger.
func storeMax(p *atomic.Int64, v int64) {
	for {
		old := p.Load()
		if v <= old || p.CompareAndSwap(old, v) {
			return
		}
	}
}

// done stops sampling and returns the resources used since start.
func (s *sampler) done() Resources {
	close(s.stop)
	<-s.stopped
	s.sample()
	wall := time.Since(s.start).Seconds()
	cpu := (cpuTime() - s.cpu0).Seconds()
	r := Resources{CPUSeconds: cpu, PeakRSSMiB: mib(maxRSS()), PeakAnonMiB: mib(s.anon.Load()), PeakGoMiB: mib(s.peak.Load()), HeapMiB: liveHeapMiB()}
	if wall > 0 {
		r.CPUCores = cpu / wall
	}
	return r
}

// liveHeapMiB runs a GC and returns the live heap.
func liveHeapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mib(int64(ms.HeapAlloc))
}

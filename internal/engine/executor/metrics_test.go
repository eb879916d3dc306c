package executor

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/chimehq/chime/model"
)

// value reads a gauge's or a counter's value, or a histogram's count.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Histogram != nil:
		return float64(d.Histogram.GetSampleCount())
	}
	t.Fatalf("metric %v has no value", c.Desc())
	return 0
}

// TestAttemptMetrics: while an action runs chime_pool_running counts it,
// and not after; its start is one fire delay sample; its recorded result
// counts in chime_fires_total by status.
func TestAttemptMetrics(t *testing.T) {
	env := newLeaseEnv(t)
	m := env.metrics
	if got := value(t, m.PoolCapacity); got != float64(DefaultPoolSize) {
		t.Fatalf("chime_pool_capacity = %v, want %d", got, DefaultPoolSize)
	}
	cr := env.start()
	if got := value(t, m.PoolRunning); got != 1 {
		t.Fatalf("chime_pool_running while the action runs = %v, want 1", got)
	}
	if got := value(t, m.FireDelay); got != 1 {
		t.Fatalf("chime_fire_delay_seconds count = %v, want 1", got)
	}
	env.run.release <- struct{}{}
	waitFor(t, "the result", func() bool { return env.stored(cr.Run.ID).Status == model.RunSucceeded })
	if got := value(t, m.PoolRunning); got != 0 {
		t.Fatalf("chime_pool_running after the action = %v, want 0", got)
	}
	waitFor(t, "the fire counted", func() bool { return value(t, m.Fires.WithLabelValues("succeeded")) == 1 })
	if got := value(t, m.ActionDuration.WithLabelValues("block").(prometheus.Metric)); got != 1 {
		t.Fatalf("chime_action_duration_seconds{type=block} count = %v, want 1", got)
	}
}

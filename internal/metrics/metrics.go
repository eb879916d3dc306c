// Package metrics defines chime's Prometheus metrics. The engine updates
// them; `chime serve` exposes them on /metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds every collector. A nil *Metrics is valid and records
// nothing, so library users and tests need not register anything.
type Metrics struct {
	Fires          *prometheus.CounterVec // label status: succeeded, failed, retried, skipped
	FireDelay      prometheus.Histogram   // scheduled instant (or due instant) -> action started, seconds
	ActionDuration *prometheus.HistogramVec
	RunsPlanned    prometheus.Counter
	Claims         *prometheus.CounterVec // label result: won, lost
	PoolRunning    prometheus.Gauge       // actions performing now
	PoolCapacity   prometheus.Gauge
	SlicesHeld     prometheus.Gauge
	Recovered      *prometheus.CounterVec // label kind: lease_expired, misfire, restart, node_gone
	ClockSkew      prometheus.Gauge       // this node's clock minus the store's, seconds
	LeasesLost     *prometheus.CounterVec // label reason: unconfirmed, taken_over
	ResultsWaiting prometheus.Gauge       // finished attempts whose result is not recorded yet
	NodesLive      prometheus.Gauge       // nodes in the node list at this node's last heartbeat, itself included
	// ClaimModesDisagree is how many live nodes of an earlier version run
	// lazy claims (the node takes no slice while one of them may still
	// start runs without a claim write).
	ClaimModesDisagree prometheus.Gauge
	StoreDuration      *prometheus.HistogramVec // label op: the store.Store method
	StoreErrors        *prometheus.CounterVec   // label op: the store.Store method
	RunsDeleted        prometheus.Counter       // finished runs deleted by retention
	FiresSkipped       *prometheus.CounterVec   // label reason: a model.Skip* code
	// Series keeps the last hour of Fires and FireDelay per minute, in
	// memory, for the web UI's dashboard (it is not a collector).
	Series *Series
}

// New creates the collectors and registers them with reg (if not nil).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Series: NewSeries(),
		Fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_fires_total", Help: "Finished run attempts by status.",
		}, []string{"status"}),
		FireDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chime_fire_delay_seconds",
			Help:    "Delay from a run's due instant to the start of its action.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60},
		}),
		ActionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chime_action_duration_seconds",
			Help:    "Duration of actions by type.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"type"}),
		RunsPlanned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_runs_planned_total", Help: "Runs materialised by the planner.",
		}),
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_claims_total", Help: "Claims of runs by result (won, lost).",
		}, []string{"result"}),
		PoolRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_pool_running", Help: "Actions running in the executor pool.",
		}),
		PoolCapacity: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_pool_capacity", Help: "Capacity of the executor pool.",
		}),
		SlicesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_slices_held", Help: "Slices this node holds.",
		}),
		Recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_runs_recovered_total", Help: "Runs recovered by the sweeper by kind.",
		}, []string{"kind"}),
		ClockSkew: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_clock_skew_seconds", Help: "This node's clock minus the store's clock, measured at the last heartbeat.",
		}),
		LeasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_leases_lost_total",
			Help: "Attempts this node stopped because it could not confirm their lease (unconfirmed) or another node or a policy took them (taken_over).",
		}, []string{"reason"}),
		ResultsWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_results_waiting", Help: "Finished attempts whose result is kept until the store records it.",
		}),
		NodesLive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_nodes_live", Help: "Live nodes in the node list (this one included), read at this node's last heartbeat.",
		}),
		ClaimModesDisagree: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chime_claim_modes_disagree",
			Help: "Live nodes of an earlier version that run lazy claims, read at this node's last heartbeat. The node takes no slices while one of them holds slices, and for a lock TTL after they all hold none.",
		}),
		StoreDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chime_store_duration_seconds",
			Help:    "Duration of calls to the store (the SQL database) by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"op"}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_store_errors_total",
			Help: "Calls to the store that failed, by operation (not found, conflicts and lost races are answers, not failures).",
		}, []string{"op"}),
		RunsDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chime_runs_deleted_total", Help: "Finished runs deleted by retention (beyond their timer's history.keep or older than its history.max_age).",
		}),
		FiresSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chime_fires_skipped_total",
			Help: "Fires recorded skipped, by reason (misfire, catchup_window, overlap, paused, max_fires, handler_missing, end_at).",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.Fires, m.FireDelay, m.ActionDuration, m.RunsPlanned, m.Claims,
			m.PoolRunning, m.PoolCapacity, m.SlicesHeld, m.Recovered, m.ClockSkew, m.LeasesLost, m.ResultsWaiting,
			m.NodesLive, m.ClaimModesDisagree, m.StoreDuration, m.StoreErrors, m.RunsDeleted, m.FiresSkipped)
	}
	return m
}

// Skipped counts n fires recorded skipped for reason (a model.Skip* code).
// It is safe on a nil *Metrics.
func (m *Metrics) Skipped(reason string, n int) {
	if m == nil || n <= 0 || reason == "" {
		return
	}
	m.FiresSkipped.WithLabelValues(reason).Add(float64(n))
}

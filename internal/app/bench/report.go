package bench

import (
	"time"

	"github.com/chimehq/chime/model"
)

// The report of a bench run: what each scenario measured.

// Params are the run parameters as reported.
type Params struct {
	Scenario string `json:"scenario"`
	Backend  string `json:"backend"` // "sqlite+memory", "mysql+redis", …
	// Synchronous is the SQLite commit durability asked for (full or
	// normal); empty for the other stores.
	Synchronous string `json:"sqlite_synchronous,omitempty"`
	Receiver    string `json:"receiver"` // "in-process" or the remote receiver's URL
	Action      string `json:"action"`   // the timers' action: "http" or "handler"
	Rate        int    `json:"rate,omitempty"`
	Duration    string `json:"duration,omitempty"`
	Warmup      string `json:"warmup,omitempty"`
	Timers      int    `json:"timers"`
	Buckets     int    `json:"buckets"`
	PoolSize    int    `json:"pool_size"`
	Lookahead   string `json:"lookahead"`
	ClaimAhead  string `json:"claim_ahead"`
	Mix         string `json:"mix"`
}

// Machine describes where the figures were taken.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Race       bool   `json:"race_detector"`
}

// Delays are fire delay percentiles (scheduled instant → callback
// received), in milliseconds.
type Delays struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Resources is what the node process used.
type Resources struct {
	CPUSeconds float64 `json:"cpu_seconds"`  // user+system over the measured phase
	CPUCores   float64 `json:"cpu_cores"`    // CPUSeconds / wall seconds
	PeakRSSMiB float64 `json:"peak_rss_mib"` // getrusage maxrss, whole process life
	// PeakAnonMiB is the peak of the RSS that no file backs (Linux
	// RssAnon, sampled every 100 ms): the RSS without the pages of the
	// SQLite file mapped in memory, which are page cache.
	PeakAnonMiB float64 `json:"peak_anon_rss_mib"`
	PeakGoMiB   float64 `json:"peak_go_mib"` // peak of runtime/metrics /memory/classes/total:bytes
	// PeakLiveMiB is the largest live heap a GC marked during the phase
	// (/gc/heap/live:bytes): the GC lets the heap grow to twice it
	// (GOGC=100) before the next, so it sets the peak of the Go memory.
	PeakLiveMiB float64 `json:"peak_live_mib"`
	// PeakAnonAt and PeakLiveAt are when the two peaks were sampled, in
	// seconds from the start of the phase.
	PeakAnonAt float64 `json:"peak_anon_at_s"`
	PeakLiveAt float64 `json:"peak_live_at_s"`
	HeapMiB    float64 `json:"heap_live_mib"` // live heap after a GC at the end
}

// SteadyResult is the outcome of the steady scenario.
type SteadyResult struct {
	Timers        int                `json:"timers"`
	SetupSeconds  float64            `json:"setup_seconds"` // create timers + engine start (first plan)
	Expected      int                `json:"expected"`      // fires due in the window
	Received      int                `json:"received"`      // of those, received
	AchievedRate  float64            `json:"achieved_fires_per_second"`
	Delay         Delays             `json:"delay"`
	StartDelay    Delays             `json:"action_start_delay"` // scheduled → action started (claim, pool)
	Missed        int                `json:"missed"`
	Duplicated    int                `json:"duplicated"` // run ids received more than once, whole run
	Late1s        int                `json:"late_over_1s"`
	Slowest       []SlowFire         `json:"slowest"`        // the latest fires, latest first
	RunsSucceeded int64              `json:"runs_succeeded"` // in the store after shutdown
	RunsByStatus  StatusMap          `json:"runs_by_status"`
	UniqueFired   int                `json:"unique_fired"`   // distinct run ids received, whole run
	CleanStop     bool               `json:"clean_shutdown"` // the engine stopped and recorded its backlog in time
	Resources     Resources          `json:"resources"`
	Store         map[string]OpStats `json:"store_ops"`
}

// SlowFire is one of a steady run's latest fires: when it was due, in seconds
// into the measured window, and its fire delay. Outliers that recur at the
// same second of every minute, or every planning pass, point at their cause.
type SlowFire struct {
	At      float64 `json:"at_s"`
	DelayMS float64 `json:"delay_ms"`
}

// BurstResult is the outcome of the burst scenario.
type BurstResult struct {
	Timers         int                `json:"timers"`
	CreateSeconds  float64            `json:"create_seconds"`
	PlanSeconds    float64            `json:"plan_seconds"`
	LeadSeconds    float64            `json:"lead_seconds"`  // planned → due instant
	DrainSeconds   float64            `json:"drain_seconds"` // due instant → last callback
	Delay          Delays             `json:"delay"`
	StartDelay     Delays             `json:"action_start_delay"` // scheduled → action started
	Missed         int                `json:"missed"`
	Duplicated     int                `json:"duplicated"`
	RunsSucceeded  int64              `json:"runs_succeeded"`
	Resources      Resources          `json:"resources"`
	DrainFiresPerS float64            `json:"drain_fires_per_second"`
	Store          map[string]OpStats `json:"store_ops"`
}

// Latency is a request latency summary in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// ScaleResult is the outcome of the scale scenario.
type ScaleResult struct {
	Timers        int                `json:"timers"`
	InsertSeconds float64            `json:"insert_seconds"`
	InsertPerS    float64            `json:"insert_timers_per_second"`
	PlanSeconds   float64            `json:"plan_seconds"`
	RunsPlanned   int                `json:"runs_planned"`
	HeapAfterPlan float64            `json:"heap_after_plan_mib"`
	PlanStore     map[string]OpStats `json:"plan_store_ops"` // store calls of the planning pass
	// CatchUpSeconds is the time from the engine's start until no pending
	// run was due more than a second before: the fires due during the plan
	// (the engine starts after it) have been made. CaughtUp is false when
	// that took longer than the bench waits (catchUpWait).
	CatchUpSeconds float64            `json:"catch_up_seconds"`
	CaughtUp       bool               `json:"caught_up"`
	API            map[string]Latency `json:"api"`
	FireDelay      Delays             `json:"fire_delay_during_api"`
	Resources      Resources          `json:"resources"`
	Store          map[string]OpStats `json:"store_ops"` // store calls of the API phase
}

// StatusMap counts runs by status.
type StatusMap map[model.RunStatus]int64

// Report is the whole outcome of a bench run.
type Report struct {
	Params  Params        `json:"params"`
	Machine Machine       `json:"machine"`
	Started time.Time     `json:"started"`
	Steady  *SteadyResult `json:"steady,omitempty"`
	Burst   *BurstResult  `json:"burst,omitempty"`
	Scale   *ScaleResult  `json:"scale,omitempty"`
	API     *APIResult    `json:"api,omitempty"`
	Herd    *HerdResult   `json:"herd,omitempty"`
}

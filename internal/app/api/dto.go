package api

import (
	"time"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// Timer is the JSON form of a timer. In requests, ID, Paused, CreatedAt,
// UpdatedAt and NextFireTimes are read-only and ignored (so that a GET answer can be
// edited and PUT back), and absent fields take their defaults (see
// timers.Defaults): timezone UTC, enabled true, timeout 30s, retry
// {max_attempts 1, backoff 1s}, and history the server's (History).
type Timer struct {
	ID          string `json:"id,omitempty"`
	App         string `json:"app"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Schedule    string `json:"schedule"`
	Timezone    string `json:"timezone"`
	Enabled     *bool  `json:"enabled"`
	// Paused is read-only: POST /api/v1/timers/{id}/pause and /resume set
	// it. A paused timer's fires are recorded skipped (reason "paused").
	Paused bool    `json:"paused"`
	Action *Action `json:"action"`
	// DisabledReason is read-only: why chime itself disabled the timer
	// (model.Timer.DisabledReason), absent when it did not.
	DisabledReason string `json:"disabled_reason,omitempty"`
	// Timeout is a Go duration string such as "30s".
	Timeout string   `json:"timeout"`
	Retry   *Retry   `json:"retry"`
	Policy  *Policy  `json:"policy,omitempty"`
	History *History `json:"history,omitempty"`
	// After lists the timers this one runs after, each {"timer": id or
	// "app/name", "on": "success"|"failure"|"finish"}; answers name them
	// by id. With After, Schedule may be empty: the timer then runs only
	// after its upstreams.
	After []Dependency `json:"after,omitempty"`
	// Priority is 0 (lowest) to 9; absent: 5 (model.DefaultPriority).
	Priority *int `json:"priority,omitempty"`
	// Notify are the timer's failure notifications (docs/workflows.md).
	Notify    []model.NotifyRule `json:"notify,omitempty"`
	CreatedAt *time.Time         `json:"created_at,omitempty"`
	UpdatedAt *time.Time         `json:"updated_at,omitempty"`
	// NextFireTimes are the next five fires from now in the timer's zone
	// (empty when the timer is disabled or will not fire again).
	NextFireTimes []time.Time `json:"next_fire_times"`
	// Mode is "single" (the default: each fire runs once, on one node) or
	// "broadcast" (each fire runs once on every live node that can run
	// it); Shards, above 1, runs each fire as that many shards spread over
	// the live nodes (docs/fleet.md).
	Mode   string `json:"mode,omitempty"`
	Shards int    `json:"shards,omitempty"`
}

// Action is the JSON form of a timer's action: Type and exactly the
// matching sub-object. The action types are the model's, whose JSON form is
// the API's: HTTPAction (method defaults to POST), HandlerAction (a Go
// handler registered on the server) and ShellAction (only with
// --allow-shell).
type (
	Action        = model.Action
	Dependency    = model.Dependency
	HTTPAction    = model.HTTPAction
	HandlerAction = model.HandlerAction
	ShellAction   = model.ShellAction
)

// Retry is the JSON form of a retry policy; durations are Go duration
// strings.
type Retry struct {
	MaxAttempts int    `json:"max_attempts"`
	Backoff     string `json:"backoff"`
	MaxBackoff  string `json:"max_backoff,omitempty"`
}

// Policy is the JSON form of a timer's delivery policies; absent fields
// take the defaults (misfire "all", overlap "allow", no catchup limit, no
// bounds, no maximum).
type Policy struct {
	// CatchupWindow is a Go duration: how late a fire may still run.
	CatchupWindow string     `json:"catchup_window,omitempty"`
	Misfire       string     `json:"misfire,omitempty"`
	Overlap       string     `json:"overlap,omitempty"`
	StartAt       *time.Time `json:"start_at,omitempty"`
	EndAt         *time.Time `json:"end_at,omitempty"`
	MaxFires      int        `json:"max_fires,omitempty"`
	// Jitter is a Go duration: each fire is delayed by a deterministic
	// offset in [0, jitter) (model.Policy.Jitter).
	Jitter string `json:"jitter,omitempty"`
	// DST is the daylight-saving choice of a fixed-time cron schedule:
	// default, shift, skip_gap, both or wall (schedule.DST).
	DST string `json:"dst,omitempty"`
}

// History is the JSON form of a timer's run retention (model.History): at
// most Keep finished runs, none scheduled more than MaxAge (a Go duration)
// ago. An absent field takes the server's default (--history-keep,
// --history-max-age), and answers show only the fields the timer sets; 0
// and "0s" mean no limit.
type History struct {
	Keep   *int   `json:"keep,omitempty"`
	MaxAge string `json:"max_age,omitempty"`
}

// Run is the JSON form of a run (model.RunJSON, which notifications
// share).
type Run = model.RunJSON

// Node is the JSON form of a live node.
type Node struct {
	ID        string    `json:"id"`
	Addr      string    `json:"addr"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	Slices    []string  `json:"slices"`
	// Pool is the node's executor pool at its last heartbeat (zero from a
	// node of an older version).
	Pool PoolStats `json:"pool"`
	// Handlers are the Go handlers registered on the node, sorted, as it
	// advertised them with its last heartbeat.
	Handlers []string `json:"handlers"`
	// ClaimMode is how the node claims runs: "eager" (a claim write before
	// each start), "lazy" (a node of an earlier version that ran lazy
	// claims), or "" (an earlier version that claims with a write).
	ClaimMode string `json:"claim_mode"`
	// Coordination is where the node keeps its slice locks, elections and
	// slice index: "redis", "db" or "local" ("" from a node of an older
	// version).
	Coordination string `json:"coordination"`
}

// TimerList is the answer of GET /api/v1/timers. NextCursor is empty on
// the last page.
type TimerList struct {
	Timers     []*Timer `json:"timers"`
	NextCursor string   `json:"next_cursor"`
}

// RunList is the answer of GET /api/v1/timers/{id}/runs.
type RunList struct {
	Runs       []*Run `json:"runs"`
	NextCursor string `json:"next_cursor"`
}

// NodeList is the answer of GET /api/v1/nodes.
type NodeList struct {
	Nodes []*Node `json:"nodes"`
}

// ScheduleTimes is the answer of GET /api/v1/schedule/next: RFC 3339 times
// with the offset of the requested zone.
type ScheduleTimes struct {
	Times []string `json:"times"`
}

// ActionTypes is the answer of GET /api/v1/action-types: the action types
// this server accepts in a timer ("http", "handler", and "shell" only
// when it was started with --allow-shell).
type ActionTypes struct {
	Types []string `json:"types"`
}

// Stats is the answer of GET /api/v1/stats.
type Stats struct {
	Timers TimerStats       `json:"timers"`
	Runs   map[string]int64 `json:"runs"`
	Pool   PoolStats        `json:"pool"`
}

// StatsSeries is the answer of GET /api/v1/stats/series: the cluster's
// last hour, one point a minute, oldest first (the last one is the minute
// under way), the sum over every node: the answering node's minutes from
// its memory, the other nodes' as they last wrote them to the store (at
// most engine.StatsInterval, plus SeriesMaxAge, behind).
type StatsSeries struct {
	StepSeconds int            `json:"step_seconds"`
	Points      []*SeriesPoint `json:"points"`
	// Timers are the timers that any node saw fail or fire late (more
	// than metrics.LateDelay) in the last hour, the most failures first,
	// at most MaxSeriesTimers; each node's counts added up.
	Timers []*TimerNote `json:"timers"`
}

// TimerNote is a failing or late timer of StatsSeries: its failed
// attempts (retried or not) and the last one, its late fires, their
// largest delay and the last one. A note counts from when it was made and
// goes an hour after the timer's last failure or late fire.
type TimerNote struct {
	TimerID     string     `json:"timer_id"`
	Failures    int64      `json:"failures"`
	LastFailure *time.Time `json:"last_failure,omitempty"`
	Late        int64      `json:"late"`
	MaxDelayMS  float64    `json:"max_delay_ms"`
	LastLate    *time.Time `json:"last_late,omitempty"`
}

// SeriesPoint is one minute of StatsSeries. Fires counts the attempts that
// finished in it by status (succeeded, failed, retried, skipped,
// cancelled: a retried attempt failed and will run again). Delays counts
// the actions that started in it, DelayP50MS and DelayP99MS are their
// median and 99th percentile fire delays in milliseconds: upper bounds,
// within 25% (see metrics.Series).
type SeriesPoint struct {
	Start      time.Time        `json:"start"`
	Fires      map[string]int64 `json:"fires"`
	Delays     int64            `json:"delays"`
	DelayP50MS float64          `json:"delay_p50_ms"`
	DelayP99MS float64          `json:"delay_p99_ms"`
}

// TimerStats counts timers by state.
type TimerStats struct {
	Total    int64 `json:"total"`
	Enabled  int64 `json:"enabled"`
	Disabled int64 `json:"disabled"`
}

// PoolStats reports an executor pool: of the answering node in Stats, of
// each node at its last heartbeat in Node.
type PoolStats struct {
	InUse    int `json:"in_use"`
	Capacity int `json:"capacity"`
}

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail names the offending field (when there is one) and says what
// is wrong.
type ErrorDetail struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Reason is a fixed code saying why, for answers that have one: the
	// 503 of /readyz (not_started, clock_skew, store_unreachable).
	Reason string `json:"reason,omitempty"`
}

// ToModel converts the JSON timer to a model.Timer, absent fields at their
// defaults (timers.Defaults). Durations that do not parse give a
// *model.FieldError. It does not validate otherwise: see timers.Validate.
func (t *Timer) ToModel() (*model.Timer, error) {
	m := new(model.Timer)
	*m = timers.Defaults()
	m.App, m.Name, m.Description, m.Schedule = t.App, t.Name, t.Description, t.Schedule
	if t.Timezone != "" {
		m.Timezone = t.Timezone
	}
	if t.Enabled != nil {
		m.Enabled = *t.Enabled
	}
	if t.Timeout != "" {
		d, err := parseDuration("timeout", t.Timeout)
		if err != nil {
			return nil, err
		}
		m.Timeout = d
	}
	if r := t.Retry; r != nil {
		m.Retry.MaxAttempts = r.MaxAttempts
		if r.Backoff != "" {
			d, err := parseDuration("retry.backoff", r.Backoff)
			if err != nil {
				return nil, err
			}
			m.Retry.Backoff = d
		}
		if r.MaxBackoff != "" {
			d, err := parseDuration("retry.max_backoff", r.MaxBackoff)
			if err != nil {
				return nil, err
			}
			m.Retry.MaxBackoff = d
		}
	}
	if p := t.Policy; p != nil {
		m.Policy = model.Policy{Misfire: p.Misfire, Overlap: p.Overlap, MaxFires: p.MaxFires, DST: p.DST}
		if p.Jitter != "" {
			d, err := parseDuration("policy.jitter", p.Jitter)
			if err != nil {
				return nil, err
			}
			m.Policy.Jitter = d
		}
		if p.CatchupWindow != "" {
			d, err := parseDuration("policy.catchup_window", p.CatchupWindow)
			if err != nil {
				return nil, err
			}
			m.Policy.CatchupWindow = d
		}
		if p.StartAt != nil {
			m.Policy.StartAt = p.StartAt.UTC()
		}
		if p.EndAt != nil {
			m.Policy.EndAt = p.EndAt.UTC()
		}
	}
	if h := t.History; h != nil {
		if h.Keep != nil {
			keep := *h.Keep
			m.History.Keep = &keep
		}
		if h.MaxAge != "" {
			d, err := parseDuration("history.max_age", h.MaxAge)
			if err != nil {
				return nil, err
			}
			m.History.MaxAge = &d
		}
	}
	if t.Action != nil {
		m.Action = *t.Action
	}
	prio := model.DefaultPriority
	if t.Priority != nil {
		prio = *t.Priority
	}
	m.Priority = &prio
	m.Notify = t.Notify
	m.Policy.Mode, m.Policy.Shards = t.Mode, t.Shards
	if len(t.After) > 0 {
		m.After = append([]model.Dependency(nil), t.After...)
	}
	return m, nil
}

func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, model.Errorf(field, "%q is not a Go duration such as \"30s\" or \"1m30s\"", s)
	}
	return d, nil
}

// TimerFromModel converts m to its JSON form, with the next n fire times
// after now (none when m is disabled). Secret values of the action (see
// model.Action.WalkSecrets) and notification webhook URLs are
// model.Redacted: every answer that shows an action is made here.
func TimerFromModel(m *model.Timer, now time.Time, n int) *Timer {
	enabled := m.Enabled
	created, updated := m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	t := &Timer{
		ID:          m.ID,
		App:         m.App,
		Name:        m.Name,
		Description: m.Description,
		Schedule:    m.Schedule,
		Timezone:    m.Timezone,
		Enabled:     &enabled,
		Paused:      m.Paused,
		Action:      redactedAction(m.Action),
		Timeout:     m.Timeout.String(),
		Retry:       &Retry{MaxAttempts: m.Retry.MaxAttempts, Backoff: m.Retry.Backoff.String()},
		CreatedAt:   &created,
		UpdatedAt:   &updated,
	}
	t.DisabledReason = m.DisabledReason
	if m.Retry.MaxBackoff > 0 {
		t.Retry.MaxBackoff = m.Retry.MaxBackoff.String()
	}
	t.Policy = policyFromModel(m.Policy)
	t.Mode, t.Shards = m.Policy.Mode, m.Policy.Shards
	if t.Mode == "" {
		t.Mode = model.ModeSingle
	}
	t.History = historyFromModel(m.History)
	if len(m.After) > 0 {
		t.After = append([]Dependency(nil), m.After...)
	}
	prio := m.EffectivePriority()
	t.Priority = &prio
	t.Notify = model.RedactNotify(m.Notify)
	if m.Enabled && n > 0 {
		t.NextFireTimes = timers.NextFireTimes(m, now, n)
	}
	if t.NextFireTimes == nil {
		t.NextFireTimes = []time.Time{}
	}
	return t
}

// redactedAction returns a copy of a with its secrets redacted.
func redactedAction(a model.Action) *Action {
	r := a.Clone()
	r.Redact()
	return &r
}

func policyFromModel(p model.Policy) *Policy {
	out := &Policy{Misfire: p.Misfire, Overlap: p.Overlap, MaxFires: p.MaxFires, DST: p.DST}
	if out.Misfire == "" {
		out.Misfire = model.MisfireAll
	}
	if out.DST == "" {
		out.DST = model.DSTDefault
	}
	if p.Jitter > 0 {
		out.Jitter = p.Jitter.String()
	}
	if out.Overlap == "" {
		out.Overlap = model.OverlapAllow
	}
	if p.CatchupWindow > 0 {
		out.CatchupWindow = p.CatchupWindow.String()
	}
	if !p.StartAt.IsZero() {
		at := p.StartAt.UTC()
		out.StartAt = &at
	}
	if !p.EndAt.IsZero() {
		at := p.EndAt.UTC()
		out.EndAt = &at
	}
	return out
}

// historyFromModel returns the JSON form of h: nil when h sets nothing.
func historyFromModel(h model.History) *History {
	if h.IsZero() {
		return nil
	}
	out := &History{}
	if h.Keep != nil {
		keep := *h.Keep
		out.Keep = &keep
	}
	if h.MaxAge != nil {
		out.MaxAge = h.MaxAge.String()
	}
	return out
}

// RunFromModel converts r to its JSON form.
func RunFromModel(r *model.Run) *Run { return r.JSON() }

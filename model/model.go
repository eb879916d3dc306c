// Package model holds chime's domain types: timers, their actions and
// policies, runs and nodes. Every other package speaks in these types; they
// carry no behaviour beyond validation helpers and small conveniences.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Sentinel errors that callers branch on. Stores, the engine and the API wrap
// them with context; test with errors.Is.
var (
	// ErrNotFound: the timer, run or node does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a timer with the same (app, name) already exists.
	ErrConflict = errors.New("conflict")
	// ErrNotClaimed: a conditional update lost, because the run is no longer
	// in the state the caller expected (another node claimed it, or its lease
	// was taken over). It is not a failure; the caller must drop the run.
	ErrNotClaimed = errors.New("run not claimed")
	// ErrTooManyFires: a range (a backfill) holds more fires than allowed.
	ErrTooManyFires = errors.New("too many fires")
	// ErrHasDependents: a timer cannot be deleted while other timers run
	// after it (see Timer.After), unless they are detached.
	ErrHasDependents = errors.New("timer has dependents")
	// ErrNotStarted: the engine is not running (a node's readiness).
	ErrNotStarted = errors.New("engine not started")
	// ErrClockSkew: the node's clock is too far off the store's for it to
	// claim runs (a node's readiness).
	ErrClockSkew = errors.New("clock skew")
)

// Action types.
const (
	ActionHTTP    = "http"
	ActionHandler = "handler"
	ActionShell   = "shell"
)

// Action is what a timer does when it fires. Exactly one of HTTP, Handler
// and Shell is set, matching Type.
type Action struct {
	Type    string         `json:"type"`
	HTTP    *HTTPAction    `json:"http,omitempty"`
	Handler *HandlerAction `json:"handler,omitempty"`
	Shell   *ShellAction   `json:"shell,omitempty"`
}

// HTTPAction is an HTTP callback. Body is sent exactly as written.
type HTTPAction struct {
	Method string            `json:"method"`
	URL    string            `json:"url"`
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
	// SecretHeaders names headers whose values are secret besides
	// model.SecretHeaders: write-only in the API, encrypted at rest.
	SecretHeaders []string `json:"secret_headers,omitempty"`
}

// HandlerAction runs a Go handler registered under Name with JSON Args.
type HandlerAction struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
	// SecretArgs names members of Args, a JSON object, whose values (JSON
	// strings) are secret: write-only in the API, encrypted at rest.
	SecretArgs []string `json:"secret_args,omitempty"`
}

// ShellAction runs a command, without a shell unless Command asks for one.
type ShellAction struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`
}

// RetryPolicy says how often a failed run is attempted again. MaxAttempts
// counts every attempt, the first included: 1 means no retry. The delay
// before attempt n+1 is Backoff * 2^(n-1), capped by MaxBackoff when set.
type RetryPolicy struct {
	MaxAttempts int           `json:"max_attempts"`
	Backoff     time.Duration `json:"backoff"`
	MaxBackoff  time.Duration `json:"max_backoff,omitempty"`
}

// Delay returns the wait before the attempt that follows attempt (1-based).
func (p RetryPolicy) Delay(attempt int) time.Duration {
	d := p.Backoff
	if d <= 0 {
		d = time.Second
	}
	limit := p.MaxBackoff
	if limit <= 0 {
		limit = time.Hour
	}
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Misfire policies: what happens to a fire that could not run on time (no
// node was up, its slice was lost) and is found more than MisfireGrace late.
const (
	// MisfireAll runs every missed fire, late, once each (the default).
	MisfireAll = "all"
	// MisfireLatest runs only the most recent missed fire of a timer and
	// skips the older ones.
	MisfireLatest = "latest"
	// MisfireSkip skips every missed fire; only fires on time run.
	MisfireSkip = "skip"
)

// MisfireGrace is how late a fire may start and still count as on time
// rather than missed: it covers a node's failover (lock TTL) and a busy
// pool, so that the misfire policy only acts on real outages.
const MisfireGrace = 30 * time.Second

// Overlap policies: what happens when a fire is due while the timer's
// previous run is still running.
const (
	// OverlapAllow runs them side by side (the default).
	OverlapAllow = "allow"
	// OverlapSkip skips the new fire.
	OverlapSkip = "skip"
	// OverlapBufferOne holds the new fire until the running one ends; a
	// further fire while one is held is skipped.
	OverlapBufferOne = "buffer_one"
	// OverlapCancelRunning cancels the running one and starts the new one.
	OverlapCancelRunning = "cancel_running"
)

// Policy holds a timer's delivery policies. The zero value is the default:
// every fire runs, late if it must, however late, side by side with a
// previous run still going, for ever.
type Policy struct {
	// CatchupWindow is how late a fire may still run; a fire found later
	// than that is skipped. Zero means no limit.
	CatchupWindow time.Duration `json:"catchup_window,omitempty"`
	// Misfire is MisfireAll (default, ""), MisfireLatest or MisfireSkip.
	Misfire string `json:"misfire,omitempty"`
	// Overlap is OverlapAllow (default, ""), OverlapSkip, OverlapBufferOne
	// or OverlapCancelRunning.
	Overlap string `json:"overlap,omitempty"`
	// StartAt and EndAt bound the fires: none before StartAt, none after
	// EndAt. StartAt is also the anchor of an @every. Zero: no bound.
	StartAt time.Time `json:"start_at,omitzero"`
	EndAt   time.Time `json:"end_at,omitzero"`
	// MaxFires, when positive, is how many scheduled fires the timer makes;
	// then it disables itself.
	MaxFires int `json:"max_fires,omitempty"`
	// Jitter, when positive, delays each scheduled fire by an offset in
	// [0, Jitter) derived from the timer's id and the fire's nominal
	// instant (JitterOffset), so that timers sharing a schedule spread
	// over the window and every node computes the same instant. The run
	// keeps the nominal instant as ScheduledAt (and its id); its DueAt is
	// the jittered one (Policy.DueAt). StartAt, EndAt and MaxFires count
	// nominal instants; the misfire grace and CatchupWindow are measured
	// from the jittered one. Manual runs are not jittered.
	Jitter time.Duration `json:"jitter,omitempty"`
	// DST is the daylight-saving choice of a fixed-time cron schedule,
	// one of the names of schedule.DST ("default", "shift", "skip_gap",
	// "both", "wall"); "" is "default".
	DST string `json:"dst,omitempty"`
	// Mode is ModeSingle (default, "") or ModeBroadcast: each fire runs
	// once on every live node that can run it (docs/fleet.md).
	Mode string `json:"mode,omitempty"`
	// Shards, when above 1, runs each fire as that many shards spread
	// over the live nodes. It excludes ModeBroadcast.
	Shards int `json:"shards,omitempty"`
}

// DSTDefault is the name of the default daylight-saving choice; "" means
// the same.
const DSTDefault = "default"

// DueAt returns when the fire of timerID at the nominal instant at is
// due: at plus the jitter offset (JitterOffset), at itself without jitter.
func (p Policy) DueAt(timerID string, at time.Time) time.Time {
	return at.Add(JitterOffset(timerID, at, p.Jitter))
}

// Fire modes (Policy.Mode).
const (
	// ModeSingle runs each fire once, on one node (the default).
	ModeSingle = "single"
	// ModeBroadcast runs each fire once on every live node that has the
	// timer's handler (every live node for HTTP and shell actions), each
	// as a shard of its own.
	ModeBroadcast = "broadcast"
)

// MaxShards is the most shards a fire may run as (Policy.Shards), and the
// most nodes a broadcast fire runs on.
const MaxShards = 1000

// Splits reports whether p makes each fire run as shards (broadcast, or
// Shards above 1).
func (p Policy) Splits() bool { return p.Mode == ModeBroadcast || p.Shards > 1 }

// Equal reports whether p and q are the same policies, defaults spelt out
// or not, and times compared as instants.
func (p Policy) Equal(q Policy) bool {
	norm := func(p Policy) Policy {
		if p.Misfire == "" {
			p.Misfire = MisfireAll
		}
		if p.Overlap == "" {
			p.Overlap = OverlapAllow
		}
		if p.DST == "" {
			p.DST = DSTDefault
		}
		if p.Mode == "" {
			p.Mode = ModeSingle
		}
		if p.Shards == 1 {
			p.Shards = 0
		}
		return p
	}
	if !p.StartAt.Equal(q.StartAt) || !p.EndAt.Equal(q.EndAt) {
		return false
	}
	p, q = norm(p), norm(q)
	p.StartAt, p.EndAt, q.StartAt, q.EndAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return p == q
}

// History bounds how many of a timer's finished runs (succeeded, failed,
// skipped, cancelled) the store keeps, and for how long: at most Keep of
// them, none scheduled more than MaxAge ago. Pending and running runs are
// never deleted. A nil field takes the server's default
// (`chime serve --history-keep`, `--history-max-age`); a zero one means no
// limit of that kind. The zero value follows the server in both.
//
// Retention runs in passes (package retention), so a timer may hold more
// for a while; and it deletes no run scheduled within the last
// retention.Recent, whatever Keep says.
type History struct {
	// Keep is the most finished runs kept; 0 means no count limit.
	Keep *int `json:"keep,omitempty"`
	// MaxAge is how long after its scheduled instant a finished run is
	// kept; 0 means no age limit.
	MaxAge *time.Duration `json:"max_age,omitempty"`
}

// IsZero reports whether h sets nothing (the server's defaults apply).
func (h History) IsZero() bool { return h.Keep == nil && h.MaxAge == nil }

// Limits returns the count and age limits of h, its nil fields replaced by
// defKeep and defMaxAge. A result of 0 means no limit of that kind; a
// negative default is no limit too.
func (h History) Limits(defKeep int, defMaxAge time.Duration) (keep int, maxAge time.Duration) {
	keep, maxAge = defKeep, defMaxAge
	if h.Keep != nil {
		keep = *h.Keep
	}
	if h.MaxAge != nil {
		maxAge = *h.MaxAge
	}
	return max(keep, 0), max(maxAge, 0)
}

// Timer is the definition of something that fires on a schedule.
type Timer struct {
	ID          string `json:"id"`
	App         string `json:"app"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Schedule    string `json:"schedule"`
	Timezone    string `json:"timezone"`
	Enabled     bool   `json:"enabled"`
	// Paused is set by a pause and cleared by a resume: a paused timer
	// keeps its schedule and its plan, but each of its fires is recorded
	// skipped with the reason SkipPaused instead of being run. It is not
	// part of the definition: saving a timer keeps its stored value.
	Paused  bool          `json:"paused"`
	Action  Action        `json:"action"`
	Timeout time.Duration `json:"timeout"`
	Retry   RetryPolicy   `json:"retry"`
	Policy  Policy        `json:"policy"`
	// History bounds the finished runs the store keeps of this timer;
	// its nil fields take the server's defaults.
	History History `json:"history"`
	// After lists the timers this one runs after (see Dependency): each
	// time they have all ended the way they say since this timer's last
	// run after them, it runs once more. A timer with After may have an
	// empty Schedule: it then runs only after its upstreams.
	After []Dependency `json:"after,omitempty"`
	// Priority orders this timer's runs against others' when more are due
	// than the node can claim or start at once: 0 (lowest) to 9, nil
	// meaning DefaultPriority (see EffectivePriority).
	Priority *int `json:"priority,omitempty"`
	// Notify says who is told when this timer's runs fail or recover.
	Notify    []NotifyRule `json:"notify,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`

	// PlannedUntil is the end of the window for which the planner has
	// materialised this timer's runs: every fire before it has a run row.
	// Zero means nothing is planned yet. Internal bookkeeping, not API.
	PlannedUntil time.Time `json:"-"`
	// NextFireAt is the timer's first fire after the last write of its
	// row (a save, or a planning pass that moved PlannedUntil), zero when
	// it has none (disabled, or no fire left). It is what the timer list
	// sorts by (store.SortNextFire), and may lag: once that fire has
	// passed it stays until the next write. Internal, not API.
	NextFireAt time.Time `json:"-"`
	// Version is the store's revision of the timer, changed by every
	// write of its definition (an update or a save, a detach of one of
	// its upstreams) and not by planning. The planner reads it with the
	// timer (store.Store.TimersToPlan) and writes the timer's runs and
	// plan only while the timer still has it (store.Store.InsertPlanned,
	// store.Plan.Version), so that a save during a planning pass is not
	// undone by the pass. Zero when not read: a store never reads zero.
	// Internal, not API.
	Version int64 `json:"-"`

	// DisabledReason says why chime itself disabled the timer (at an
	// upgrade, a stored action that newer rules refuse); empty when it
	// did not. Enabling or saving the timer clears it. Not part of the
	// definition.
	DisabledReason string `json:"disabled_reason,omitempty"`
}

// Priorities: a timer's Priority is between MinPriority and MaxPriority,
// DefaultPriority when unset.
const (
	MinPriority     = 0
	MaxPriority     = 9
	DefaultPriority = 5
)

// EffectivePriority returns t's priority, DefaultPriority when unset.
func (t *Timer) EffectivePriority() int {
	if t == nil || t.Priority == nil {
		return DefaultPriority
	}
	return *t.Priority
}

// Notification events: what a NotifyRule's On names.
const (
	// NotifyFailure: a run ended failed after its last attempt.
	NotifyFailure = "failure"
	// NotifyRecovery: a run succeeded and the timer's previous finished
	// run had failed.
	NotifyRecovery = "recovery"
	// NotifyConsecutiveFailures: a run's failure made Threshold failed
	// runs in a row; told once per streak, the next time only after a
	// success.
	NotifyConsecutiveFailures = "consecutive_failures"
)

// Notification channels.
const (
	ChannelWebhook = "webhook"
	ChannelEmail   = "email"
)

// NotifyRule is one notification of a timer (or an app's default): on
// which event, to which webhook and/or email addresses.
type NotifyRule struct {
	On string `json:"on"`
	// Threshold is the streak length of NotifyConsecutiveFailures.
	Threshold int            `json:"threshold,omitempty"`
	Webhook   *NotifyWebhook `json:"webhook,omitempty"`
	Email     *NotifyEmail   `json:"email,omitempty"`
}

// NotifyWebhook is a notification's HTTP endpoint: it receives a signed
// POST with a JSON body (docs/workflows.md).
type NotifyWebhook struct {
	URL string `json:"url"`
}

// NotifyEmail is a notification's recipients, sent through the node's
// SMTP settings (those of send_email).
type NotifyEmail struct {
	To []string `json:"to"`
}

// Notification delivery statuses.
const (
	NotificationPending = "pending"
	NotificationSent    = "sent"
	NotificationFailed  = "failed" // gave up after its last attempt
)

// Notification is one delivery of one rule's event for one run to one
// target (a webhook URL or an email's recipients).
type Notification struct {
	ID      string `json:"-"`
	RunID   string `json:"-"`
	TimerID string `json:"-"`
	App     string `json:"-"`
	On      string `json:"on"`
	Channel string `json:"channel"`
	Target  string `json:"target"`
	Status  string `json:"status"`
	// Attempts counts the deliveries tried.
	Attempts int        `json:"attempts"`
	SentAt   *time.Time `json:"sent_at"`
	Error    string     `json:"error"`
	// NextAt is when the next delivery is due (or, while one is in
	// flight, when its claim ends). Internal.
	NextAt    time.Time `json:"-"`
	CreatedAt time.Time `json:"-"`
	// Payload is what is delivered: the webhook's JSON body, or the
	// email's subject and text. Internal.
	Payload []byte `json:"-"`
}

// NotifyEvent is a run's final result waiting to be turned into its
// notifications: written with the result, in the same transaction.
type NotifyEvent struct {
	RunID      string
	Attempt    int
	TimerID    string
	Status     RunStatus
	FinishedAt time.Time
	// ClaimUntil fences the event's expansion: the claim that read it.
	ClaimUntil time.Time
}

// RunStatus is the state of one run.
type RunStatus string

// Run statuses. A run is born pending; a claim moves it to running; it ends
// succeeded, failed, skipped or cancelled. A failed attempt with attempts
// left goes back to pending with a later DueAt.
const (
	RunPending   RunStatus = "pending"
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunSkipped   RunStatus = "skipped"
	RunCancelled RunStatus = "cancelled"
)

// RunRetrying is the status the JSON form of a run (RunJSON) shows for a
// pending run whose last attempt failed and that waits for its retry
// (Failures > 0). It is never stored: the store keeps such a run pending.
const RunRetrying RunStatus = "retrying"

// RunStatuses are the statuses a run is stored with, in the order of its
// life.
var RunStatuses = []RunStatus{RunPending, RunRunning, RunSucceeded, RunFailed, RunSkipped, RunCancelled}

// Valid reports whether s is a known status.
func (s RunStatus) Valid() bool { return slices.Contains(RunStatuses, s) }

// Terminal reports whether s is a final status.
func (s RunStatus) Terminal() bool {
	return s == RunSucceeded || s == RunFailed || s == RunSkipped || s == RunCancelled
}

// Run is one fire of one timer at one nominal instant. Its ID is the same
// for every attempt of that fire (see RunID). Its JSON form is RunJSON.
type Run struct {
	ID          string
	TimerID     string
	ScheduledAt time.Time
	// DueAt is when the run is to be dispatched next: ScheduledAt at first
	// (plus the timer's jitter, see Policy.Jitter), later for a retry, now
	// for a fire that is being caught up.
	DueAt      time.Time
	Status     RunStatus
	Attempt    int
	StartedAt  *time.Time
	FinishedAt *time.Time
	DurationMS int64
	Output     string
	Error      string
	Node       string
	// LeaseUntil is when a running run's claim expires; after it, the
	// sweeper may hand the run to another node.
	LeaseUntil *time.Time
	// Manual is true for runs made by a "trigger now" request or a backfill.
	Manual bool
	// Reason, for a skipped run, is why its fire did not run: one of the
	// Skip* codes. Error says the same in words. Empty for other runs.
	Reason string
	// UpstreamRunID is, for a run made because its timer's upstreams
	// ended (Timer.After), the id of the upstream run whose end made it;
	// empty for other runs.
	UpstreamRunID string
	CreatedAt     time.Time
	// FireID, on a fire split into shards (broadcast, shards), is the id
	// of the fire's own run: set on it and on each of its shards; empty
	// on every other run.
	FireID string
	// Shard is set on a shard of a split fire: which of how many. The
	// fire's own run has FireID == ID and no Shard.
	Shard *Shard
	// TargetNode, when not empty, is the only node that may claim the
	// run while it is pending: the node a shard was placed on, or one a
	// run was handed to because it has the run's handler.
	TargetNode string
	// Request is what the executor sent for the run's last attempt,
	// secrets redacted; nil before an attempt recorded one.
	Request *SentRequest
	// Failures is how many of the run's attempts ran and failed; an
	// attempt lost with its node's lease, fenced off or handed off is
	// not one. Retry.MaxAttempts bounds it, and a run with failures is a
	// retry, exempt from the misfire policy.
	Failures int
	// RerunOf is, for a run made by a rerun (POST /api/v1/runs/{id}/rerun),
	// the id of the run it runs again; empty for other runs.
	// RerunScheduledAt is then that run's ScheduledAt, which the rerun's
	// callback carries as X-Chime-Scheduled-At (its own ScheduledAt is
	// when it was made: a timer's runs are unique per instant).
	RerunOf          string
	RerunScheduledAt time.Time
}

// Shard says which shard of a split fire a run is: Index from 0 to
// Total-1. Handlers read it as run.Shard; callbacks get it as the headers
// X-Chime-Shard-Index and X-Chime-Shard-Total.
type Shard struct {
	Index int `json:"index"`
	Total int `json:"total"`
}

// IsFire reports whether r is the own run of a fire split into shards.
func (r *Run) IsFire() bool { return r.FireID != "" && r.FireID == r.ID }

// Skip reasons: the codes of Run.Reason, each the one cause of a fire that
// was not run and is recorded skipped. They are stable (API, metrics
// label chime_fires_skipped_total{reason}); docs/skips.md is their table.
const (
	// SkipMisfire: a fire found late (after an outage) that the misfire
	// policy does not run: every one under skip, all but the latest under
	// latest, all but the MaxMissed most recent under all.
	SkipMisfire = "misfire"
	// SkipCatchupWindow: a fire found later than the timer's catchup
	// window.
	SkipCatchupWindow = "catchup_window"
	// SkipOverlap: a fire due while the previous run still ran, under the
	// overlap policy skip or buffer_one.
	SkipOverlap = "overlap"
	// SkipPaused: a fire of a paused timer.
	SkipPaused = "paused"
	// SkipMaxFires: a fire after the timer made its policy.max_fires.
	SkipMaxFires = "max_fires"
	// SkipHandlerMissing: a handler run whose handler no live node
	// advertises (at once), or that is not registered on the node that ran
	// its last attempt (an executor that does not know the nodes'
	// handlers).
	SkipHandlerMissing = "handler_missing"
	// SkipEndAt: a planned fire after the timer's policy.end_at (the bound
	// was moved before it after it was planned).
	SkipEndAt = "end_at"
)

// SkipReasons lists every skip reason code, in the order of the table of
// docs/skips.md.
var SkipReasons = []string{SkipMisfire, SkipCatchupWindow, SkipOverlap, SkipPaused, SkipMaxFires, SkipHandlerMissing, SkipEndAt}

// Skipped returns the run of timer timerID at instant at, recorded skipped for
// reason (a Skip* code), explained by why, recorded at now.
func Skipped(timerID string, at, now time.Time, reason, why string) *Run {
	return &Run{ID: RunID(timerID, at), TimerID: timerID, ScheduledAt: at, DueAt: at,
		Status: RunSkipped, Reason: reason, Error: why, CreatedAt: now, FinishedAt: &now}
}

// Rerun returns a new manual run of timer timerID, due at now, that runs
// orig again: its callbacks carry orig's scheduled instant (the first
// run's, when orig is a rerun itself) and orig's id (Run.RerunOf).
func Rerun(timerID string, orig *Run, now time.Time) *Run {
	scheduled := orig.ScheduledAt
	if orig.RerunOf != "" && !orig.RerunScheduledAt.IsZero() {
		scheduled = orig.RerunScheduledAt
	}
	return &Run{ID: RunID(timerID, now), TimerID: timerID, ScheduledAt: now, DueAt: now,
		Status: RunPending, Manual: true, CreatedAt: now, RerunOf: orig.ID, RerunScheduledAt: scheduled}
}

// Result is what an attempt produced, recorded by Store.FinishRuns.
type Result struct {
	RunID      string
	Node       string // the node that holds the claim (fence)
	Attempt    int    // the attempt that holds the claim (fence)
	Status     RunStatus
	StartedAt  time.Time
	FinishedAt time.Time
	Output     string
	Error      string
	// Reason is the skip reason code of a skipped result (Run.Reason).
	Reason string
	// RetryAt, when not zero and Status is failed, sends the run back to
	// pending with DueAt = RetryAt instead of ending it.
	RetryAt time.Time
	// Request, when not nil, is what the attempt sent (secrets redacted),
	// stored with the result.
	Request *SentRequest
	// ScheduledAt and DueAt, when set, are the run's instants as the
	// attempt had them (Run.ScheduledAt, and Run.DueAt or ScheduledAt when
	// that is zero): the store then keeps the headers of Request that
	// repeat them (X-Chime-Scheduled-At, X-Chime-Due-At) out of the stored
	// row and rebuilds them from the row when the run is read. Like
	// TimerID they must be the run's own; they change nothing else.
	ScheduledAt, DueAt time.Time
	// Notify, when set and the result ends the run (succeeded or failed
	// without RetryAt), makes FinishRuns write a NotifyEvent for it in the
	// same transaction as the result, if the fence holds.
	Notify bool
	// TimerID, when set, is the run's timer: for the NotifyEvent, and so
	// that the store finds the timers that run after it without reading
	// the run. It must be the run's own timer.
	TimerID string
	// HTTPStatus and ResponseHeader are what the receiver of an HTTP
	// action answered (ResponseHeader as ResponseHeaders keeps it); zero
	// and nil when no answer came or the action is of another type.
	HTTPStatus     int
	ResponseHeader map[string]string
}

// Node is one live chime process.
type Node struct {
	ID        string    `json:"id"`
	Addr      string    `json:"addr"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	Slices    []string  `json:"slices"`
	// PoolInUse and PoolCapacity are the node's executor pool at its
	// last heartbeat: actions running, and how many may run at once (0
	// from a node of a version that did not tell them).
	PoolInUse    int `json:"pool_in_use"`
	PoolCapacity int `json:"pool_capacity"`
	// Handlers are the names of the Go handlers registered on the node,
	// sorted (nil from a node of a version that did not tell them).
	Handlers []string `json:"handlers"`
	// ClaimMode is how the node claims the runs it starts: ClaimsEager
	// (every node of this version), ClaimsLazy (a node of an earlier
	// version that started runs without a claim write), or "" (an earlier
	// version that claims with a write). A node takes no slice while a
	// live ClaimsLazy node may still start runs (docs/cluster.md, "Rolling
	// upgrades").
	ClaimMode string `json:"claim_mode"`
	// Standby is set while the node claims nothing (its clock is too far
	// off the store's): no shard or hand-off is placed on it, and the runs
	// placed on it are freed for the other nodes.
	Standby bool `json:"standby,omitempty"`
	// Coordination is where the node's slice locks and leader elections
	// live: CoordinationRedis, CoordinationDB or CoordinationLocal ("" from
	// a node of a version that did not tell it). Every node of a cluster
	// must run the same; a node refuses to start beside a live node that
	// runs another.
	Coordination string `json:"coordination"`
}

// The coordination modes a node publishes with its heartbeat
// (Node.Coordination).
const (
	// CoordinationRedis: the slice index, locks and elections in Redis.
	CoordinationRedis = "redis"
	// CoordinationDB: the slice locks and elections are lease rows of the
	// store's database, and the slice index reads the store's pending runs.
	CoordinationDB = "db"
	// CoordinationLocal: in this process (one node on its store), or in
	// files beside a SQLite file shared by processes of one host.
	CoordinationLocal = "local"
)

// The claim modes a node publishes with its heartbeat (Node.ClaimMode).
const (
	// ClaimsLazy: published by nodes of earlier versions, whose slice
	// owner started some runs without a claim write, fenced by its slice
	// lock.
	ClaimsLazy = "lazy"
	// ClaimsEager: every run is claimed with a write before it starts.
	ClaimsEager = "eager"
)

// HasHandler reports whether the node advertised the handler name.
func (n Node) HasHandler(name string) bool {
	for _, h := range n.Handlers {
		if h == name {
			return true
		}
	}
	return false
}

// FieldError is a validation error that names the offending input field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }

// CycleError refuses a timer's After that would close a cycle. Path names
// the timers around the cycle, in the order runs flow, the saved timer at
// both ends: each as "app/name" (or its id when its name could not be
// read). It unwraps to the *FieldError on "after" that says so.
type CycleError struct {
	Path []string
}

func (e *CycleError) Error() string { return e.Unwrap().Error() }

// Unwrap returns the *FieldError on "after" naming the whole path.
func (e *CycleError) Unwrap() error {
	return Errorf("after", "makes a cycle: %s", strings.Join(e.Path, " → "))
}

// Errorf returns a *FieldError for field.
func Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

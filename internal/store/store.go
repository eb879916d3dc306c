// Package store defines the durable storage of timers and runs behind one
// interface, implemented for SQLite, MySQL/MariaDB and PostgreSQL by
// package internal/store/sqlstore. The store is the source of truth: the slice index
// and the locks are caches and hints, and every guarantee that a run executes
// at most once rests on the conditional updates here (ClaimRuns, FinishRuns).
//
// Times are kept as int64 Unix nanoseconds in every dialect, so that all
// nodes compare instants exactly and no driver converts zones.
package store

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/chimehq/chime/model"
)

// TimerFilter selects timers for ListTimers. Zero fields do not filter.
type TimerFilter struct {
	App string
	// Apps, when not empty, keeps only timers of these apps (an app-scoped
	// token's view); with App as well, both must hold.
	Apps    []string
	Enabled *bool
	// Paused, when set, keeps only timers paused (true) or not (false).
	Paused *bool
	// NameContains, when not empty, keeps timers whose name contains it,
	// ignoring ASCII case. It is a scan of the timers the other fields
	// select (no index serves a substring), paged like the rest.
	NameContains string
	// Sort is the order: SortID (the default) or SortNextFire.
	Sort string
	// After is an opaque cursor from the previous page (its next cursor),
	// of a list in the same order.
	After string
	Limit int // default 100, max 1000
}

// Timer list orders (TimerFilter.Sort).
const (
	// SortID orders timers by ID.
	SortID = ""
	// SortNextFire orders timers by their stored next fire
	// (model.Timer.NextFireAt), those without one (disabled, or no fire
	// left) last, then by ID: an index range, as fast as SortID. The
	// stored next fire is written with the timer's row only, by a save
	// and by the planner when it extends the timer's plan, never at a
	// fire: once the stored fire has passed, the timer sorts by it until
	// the planner's next write, which comes within about half the
	// look-ahead plus one planner interval (5 min 5 s by default; a
	// timer planned by count, one that fires more often than every few
	// seconds, at every pass). The order is thus the true one but for
	// timers whose stored next fire is in the past, which sort first.
	SortNextFire = "next_fire"
)

// Plan is how far SetPlannedUntil records a timer planned, and its next
// fire then (zero: none).
type Plan struct {
	Until, NextFire time.Time
	// Version, when not zero, is the timer's model.Timer.Version as the
	// plan's maker read it (TimersToPlan): the plan is recorded only if
	// the timer still has that version. Zero records it whatever the
	// timer's version (for callers that do not know it).
	Version int64
}

// RunFilter selects runs for ListRuns, newest ScheduledAt first (oldest
// first with Ascending), and for RunCounts. Zero fields do not filter.
type RunFilter struct {
	TimerID string
	// App keeps only runs of the timers of this app; Apps, when not empty,
	// only those of the timers of these apps (an app-scoped token's view).
	// With both, both must hold. Runs whose timer no longer exists are left
	// out by either.
	App    string
	Apps   []string
	Status model.RunStatus
	// ScheduledFrom, when not zero, keeps runs scheduled at or after it.
	ScheduledFrom time.Time
	// ScheduledBefore, when not zero, keeps runs scheduled before it.
	ScheduledBefore time.Time
	// Ascending lists the runs oldest ScheduledAt first (a timer's
	// upcoming fires); a cursor of one order is not one of the other.
	Ascending bool
	// Before is an opaque cursor from the previous page (NextCursor).
	Before string
	Limit  int // default 100, max 1000
}

// Claim asks to move one pending run to running.
type Claim struct {
	RunID string
	// DueBy, when not zero, makes the claim fail for a run whose due_at is
	// after DueBy, so that a stale index entry cannot claim a run that was
	// rescheduled (a retry) before its new instant.
	DueBy      time.Time
	Node       string
	LeaseUntil time.Time
	Now        time.Time
}

// Stats counts timers and runs.
type Stats struct {
	TimersEnabled  int64                     `json:"timers_enabled"`
	TimersDisabled int64                     `json:"timers_disabled"`
	Runs           map[model.RunStatus]int64 `json:"runs"`
}

// TimerCounts are the counts of Store.CountTimers: Enabled counts the
// enabled timers that are not paused, Paused the enabled ones that are,
// Disabled the rest (paused or not); the three add up to every timer.
type TimerCounts struct {
	Enabled, Paused, Disabled int64
}

// PlanCursor is where a TimersToPlan scan resumes: after the timer with
// this PlannedUntil and ID. The zero value starts at the beginning.
type PlanCursor struct {
	PlannedUntil time.Time
	ID           string
}

// CursorOf returns the cursor after t.
func CursorOf(t *model.Timer) PlanCursor { return PlanCursor{PlannedUntil: t.PlannedUntil, ID: t.ID} }

// TimerWrite is one save of a timer, written by Store.SaveTimer in one
// transaction.
type TimerWrite struct {
	// Timer is written whole, PlannedUntil included: inserted when Create
	// (its ID set by the caller), else updated by ID (CreatedAt keeps its
	// stored value).
	Timer  *model.Timer
	Create bool
	// ReplaceFrom, when not zero and without CancelPending, deletes the
	// timer's pending runs, and its runs skipped with reason
	// model.SkipPaused, with ScheduledAt >= ReplaceFrom before Runs are
	// inserted: a replan. A
	// pending run of an instant that Runs has too, pending and as planning
	// made it (attempt 0, due at its instant, not manual), may be kept
	// instead of deleted and inserted again.
	ReplaceFrom time.Time
	// CancelPending ends every pending run of the timer: a disable. The
	// planned fires still to come (scheduled at or after ReplaceFrom, or
	// the writing process's clock when it is zero; never attempted, neither manual
	// nor shards) are deleted; the others (fires that came and wait for a
	// claim or a retry, manual runs, shards) are marked cancelled. A run claimed meanwhile is running, neither
	// deleted nor cancelled: the claim and the save are conditional
	// writes of the same row, one of them finds it changed.
	CancelPending bool
	// Runs are inserted as InsertRuns inserts them (a cancelled run of the
	// same instant is revived).
	Runs []*model.Run
	// Audit, when not nil, is appended.
	Audit *model.AuditEntry
}

// Store is the durable storage of timers and runs. Implementations are safe
// for concurrent use by many goroutines and many processes.
type Store interface {
	// GetTimer returns model.ErrNotFound when id does not exist. GetTimer,
	// GetTimerByName and ListTimers load the timers' After; the timers of
	// ClaimRuns and TimersToPlan leave it empty.
	GetTimer(ctx context.Context, id string) (*model.Timer, error)
	// GetTimerByName looks a timer up by its unique (app, name).
	GetTimerByName(ctx context.Context, app, name string) (*model.Timer, error)
	// UpdateTimer replaces every field of the timer with t.ID, including
	// PlannedUntil. ErrNotFound when missing; an error wrapping
	// model.ErrConflict when another timer has its (App, Name).
	UpdateTimer(ctx context.Context, t *model.Timer) error
	// SaveTimer writes w in one transaction: the timer, the runs it
	// replaces or cancels, its new runs and the audit entry of the change.
	// A create (w.Create, t.ID set by the caller) returns an error wrapping
	// model.ErrConflict when (App, Name) exists; an update errors as
	// UpdateTimer does. On an error nothing is written. It returns the runs that are pending after the call, as
	// InsertRuns does.
	//
	// It is the save path's one writer transaction (a commit, with its
	// fsync, is most of what a save costs); UpdateTimer, InsertRuns and AppendAudit remain for the callers that write one of
	// them.
	SaveTimer(ctx context.Context, w TimerWrite) (inserted []*model.Run, err error)
	// DeleteTimer deletes the timer and its pending runs; finished runs are
	// deleted with it. ErrNotFound when missing; an error wrapping
	// model.ErrHasDependents, naming them, while other timers run after it
	// (DetachDependents first).
	DeleteTimer(ctx context.Context, id string) error
	// Downstreams returns the edges of the timers that run after the timer
	// id (whose After names it), ordered by downstream id.
	Downstreams(ctx context.Context, id string) ([]model.Edge, error)
	// DetachDependents removes the timer id from the After of every timer
	// that runs after it, and returns their ids.
	DetachDependents(ctx context.Context, id string) ([]string, error)
	// ListTimers returns timers ordered by ID (or as f.Sort says), and the
	// cursor of the next page ("" on the last page). An unknown Sort, or a
	// cursor of another order, is an error.
	ListTimers(ctx context.Context, f TimerFilter) (timers []*model.Timer, next string, err error)

	// TimersToPlan returns up to limit enabled timers whose PlannedUntil is
	// before horizon, ordered by (PlannedUntil, ID), after the cursor. A scan
	// that plans the timers it gets (moving their PlannedUntil past horizon)
	// and resumes after the last one visits every timer once, each page an
	// index range (the cost does not grow with the number of timers).
	// The timers carry what planning needs (ID, Schedule, Timezone,
	// Enabled, Paused, CreatedAt, UpdatedAt, PlannedUntil, Policy, and
	// Version, never zero); their other fields are zero.
	TimersToPlan(ctx context.Context, horizon time.Time, after PlanCursor, limit int) ([]*model.Timer, error)
	// SetPlannedUntil records how far each timer of plans (id → plan) is
	// planned, and its next fire (model.Timer.NextFireAt), in one
	// transaction. It never moves PlannedUntil backwards (a plan that would
	// is not recorded, its next fire neither) and skips timers that no
	// longer exist. A plan with a Version is recorded only if the timer
	// still has that version, checked by the write itself: a timer saved
	// since the planner read it keeps the PlannedUntil its save wrote
	// (see InsertPlanned). The version is not changed.
	SetPlannedUntil(ctx context.Context, plans map[string]Plan) error
	// InsertRuns inserts pending runs, in batches, ignoring any whose
	// (TimerID, ScheduledAt) exists already, except that a cancelled run is
	// revived as pending. It returns the runs that are pending after the call
	// (new or revived), for the caller to index.
	InsertRuns(ctx context.Context, runs []*model.Run) (inserted []*model.Run, err error)
	// InsertPlanned inserts the runs of a planning pass as InsertRuns
	// does, guarded by their timers' versions: a run is inserted only if
	// its timer still exists with the version versions[run.TimerID] (its
	// model.Timer.Version as TimersToPlan read it). The other runs are
	// dropped, neither inserted nor returned. A run whose timer has no
	// version in versions (or zero) is inserted unguarded, as InsertRuns
	// would insert it.
	//
	// The versions are checked in each transaction that inserts runs,
	// before its inserts, and hold until it commits (on PostgreSQL and
	// MySQL/MariaDB the timers' rows are locked for share; SQLite has one
	// writer): a write of the timer that changes its version (SaveTimer,
	// UpdateTimer, DetachDependents) or deletes it commits either before
	// the check, and the runs of the definition the planner read are
	// dropped, or after the inserts, and then finds them like any run it
	// replaces, cancels, skips or deletes. Caveat: a call of many runs commits in
	// several transactions, and a save between two of them finds the
	// runs of the earlier ones only: it replaces those from its
	// ReplaceFrom, and those before are fires of the old definition that
	// were due before the save, as if they had been planned earlier. The
	// planner's plan of such a timer is then not recorded either
	// (Plan.Version): the next pass plans it again.
	InsertPlanned(ctx context.Context, runs []*model.Run, versions map[string]int64) (inserted []*model.Run, err error)

	// GetRun returns model.ErrNotFound when id does not exist.
	GetRun(ctx context.Context, id string) (*model.Run, error)
	// RunAttempts returns the recorded attempts of run id (FinishRuns
	// records one per result whose fence held, in the same
	// transaction), by attempt number; none for a run without any or that
	// does not exist. A run's attempts are deleted with it.
	RunAttempts(ctx context.Context, id string) ([]model.Attempt, error)
	// InsertRerun inserts r: a pending manual run, due at r.DueAt, that
	// runs again the run r.RerunOf, whose ScheduledAt r.RerunScheduledAt
	// is (see model.Run.RerunOf). It fails when a run with r's id exists.
	InsertRerun(ctx context.Context, r *model.Run) error
	// ListRuns returns runs newest first (or oldest first: f.Ascending)
	// and the cursor of the next page ("" on the last). Each page is a
	// range of an index of the runs in the list's order: by timer and
	// instant with a TimerID, by status and instant with the Status of
	// ended runs, else by instant, the apps' filter a probe of timers by
	// id per run. A Status that is not a model.RunStatus is an error.
	ListRuns(ctx context.Context, f RunFilter) (runs []*model.Run, next string, err error)
	// RunCounts counts the runs f selects by status, ignoring f.Status,
	// f.Ascending, f.Before and f.Limit; a status without runs is absent.
	// Each status is counted on an index range as ListRuns reads it, so a
	// count costs in proportion to the runs it counts.
	RunCounts(ctx context.Context, f RunFilter) (map[model.RunStatus]int64, error)
	// PendingRuns returns pending runs with from <= DueAt < to, ordered by
	// DueAt, at most limit (all when limit <= 0). It rebuilds the slice index.
	PendingRuns(ctx context.Context, from, to time.Time, limit int) ([]*model.Run, error)
	// DueRuns returns the pending runs with from <= DueAt < to whose timer
	// falls in one of the buckets in of buckets (index.BucketOf; all when
	// buckets <= 1 or in is empty), ordered by DueAt, with only ID, TimerID,
	// DueAt and Status set. It is how a trigger rebuilds one slice without
	// reading the others, and rechecks the slices of one minute it holds with
	// one read instead of one per bucket.
	DueRuns(ctx context.Context, from, to time.Time, buckets int, in ...int) ([]*model.Run, error)

	// ClaimRuns moves each run that is still pending to running, setting
	// Node, LeaseUntil, StartedAt = Now and Attempt = Attempt+1, in one
	// round trip or a few. It returns the runs this call claimed, with their
	// timers loaded, sorted by ClaimOrder (the order to start them in);
	// runs that were not pending are left out. This conditional update is
	// the exactly-once guard.
	ClaimRuns(ctx context.Context, claims []Claim) ([]ClaimedRun, error)
	// FinishRuns records many results in a few round trips; the returned
	// ok says, per result, whether the fence held: a result applies
	// only while its run is running with r.Node and r.Attempt. With
	// r.RetryAt set the run goes back to pending with DueAt = RetryAt.
	//
	// Any result can be stored; callers need not prepare it. Output and
	// Error are stored as valid UTF-8 (each invalid sequence replaced by
	// U+FFFD), without NUL bytes, and cut at a rune boundary to
	// MaxResultText bytes each. A Status that is not final is recorded as
	// failed, saying so in Error. Should the database still reject a
	// result's text, the result is recorded with its Output empty and a
	// short note saying why in Error; one result that the database
	// rejects does not fail the others: they are recorded all the same.
	// A store may commit a large call in parts (the SQL store does on
	// MySQL and PostgreSQL, a transaction per 500 results, so that a
	// result batch never holds thousands of row locks nor is lost whole
	// to a timeout): then, on an error, it returns ok too, true for the
	// results recorded before the error, and false for the others, which
	// were not recorded. A nil ok with an error means nothing was
	// recorded.
	//
	// FinishRuns, and SetRunStatus to failed or succeeded, make the runs of the timers that run after the ended runs' timers
	// (model.Timer.After) in the transaction that records the ends: a run
	// due at once, with UpstreamRunID set, for each downstream timer whose
	// upstreams have all ended as it asks since its last such run. Only an
	// end whose fenced write applied counts, so one upstream run's end
	// makes at most one run of each downstream timer. FinishRuns and
	// SetRunStatus return the runs they made (made), once committed, for
	// the caller to put in the slice index at once; a caller that drops
	// them leaves them to a trigger's next read of the store (every few
	// seconds).
	FinishRuns(ctx context.Context, rs []model.Result) (ok []bool, made []*model.Run, err error)
	// SetRunStatus moves a run from status from to status to, recording
	// reason in Error (skips and cancellations). ErrNotClaimed when the run
	// was not in status from.
	SetRunStatus(ctx context.Context, runID string, from, to model.RunStatus, reason string) (made []*model.Run, err error)
	// RescheduleRun sets DueAt of a pending run (catching up a missed fire).
	// ErrNotClaimed when the run is no longer pending.
	RescheduleRun(ctx context.Context, runID string, dueAt time.Time) error

	// ExtendLeases moves LeaseUntil to until for each attempt of leases
	// that node still holds (the run is running, claimed by node, at that
	// attempt), and returns the leases it no longer holds (finished,
	// cancelled by an overlap policy, or requeued and claimed again). The
	// attempt is the fence: an extension never reaches a later attempt of
	// the same run, even one claimed by the same node. A lease whose
	// LeaseUntil has passed is extended too while nobody requeued its run.
	ExtendLeases(ctx context.Context, node string, leases []Lease, until time.Time) (lost []Lease, err error)
	// Release gives back a claimed run that was not started: running →
	// pending with DueAt = dueAt and the claim's attempt undone, fenced on
	// r.Node and r.Attempt (the holder's own decision: it holds the claim).
	Release(ctx context.Context, r *model.Run, dueAt time.Time) error
	// CountRuns counts a timer's runs in the given statuses (all when none).
	CountRuns(ctx context.Context, timerID string, statuses ...model.RunStatus) (int, error)
	// CountFires counts a timer's scheduled fires, what policy.max_fires
	// bounds: its runs that are not manual (trigger, backfill), not
	// shards (a split fire counts once) and not made by upstream ends.
	// Ended counts those that ended succeeded or failed, the ones that
	// retention deleted (PruneRuns) included; Open those pending or
	// running.
	CountFires(ctx context.Context, timerID string) (FireCount, error)
	// ExpiredLeases returns running runs whose lease ended before now and
	// not before since (no lower bound when since is zero), oldest lease
	// first. It answers only while the store takes writes (a holder could
	// have extended its lease), which on SQLite means under the write
	// lock. The lower bound is what keeps a sweeper's pass cheap: the
	// index of running leases also holds, until the database reclaims
	// them, the old lease ends of every extension, all of them before now.
	ExpiredLeases(ctx context.Context, since, now time.Time, limit int) ([]*model.Run, error)
	// Requeue moves a running run back to pending with DueAt = dueAt,
	// keeping its attempt count, fenced on the condition it was decided on:
	// r.Node and r.Attempt always and, when r.LeaseUntil is set (a sweeper
	// saw the lease expired), on lease_until still being exactly
	// *r.LeaseUntil and before now, so that a lease its holder extended in
	// the meantime is left alone. ErrNotClaimed when the fence did not hold.
	Requeue(ctx context.Context, r *model.Run, dueAt, now time.Time) error
	// RunningOn returns up to limit runs that node holds (running, claimed
	// by node), oldest claim first. A node that starts calls it for the
	// runs its previous process left behind.
	RunningOn(ctx context.Context, node string, limit int) ([]*model.Run, error)

	// Now returns the store's clock: the one clock that decisions between
	// nodes (leases, due times) are judged by. Nodes measure their offset
	// against it.
	Now(ctx context.Context) (time.Time, error)

	// Heartbeat upserts a node's liveness; ListNodes returns the nodes seen
	// since the given instant.
	Heartbeat(ctx context.Context, n model.Node) error
	ListNodes(ctx context.Context, seenSince time.Time) ([]model.Node, error)
	DeleteNode(ctx context.Context, id string) error

	Stats(ctx context.Context) (Stats, error)
	// CountTimers counts the timers that App, Apps and NameContains of f
	// select, by state (its other fields are ignored).
	CountTimers(ctx context.Context, f TimerFilter) (TimerCounts, error)

	Tokens
	Audit
	SigningSecrets
	AppSecrets
	Retention
	Notifications
	Reports
	Backups
	Fleet
	Dashboard

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close() error
}

// MaxResultText is the most bytes of a result's Output, and of its Error,
// that FinishRuns keeps. It is above what the executor hands
// them (action.MaxOutput, 64 KiB, which can grow up to three times when
// invalid UTF-8 is repaired), so that only other callers' text is cut.
const MaxResultText = 256 << 10

// Lease names one attempt of a run, the unit of fencing: claim, lease
// extension, result, release and requeue all apply to one (run, attempt).
type Lease struct {
	RunID   string
	Attempt int
}

// ClaimedRun is a run that this node now holds, with its timer.
type ClaimedRun struct {
	Run   *model.Run
	Timer *model.Timer
}

// ClaimOrder orders claimed runs as they are to be started when more are
// due than can start at once: higher timer priority first
// (model.Timer.EffectivePriority), then earlier DueAt, then run id. It is
// a comparison function for slices.SortFunc.
func ClaimOrder(a, b ClaimedRun) int {
	if pa, pb := a.Timer.EffectivePriority(), b.Timer.EffectivePriority(); pa != pb {
		return pb - pa
	}
	if c := a.Run.DueAt.Compare(b.Run.DueAt); c != 0 {
		return c
	}
	return strings.Compare(a.Run.ID, b.Run.ID)
}

// Tokens stores API tokens (hashed).
type Tokens interface {
	// CreateToken inserts t; t.ID and t.Hash must be set.
	CreateToken(ctx context.Context, t *model.Token) error
	// TokenByHash returns the token whose Hash is hash, or an error
	// wrapping model.ErrNotFound.
	TokenByHash(ctx context.Context, hash string) (*model.Token, error)
	// ListTokens returns every token, oldest first.
	ListTokens(ctx context.Context) ([]*model.Token, error)
	// DeleteToken revokes a token. ErrNotFound when missing.
	DeleteToken(ctx context.Context, id string) error
	// TouchToken records that the token id was used at at (LastUsedAt),
	// unless a later use is recorded; a missing token is not an error.
	TouchToken(ctx context.Context, id string, at time.Time) error
	// HasTokens reports whether any token exists.
	HasTokens(ctx context.Context) (bool, error)
}

// AuditFilter selects audit entries, newest first. Zero fields do not
// filter.
type AuditFilter struct {
	App string
	// Apps, when not empty, keeps only entries of these apps.
	Apps   []string
	Target string
	// Before is the cursor of the previous page (its NextCursor).
	Before string
	Limit  int // default 100, max 1000
}

// Audit stores the audit log.
type Audit interface {
	// AppendAudit records e; e.ID must be set and sort by time (a ULID).
	AppendAudit(ctx context.Context, e *model.AuditEntry) error
	// ListAudit returns entries newest first and the cursor of the next
	// page ("" on the last).
	ListAudit(ctx context.Context, f AuditFilter) ([]*model.AuditEntry, string, error)
}

// SigningSecrets stores the apps' callback signing secrets.
type SigningSecrets interface {
	// EnsureSigningSecret gives app its first secret (version 1, created
	// at now) unless it has one already, and reports whether it did.
	// Concurrent calls create one secret.
	EnsureSigningSecret(ctx context.Context, app, secret string, now time.Time) (bool, error)
	// RotateSigningSecret adds a new secret for app, the next version, and
	// makes each secret still signing expire at oldUntil (or earlier, if
	// it expires sooner). It returns the new secret. A concurrent rotation
	// makes one of them fail with an error wrapping model.ErrConflict.
	RotateSigningSecret(ctx context.Context, app, secret string, now, oldUntil time.Time) (*model.SigningSecret, error)
	// ActiveSigningSecrets returns app's secrets that have not expired at
	// now, newest first (none: an empty slice).
	ActiveSigningSecrets(ctx context.Context, app string, now time.Time) ([]*model.SigningSecret, error)
}

// AppSecrets stores the secrets kept per app (model.AppSecret), their
// values encrypted like the other secrets.
type AppSecrets interface {
	// PutAppSecret creates the secret (s.App, s.Name) with s.CreatedAt,
	// or replaces its value, hosts and commands, keeping its CreatedAt;
	// s.UpdatedAt is the time of the write either way.
	PutAppSecret(ctx context.Context, s *model.AppSecret) error
	// AppSecrets returns app's secrets, values included, by name (none:
	// an empty slice).
	AppSecrets(ctx context.Context, app string) ([]*model.AppSecret, error)
	// DeleteAppSecret deletes the secret name of app; an error wrapping
	// model.ErrNotFound when there is none.
	DeleteAppSecret(ctx context.Context, app, name string) error
}

// MaxPruneBatch is the most rows one statement of PruneRuns or PruneAudit
// deletes: a bigger delete would hold the writer (SQLite's only one) long
// enough for claims and results to queue behind it.
const MaxPruneBatch = 1000

// TimerHistory is a timer's id and its retention settings.
type TimerHistory struct {
	ID      string
	History model.History
}

// FireCount is a timer's scheduled fires (Store.CountFires).
type FireCount struct {
	Ended, Open int
}

// RunPrune says which finished runs of one timer PruneRuns deletes: those
// beyond its Keep newest finished runs and those scheduled before Before,
// but none scheduled at or after Recent.
type RunPrune struct {
	TimerID string
	// Keep, when positive, keeps the timer's Keep newest finished runs (by
	// ScheduledAt) and deletes the older ones; zero or negative: no count
	// limit.
	Keep int
	// Before, when not zero, deletes the finished runs scheduled before
	// it.
	Before time.Time
	// Recent, when not zero, keeps every run scheduled at or after it,
	// whatever Keep and Before say.
	Recent time.Time
	// Limit is the most runs deleted (at most MaxPruneBatch, which is also
	// the default).
	Limit int
}

// Retention deletes old history: finished runs and audit entries. Each
// call deletes at most MaxPruneBatch rows, in one statement (on SQLite, in
// statements of 100, each of which first lets waiting claims and results
// have the one writer); the caller calls again while a call deletes its
// limit.
type Retention interface {
	// TimerHistories returns up to limit timers (default and at most 1000)
	// with an id after after, in id order, with their history settings.
	TimerHistories(ctx context.Context, after string, limit int) ([]TimerHistory, error)
	// PruneRuns deletes the finished runs (succeeded, failed, skipped,
	// cancelled) of p.TimerID that p selects, oldest first, at most
	// p.Limit, and returns how many it deleted. It never deletes a pending
	// or running run, not even one that was finished when the call chose
	// it and is pending again (a cancelled run revived by planning).
	PruneRuns(ctx context.Context, p RunPrune) (int, error)
	// PruneAudit deletes up to limit (at most MaxPruneBatch, the default)
	// audit entries recorded before before, oldest first, and returns how
	// many it deleted.
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)
}

// Notifications stores failure notifications: the outbox of final
// results that FinishRuns writes for results with Notify set (in the
// result's transaction, so that a recorded result's notification survives
// any crash), and the deliveries a notifier makes of them. Both are
// claimed like runs, by a conditional update, so that any node may work
// on them and one that dies leaves them to another.
type Notifications interface {
	// ClaimNotifyEvents claims up to limit events (default 100) whose
	// claim ended before now, until until, and returns them with
	// ClaimUntil = until.
	ClaimNotifyEvents(ctx context.Context, now, until time.Time, limit int) ([]model.NotifyEvent, error)
	// ExpandNotifyEvent deletes the event ev, fenced on ev.ClaimUntil, and
	// inserts ns in the same transaction, skipping those whose ID exists
	// (an event expanded twice). ErrNotClaimed when the fence failed.
	ExpandNotifyEvent(ctx context.Context, ev model.NotifyEvent, ns []*model.Notification) error
	// DueNotifications claims up to limit (default 100) pending
	// notifications with NextAt <= now, earliest first, moving NextAt to
	// until, which they carry as the fence of RecordNotification.
	DueNotifications(ctx context.Context, now, until time.Time, limit int) ([]*model.Notification, error)
	// RecordNotification writes n's Status, Attempts, SentAt and Error and
	// sets NextAt to next, fenced on n.NextAt (the claim).
	// ErrNotClaimed when the fence failed.
	RecordNotification(ctx context.Context, n *model.Notification, next time.Time) error
	// RunNotifications returns a run's notifications, oldest first.
	RunNotifications(ctx context.Context, runID string) ([]*model.Notification, error)
	// AppNotify returns an app's default rules, which apply to its timers
	// that set none (none: an empty slice).
	AppNotify(ctx context.Context, app string) ([]model.NotifyRule, error)
	// SetAppNotify replaces an app's default rules; an empty list deletes
	// them.
	SetAppNotify(ctx context.Context, app string, rules []model.NotifyRule, now time.Time) error
}

// PeriodFilter selects the runs of RunsScheduled.
type PeriodFilter struct {
	// From and To bound the runs' ScheduledAt: From <= ScheduledAt < To.
	From, To time.Time
	// Apps, when not empty, keeps only the runs of timers of these apps
	// (of timers that exist).
	Apps []string
	// After is the cursor of the previous page (its next): the last run id
	// it returned.
	After string
	Limit int // default and at most MaxPeriodPage
}

// MaxPeriodPage is the most runs one RunsScheduled call returns.
const MaxPeriodPage = 5000

// Reports reads the history that reports summarise.
type Reports interface {
	// RunsScheduled returns the runs scheduled in [f.From, f.To), in id
	// order, and the cursor of the next page ("" on the last). Each call
	// reads at most f.Limit runs of the period and returns those of f.Apps'
	// timers among them: with Apps, a page may hold fewer runs, even none,
	// before the last; go on while the cursor is not empty. The runs carry
	// ID, TimerID, ScheduledAt, DueAt, Status, Attempt, StartedAt,
	// FinishedAt, DurationMS, Node and Manual; Output and Error are left
	// empty (a report counts, it does not quote).
	//
	// It reads one range of the runs' primary key, in its order, whatever
	// the number of timers and the history outside the period: run ids
	// start with their scheduled Unix second in fixed-width hex
	// (model.RunID), so the runs of a period are the ids from the hex of
	// From's second to the hex of To's second plus one, filtered on
	// ScheduledAt at the edges. It reads every run of the period, Apps or
	// not: Apps are then filtered with one primary-key probe of timers per
	// timer of the page. A run whose id is not a model.RunID (none that
	// chime makes) is not found.
	RunsScheduled(ctx context.Context, f PeriodFilter) (runs []*model.Run, next string, err error)
}

// Backup file extensions, by format.
const (
	// BackupSQLite is the extension of a SQLite database file (a copy
	// that opens as a store: sqlite:///path/to/copy.db).
	BackupSQLite = ".db"
	// BackupSQL is the extension of an SQL script (pg_dump, mysqldump).
	BackupSQL = ".sql"
)

// ErrBackupTool is wrapped by Backup's error when the dump tool a backend
// needs (pg_dump, mysqldump or mariadb-dump) is not installed on the node.
var ErrBackupTool = errors.New("backup tool not found")

// Backups makes consistent copies of the whole store.
type Backups interface {
	// BackupIn writes a consistent copy of the whole store — every table,
	// as of one instant — to base in root with the extension of its format
	// appended, and returns that file's name in root. The file must not
	// exist. SQLite writes a database file (BackupSQLite) with VACUUM
	// INTO, a read transaction that does not hold the writer; PostgreSQL
	// and MySQL/MariaDB write an SQL script (BackupSQL) with pg_dump, or
	// mysqldump/mariadb-dump --single-transaction, run on this host with
	// the store's credentials (passed through the environment or a 0600
	// file, never the command line): an error wrapping ErrBackupTool when
	// the tool is missing. On an error no file is left at the returned
	// name. Every step goes through
	// root (os.Root), so that a directory swapped for a link meanwhile does
	// not move the copy.
	BackupIn(ctx context.Context, root *os.Root, base string) (name string, err error)
}

// Fleet holds the runs that are placed on nodes: runs handed to a node
// that has their handler, and fires split into shards (broadcast, shards;
// see docs/fleet.md). A run whose TargetNode is set is claimed by that
// node only (ClaimRuns), which finds it with DirectedRuns; the exactly-once
// guard is the same conditional claim as for every run.
type Fleet interface {
	// Handoff gives a claimed run that this node will not start (it lacks
	// the run's handler) to the node target: running → pending with DueAt
	// = dueAt and TargetNode = target, the claim's attempt undone, fenced
	// on r.Node and r.Attempt as Release is.
	Handoff(ctx context.Context, r *model.Run, target string, dueAt time.Time) error
	// DirectedRuns returns up to limit (default 1000) pending runs whose
	// TargetNode is node and whose DueAt is before until, by DueAt.
	DirectedRuns(ctx context.Context, node string, until time.Time, limit int) ([]*model.Run, error)
	// UntargetRuns clears the TargetNode of up to limit pending runs
	// placed on a node that is not in live (it died or left before it
	// claimed them) and returns them: anybody's again, for the index.
	UntargetRuns(ctx context.Context, live []string, limit int) ([]*model.Run, error)
	// StartFire splits the claimed run fire into shards in one
	// transaction, fenced on fire.Node and fire.Attempt: it inserts the
	// shards (pending, each with its FireID, Shard and TargetNode; ids and
	// instants from model.ShardRunID, a shard that exists already is left
	// alone) and leaves the fire running without a lease, waiting for them
	// (FinishFires ends it). ErrNotClaimed when the fence did not hold.
	StartFire(ctx context.Context, fire *model.Run, shards []*model.Run) error
	// FinishFires ends up to limit fires waiting for their shards whose
	// shards have all ended: succeeded when every shard succeeded, else
	// failed, saying how many did not. It returns the ids of the fires it
	// ended, and the runs their ends made for the timers after theirs (as
	// FinishRuns does).
	FinishFires(ctx context.Context, now time.Time, limit int) (done []string, made []*model.Run, err error)
	// FireShards returns the shards of the fire fireID, by index.
	FireShards(ctx context.Context, fireID string) ([]*model.Run, error)
}

// StatsMinute is one node's counts of one minute, for the web UI's
// dashboard (GET /api/v1/stats/series), which merges every node's.
type StatsMinute struct {
	// Minute is the minute's first instant (whole minutes, UTC).
	Minute time.Time
	Node   string
	// Fires counts the attempts that finished in the minute, by status.
	Fires map[string]int64
	// Delays are the bucket counts of the fire delays of the actions that
	// started in the minute (the buckets of metrics.Series), so that nodes'
	// histograms add up and percentiles come from the sum.
	Delays []int64
	// Timers are the node's noted timers (failing or late) at the time of
	// the write; a node writes them with its latest minute only.
	Timers []StatsTimer
}

// StatsTimer is a failing or late timer that one node noted (see
// metrics.TimerNote).
type StatsTimer struct {
	TimerID     string        `json:"timer_id"`
	Failures    int64         `json:"failures,omitempty"`
	LastFailure time.Time     `json:"last_failure,omitzero"`
	Late        int64         `json:"late,omitempty"`
	MaxDelay    time.Duration `json:"max_delay,omitempty"`
	LastLate    time.Time     `json:"last_late,omitzero"`
}

// Dashboard stores each node's per-minute counts for the web UI's
// dashboard: a small table, each node upserting the minutes it counted
// about once a minute.
type Dashboard interface {
	// PutStatsMinutes inserts or replaces (by Minute and Node) rows, in
	// one statement.
	PutStatsMinutes(ctx context.Context, rows []StatsMinute) error
	// StatsMinutes returns the rows whose Minute is at or after since,
	// ordered by Minute, then Node.
	StatsMinutes(ctx context.Context, since time.Time) ([]StatsMinute, error)
	// PruneStatsMinutes deletes the rows whose Minute is before before
	// and returns how many it deleted.
	PruneStatsMinutes(ctx context.Context, before time.Time) (int, error)
}

// Package notify delivers failure notifications: a timer's (or its app's)
// notify rules turned into signed webhooks and emails when its runs fail,
// fail several times in a row, or recover.
//
// The path of one notification:
//
//  1. The executor's recorder marks the final result of a run whose timer
//     notifies (model.Result.Notify); store.FinishRuns writes a notify
//     event (the outbox) in the same transaction as the result, so a
//     recorded result's notifications survive any crash.
//  2. A Notifier, on every node, claims events (ClaimNotifyEvents: a
//     conditional update, like a run's claim), decides which rules fire
//     from the run's result and the timer's earlier runs, and replaces the
//     event by one delivery per rule and channel (ExpandNotifyEvent, one
//     transaction, idempotent by delivery id).
//  3. It claims due deliveries (DueNotifications), sends them, and records
//     each outcome (RecordNotification): sent, or pending again after a
//     backoff, or failed after MaxAttempts. A node that dies mid-way
//     leaves its claims to expire and another node to take them.
//
// Delivery never blocks a run or changes its result: it happens after the
// result is recorded, on its own loop. A webhook may be delivered more
// than once (a node that dies after sending, before recording): its
// webhook-id, the delivery's id, is the same for every attempt.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/startstop"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// Defaults of Config.
const (
	DefaultInterval    = time.Second
	DefaultMaxAttempts = 8
	DefaultBackoff     = 2 * time.Second
	DefaultMaxBackoff  = 5 * time.Minute
	DefaultTimeout     = 10 * time.Second
)

// Emailer sends one plain-text email (internal/app/builtin.SendEmail with the
// node's SMTP settings). messageID is the same for every attempt of one
// delivery.
type Emailer interface {
	SendEmail(ctx context.Context, to []string, subject, body, messageID string) error
}

// SigningSecrets returns an app's active signing secrets, newest first
// (action.SecretCache).
type SigningSecrets interface {
	SigningSecrets(ctx context.Context, app string) ([]string, error)
}

// Store is what a Notifier needs of the store: the outbox and the
// deliveries it claims and records, and the timers and runs it describes
// (store.Store implements it).
type Store interface {
	ClaimNotifyEvents(ctx context.Context, now time.Time, until time.Time, limit int) ([]model.NotifyEvent, error)
	ExpandNotifyEvent(ctx context.Context, ev model.NotifyEvent, ns []*model.Notification) error
	DueNotifications(ctx context.Context, now time.Time, until time.Time, limit int) ([]*model.Notification, error)
	RecordNotification(ctx context.Context, n *model.Notification, next time.Time) error
	GetTimer(ctx context.Context, id string) (*model.Timer, error)
	GetRun(ctx context.Context, id string) (*model.Run, error)
	ListRuns(ctx context.Context, f store.RunFilter) (runs []*model.Run, next string, err error)
}

// Config configures a Notifier.
type Config struct {
	Store Store
	// Client sends webhooks; it should dial through the egress policy, as
	// callbacks do (action.NewHTTPRunnerWith(...).Client). Default: a
	// client without a policy.
	Client *http.Client
	// Secrets signs webhooks with their app's secrets; nil sends them
	// unsigned.
	Secrets SigningSecrets
	// Email sends email notifications; nil fails them with a message
	// saying that the node has no SMTP settings.
	Email Emailer
	// AppDefaults returns an app's default rules, which apply to its
	// timers that set none; nil: no app defaults.
	AppDefaults func(ctx context.Context, app string) ([]model.NotifyRule, error)
	// BaseURL prefixes the links of a notification ("https://chime.example.com");
	// empty: the links are paths.
	BaseURL string
	// Interval is how often the notifier looks for work. Default
	// DefaultInterval.
	Interval time.Duration
	// MaxAttempts, Backoff and MaxBackoff: a delivery is tried at most
	// MaxAttempts times, Backoff·2^(n-1) (at most MaxBackoff) after the
	// n-th failure.
	MaxAttempts int
	Backoff     time.Duration
	MaxBackoff  time.Duration
	// Timeout bounds one delivery. Default DefaultTimeout.
	Timeout time.Duration
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Notifier expands notify events and delivers notifications: a
// startstop.Service.
type Notifier struct {
	cfg  Config
	loop startstop.Loop
}

// New returns a Notifier; Start starts its loop.
func New(cfg Config) *Notifier {
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.Clock = clock.Default(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Notifier{cfg: cfg}
	n.loop = startstop.Loop{Name: "notifier", Interval: cfg.Interval, Clock: cfg.Clock, Pass: n.Pass}
	return n
}

// Start starts the loop; Stop stops it, waiting for the pass in progress.
func (n *Notifier) Start(ctx context.Context) error { return n.loop.Start(ctx) }

// Stop stops the loop.
func (n *Notifier) Stop(ctx context.Context) error { return n.loop.Stop(ctx) }

// deliverers is how many deliveries a notifier sends at once.
const deliverers = 8

// claimFor is how long a claim of events or deliveries lasts: past it,
// another node takes them.
func (n *Notifier) claimFor() time.Duration { return 2*n.cfg.Timeout + 10*time.Second }

// Pass expands the events that wait and sends the deliveries that are due.
func (n *Notifier) Pass(ctx context.Context) {
	now := n.cfg.Clock.Now()
	evs, err := n.cfg.Store.ClaimNotifyEvents(ctx, now, now.Add(n.claimFor()), 100)
	if err != nil {
		n.cfg.Logger.Warn("notify: claim events", "err", err)
	}
	for _, ev := range evs {
		if err := n.expand(ctx, ev); err != nil {
			n.cfg.Logger.Warn("notify: expand event", "run_id", ev.RunID, "timer_id", ev.TimerID, "err", err)
		}
	}
	now = n.cfg.Clock.Now()
	// No more than the workers deliver within the claim, even if each
	// takes its whole timeout: two rounds.
	due, err := n.cfg.Store.DueNotifications(ctx, now, now.Add(n.claimFor()), 2*deliverers)
	if err != nil {
		n.cfg.Logger.Warn("notify: claim deliveries", "err", err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, deliverers)
	for _, d := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n.deliver(ctx, d)
		}()
	}
	wg.Wait()
}

// Payload is the JSON body of a webhook notification (and the content of
// an email's text).
type Payload struct {
	// Type is "run.failed", "run.recovered" or "run.consecutive_failures".
	Type string `json:"type"`
	On   string `json:"on"`
	// ConsecutiveFailures is the streak of failed runs this run ends (1
	// for a lone failure, 0 for a recovery).
	ConsecutiveFailures int          `json:"consecutive_failures"`
	Timer               PayloadTimer `json:"timer"`
	Run                 PayloadRun   `json:"run"`
	Error               string       `json:"error"`
	Attempts            int          `json:"attempts"`
	Links               Links        `json:"links"`
}

// PayloadTimer names the timer of a notification.
type PayloadTimer struct {
	ID       string `json:"id"`
	App      string `json:"app"`
	Name     string `json:"name"`
	Schedule string `json:"schedule"`
	Priority int    `json:"priority"`
}

// PayloadRun is the run of a notification: the run's JSON form, as GET
// /api/v1/runs/{id} answers it (without its attempts and notifications),
// its output and error cut to 4 KiB.
type PayloadRun = model.RunJSON

// Links point at the run and the timer in the web UI and the API.
type Links struct {
	Run    string `json:"run"`
	Timer  string `json:"timer"`
	APIRun string `json:"api_run"`
}

var eventTypes = map[string]string{
	model.NotifyFailure:             "run.failed",
	model.NotifyRecovery:            "run.recovered",
	model.NotifyConsecutiveFailures: "run.consecutive_failures",
}

// expand turns one event into its deliveries.
func (n *Notifier) expand(ctx context.Context, ev model.NotifyEvent) error {
	t, err := n.cfg.Store.GetTimer(ctx, ev.TimerID)
	if errors.Is(err, model.ErrNotFound) {
		return n.cfg.Store.ExpandNotifyEvent(ctx, ev, nil) // the timer is gone
	}
	if err != nil {
		return err
	}
	rules := t.Notify
	if len(rules) == 0 && n.cfg.AppDefaults != nil {
		if rules, err = n.cfg.AppDefaults(ctx, t.App); err != nil {
			return fmt.Errorf("app defaults of %s: %w", t.App, err)
		}
	}
	run, err := n.cfg.Store.GetRun(ctx, ev.RunID)
	if errors.Is(err, model.ErrNotFound) {
		return n.cfg.Store.ExpandNotifyEvent(ctx, ev, nil) // deleted with its timer, or pruned
	}
	if err != nil {
		return err
	}
	// The run's own status is the event's: the run may have been run
	// again since (a manual retrigger does not reuse ids, but be safe).
	run.Status = ev.Status
	streak, prevFailed, err := n.history(ctx, run, rules)
	if err != nil {
		return err
	}
	now := n.cfg.Clock.Now()
	var out []*model.Notification
	for i, r := range rules {
		fire := false
		switch r.On {
		case model.NotifyFailure:
			fire = ev.Status == model.RunFailed
		case model.NotifyRecovery:
			fire = ev.Status == model.RunSucceeded && prevFailed
		case model.NotifyConsecutiveFailures:
			fire = ev.Status == model.RunFailed && streak == r.Threshold
		}
		if !fire {
			continue
		}
		p := n.payload(t, run, r.On, streak)
		body, err := json.Marshal(p)
		if err != nil {
			return err
		}
		mk := func(channel, target string) *model.Notification {
			return &model.Notification{ID: fmt.Sprintf("%s.%d.%d.%s", run.ID, ev.Attempt, i, channel), RunID: run.ID, TimerID: t.ID,
				App: t.App, On: r.On, Channel: channel, Target: target, Payload: body, Status: model.NotificationPending,
				NextAt: now, CreatedAt: now}
		}
		if r.Webhook != nil {
			out = append(out, mk(model.ChannelWebhook, r.Webhook.URL))
		}
		if r.Email != nil {
			out = append(out, mk(model.ChannelEmail, strings.Join(r.Email.To, ", ")))
		}
	}
	return n.cfg.Store.ExpandNotifyEvent(ctx, ev, out)
}

// history returns the streak of failed runs that run ends (counting run
// when it failed) and whether the timer's previous finished run, by
// scheduled instant, failed. Skipped and cancelled runs do not count, nor
// break a streak. It reads no more runs than the rules need.
func (n *Notifier) history(ctx context.Context, run *model.Run, rules []model.NotifyRule) (streak int, prevFailed bool, err error) {
	need := 0
	for _, r := range rules {
		switch r.On {
		case model.NotifyRecovery:
			need = max(need, 1)
		case model.NotifyConsecutiveFailures:
			need = max(need, r.Threshold)
		}
	}
	if run.Status == model.RunFailed {
		streak = 1
	}
	if need == 0 {
		return streak, false, nil
	}
	cursor := ""
	first := true
	for {
		page, next, err := n.cfg.Store.ListRuns(ctx, store.RunFilter{TimerID: run.TimerID, ScheduledBefore: run.ScheduledAt,
			Before: cursor, Limit: min(need+10, 1000)})
		if err != nil {
			return 0, false, fmt.Errorf("runs before %s: %w", run.ID, err)
		}
		for _, r := range page {
			switch r.Status {
			case model.RunFailed:
				if first {
					prevFailed, first = true, false
				}
				if run.Status != model.RunFailed {
					return streak, prevFailed, nil
				}
				streak++
				if streak > need {
					return streak, prevFailed, nil
				}
			case model.RunSucceeded:
				return streak, prevFailed, nil
			}
		}
		if next == "" {
			return streak, prevFailed, nil
		}
		cursor = next
	}
}

func (n *Notifier) payload(t *model.Timer, r *model.Run, on string, streak int) Payload {
	base := strings.TrimRight(n.cfg.BaseURL, "/")
	p := Payload{Type: eventTypes[on], On: on, ConsecutiveFailures: streak,
		Timer: PayloadTimer{ID: t.ID, App: t.App, Name: t.Name, Schedule: t.Schedule, Priority: t.EffectivePriority()},
		Run:   *r.JSON(), Error: model.Cut(r.Error, 4096), Attempts: r.Attempt,
		Links: Links{Run: base + "/runs/" + r.ID, Timer: base + "/timers/" + t.ID, APIRun: base + "/api/v1/runs/" + r.ID}}
	p.Run.Output, p.Run.Error = model.Cut(r.Output, 4096), model.Cut(r.Error, 4096)
	return p
}

// deliver sends d once and records the outcome.
func (n *Notifier) deliver(ctx context.Context, d *model.Notification) {
	// Not the pass's context: a delivery has its own timeout, and the
	// claim covers it.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.Timeout)
	err := n.send(sctx, d)
	cancel()
	d.Attempts++
	now := n.cfg.Clock.Now()
	next := now
	if err == nil {
		d.Status, d.Error, d.SentAt = model.NotificationSent, "", &now
	} else {
		// A webhook's URL is secret: the error of its request quotes it.
		msg := err.Error()
		if d.Channel == model.ChannelWebhook && d.Target != "" {
			msg = strings.ReplaceAll(msg, d.Target, model.RedactTarget(d.Channel, d.Target))
			err = errors.New(msg)
		}
		d.Error = model.Cut(msg, 1024)
		if d.Attempts >= n.cfg.MaxAttempts {
			d.Status = model.NotificationFailed
		} else {
			next = now.Add(model.RetryPolicy{Backoff: n.cfg.Backoff, MaxBackoff: n.cfg.MaxBackoff}.Delay(d.Attempts))
		}
		n.cfg.Logger.Warn("notify: delivery failed", "timer_id", d.TimerID, "run_id", d.RunID, "on", d.On, "channel", d.Channel,
			"attempts", d.Attempts, "status", d.Status, "err", err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := n.cfg.Store.RecordNotification(rctx, d, next); err != nil {
		n.cfg.Logger.Warn("notify: record delivery", "run_id", d.RunID, "err", err)
	}
}

func (n *Notifier) send(ctx context.Context, d *model.Notification) error {
	switch d.Channel {
	case model.ChannelWebhook:
		return n.sendWebhook(ctx, d)
	case model.ChannelEmail:
		return n.sendEmail(ctx, d)
	}
	return fmt.Errorf("unknown channel %q", d.Channel)
}

func (n *Notifier) sendWebhook(ctx context.Context, d *model.Notification) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Target, bytes.NewReader(d.Payload))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "chime")
	req.Header.Set(model.HeaderNotification, d.On)
	req.Header.Set(model.HeaderTimerID, d.TimerID)
	req.Header.Set(model.HeaderRunID, d.RunID)
	if n.cfg.Secrets != nil {
		secrets, err := n.cfg.Secrets.SigningSecrets(ctx, d.App)
		if err != nil {
			return fmt.Errorf("signing secrets of app %s: %w", d.App, err)
		}
		if err := webhook.SetHeaders(req.Header, secrets, d.ID, n.cfg.Clock.Now(), d.Payload); err != nil {
			return fmt.Errorf("sign notification: %w", err)
		}
	}
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("http status %d", resp.StatusCode)
	}
	return nil
}

func (n *Notifier) sendEmail(ctx context.Context, d *model.Notification) error {
	if n.cfg.Email == nil {
		return errors.New("email notifications need the node's SMTP settings (--smtp-host, --smtp-from)")
	}
	var p Payload
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return fmt.Errorf("decode payload: %w", err)
	}
	to := strings.Split(d.Target, ", ")
	subject, body := EmailText(p)
	return n.cfg.Email.SendEmail(ctx, to, subject, body, d.ID)
}

// EmailText returns the subject and the plain text of an email
// notification.
func EmailText(p Payload) (subject, body string) {
	name := p.Timer.App + "/" + p.Timer.Name
	switch p.On {
	case model.NotifyRecovery:
		subject = "chime: " + name + " recovered"
	case model.NotifyConsecutiveFailures:
		subject = fmt.Sprintf("chime: %s failed %d times in a row", name, p.ConsecutiveFailures)
	default:
		subject = "chime: " + name + " failed"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Timer:     %s (%s)\n", name, p.Timer.ID)
	fmt.Fprintf(&b, "Schedule:  %s\n", p.Timer.Schedule)
	fmt.Fprintf(&b, "Run:       %s, scheduled %s\n", p.Run.ID, p.Run.ScheduledAt.Format(time.RFC3339))
	fmt.Fprintf(&b, "Status:    %s after %d attempt(s)\n", p.Run.Status, p.Attempts)
	if p.On == model.NotifyConsecutiveFailures {
		fmt.Fprintf(&b, "Streak:    %d failed runs in a row\n", p.ConsecutiveFailures)
	}
	if p.Error != "" {
		fmt.Fprintf(&b, "Error:     %s\n", p.Error)
	}
	fmt.Fprintf(&b, "\nRun:   %s\nTimer: %s\n", p.Links.Run, p.Links.Timer)
	return subject, b.String()
}

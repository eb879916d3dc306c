package builtin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// Report defaults and bounds.
const (
	// DefaultReportTop is how many timers the slowest and most failing
	// lists hold when the args do not say.
	DefaultReportTop = 5
	// MaxReportTop bounds the args' top.
	MaxReportTop = 50
	// MaxReportPeriod bounds the args' period.
	MaxReportPeriod = 366 * 24 * time.Hour
)

// The report formats.
const (
	FormatText = "text"
	FormatHTML = "html"
	FormatJSON = "json"
)

// ReportArgs are the args of generate_report:
//
//	{"period": "24h", "apps": ["billing"], "format": "html", "top": 5,
//	 "webhook": {"url": "https://ops.example.com/chime-report"},
//	 "email": {"to": ["ops@example.com"], "subject": "chime, last 24 h"},
//	 "file": {"dir": "/var/reports/chime"}}
//
// Period is a Go duration ("24h", "90m") or a number of days ("7d") or
// weeks ("2w"), up to MaxReportPeriod: the report covers the runs
// scheduled in the period that ends at the run's scheduled instant, so a
// retried attempt reports the same period. Apps are the apps reported on:
// by default the timer's own app; ["*"] means every app. Format (text,
// html or json; default text) is the form of the email and the file; the
// webhook always gets JSON. Top (1 to MaxReportTop, default
// DefaultReportTop) is the length of the timer lists. Webhook, Email and
// File are the destinations, any of them; the report is the run's output
// too (JSON), with or without them.
type ReportArgs struct {
	Period  string         `json:"period"`
	Apps    []string       `json:"apps"`
	Format  string         `json:"format"`
	Top     int            `json:"top"`
	Webhook *ReportWebhook `json:"webhook"`
	Email   *ReportEmail   `json:"email"`
	File    *ReportFile    `json:"file"`
}

// ReportWebhook posts the JSON report to URL, signed like a callback: the
// Standard Webhooks headers with the timer's app's signing secret,
// webhook-id the run id, under the egress policy of callbacks (see
// docs/callbacks.md). A non-2xx answer fails the run.
type ReportWebhook struct {
	URL string `json:"url"`
}

// ReportEmail mails the report through send_email's SMTP server (the
// --smtp-… flags). Subject defaults to one naming the apps and the period.
type ReportEmail struct {
	To      stringList `json:"to"`
	Subject string     `json:"subject"`
}

// ReportFile writes the report in Dir, which must be inside an
// --output-root, as chime-report-<end of the period>.txt, .html or .json
// (0600). A retried attempt writes the same file again.
type ReportFile struct {
	Dir string `json:"dir"`
}

// Report is a summary of the runs scheduled in a period.
type Report struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Period string    `json:"period"`
	// Apps are the apps reported on; ["*"]: every app.
	Apps []string `json:"apps"`
	// Runs are the runs scheduled in the period, whatever their status.
	Runs int `json:"runs"`
	// Fires are the runs that started at least once (attempt ≥ 1), but
	// the skipped ones (claimed, their action not run).
	Fires int `json:"fires"`
	// The runs by status: Failed ones failed at their last attempt.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Cancelled int `json:"cancelled"`
	Pending   int `json:"pending"`
	Running   int `json:"running"`
	// FailureRate is Failed / (Succeeded + Failed), 0 without either.
	FailureRate float64 `json:"failure_rate"`
	// Attempts are the attempts of every run; Retried the runs that took
	// more than one.
	Attempts int `json:"attempts"`
	Retried  int `json:"retried"`
	// Delay is the fire delay: how long after its scheduled instant a run
	// started.
	Delay Delay `json:"delay"`
	// Slowest are the timers of the longest average duration (over their
	// succeeded and failed runs), the longest first.
	Slowest []TimerStat `json:"slowest"`
	// MostFailing are the timers with the most failed runs, the most
	// first (then the highest failure rate).
	MostFailing []TimerStat `json:"most_failing"`
}

// Delay sums up fire delays, in milliseconds. It counts the fires started
// at their first attempt only (attempt 1): a run retried keeps the start
// of its last attempt, which says more about its backoff than about its
// fire. Percentiles are nearest-rank: P90 is the delay that 90% of the
// runs counted are at or under.
type Delay struct {
	Count int     `json:"count"`
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// TimerStat is one timer's part of a report.
type TimerStat struct {
	ID   string `json:"id"`
	App  string `json:"app"`
	Name string `json:"name"`
	// Finished are its succeeded and failed runs, which the durations and
	// the failure rate are over.
	Finished      int     `json:"finished"`
	Failed        int     `json:"failed"`
	FailureRate   float64 `json:"failure_rate"`
	AvgDurationMS float64 `json:"avg_duration_ms"`
	MaxDurationMS int64   `json:"max_duration_ms"`
}

// ReportStore is what a report reads of the store: the runs of its period
// and their timers (store.Store implements it).
type ReportStore interface {
	RunsScheduled(ctx context.Context, f store.PeriodFilter) (runs []*model.Run, next string, err error)
	GetTimer(ctx context.Context, id string) (*model.Timer, error)
}

// GenerateReport is the generate_report handler.
type GenerateReport struct {
	// Store holds the runs and the timers reported on.
	Store ReportStore
	// SMTP sends the email destination (send_email's settings).
	SMTP SMTPConfig
	// Webhook posts the webhook destination: an http action of the timer's
	// app (the node's callback runner: signed, under the egress policy).
	Webhook func(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error)
	// Roots are the --output-root directories the file destination may be
	// written in.
	Roots []string
}

var periodDays = regexp.MustCompile(`^([0-9]{1,4})([dw])$`)

// parsePeriod parses a report period: a Go duration, or days or weeks.
func parsePeriod(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New(`period is required (a Go duration such as "24h", or days or weeks such as "7d", "2w")`)
	}
	var d time.Duration
	if m := periodDays.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		d = time.Duration(n) * 24 * time.Hour
		if m[2] == "w" {
			d *= 7
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf(`period %q is not a Go duration such as "24h", or days or weeks such as "7d", "2w"`, s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("period %q must be positive", s)
	}
	if d > MaxReportPeriod {
		return 0, fmt.Errorf("period %q is longer than %d days", s, MaxReportPeriod/(24*time.Hour))
	}
	return d, nil
}

// reportPlan is parsed and checked args.
type reportPlan struct {
	ReportArgs
	period time.Duration
	to     []*mail.Address
}

func (g *GenerateReport) parse(raw json.RawMessage) (reportPlan, error) {
	var p reportPlan
	if err := decodeStrict(raw, &p.ReportArgs); err != nil {
		return p, err
	}
	var err error
	if p.period, err = parsePeriod(p.Period); err != nil {
		return p, err
	}
	for i, app := range p.Apps {
		switch {
		case app == "*" && len(p.Apps) > 1:
			return p, errors.New(`apps: "*" (every app) goes alone`)
		case strings.TrimSpace(app) == "":
			return p, fmt.Errorf("apps[%d] is empty", i)
		}
	}
	switch p.Format {
	case "":
		p.Format = FormatText
	case FormatText, FormatHTML, FormatJSON:
	default:
		return p, fmt.Errorf("format %q: want text, html or json", p.Format)
	}
	switch {
	case p.Top == 0:
		p.Top = DefaultReportTop
	case p.Top < 1 || p.Top > MaxReportTop:
		return p, fmt.Errorf("top %d: want 1 to %d", p.Top, MaxReportTop)
	}
	if w := p.Webhook; w != nil {
		u, err := url.Parse(w.URL)
		switch {
		case w.URL == "":
			return p, errors.New("webhook.url is required")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return p, fmt.Errorf("webhook.url %q must be an http or https URL", w.URL)
		}
	}
	if e := p.Email; e != nil {
		if err := g.SMTP.check(GenerateReportName); err != nil {
			return p, err
		}
		if p.to, err = g.SMTP.parseTo("email.to", e.To); err != nil {
			return p, err
		}
		if strings.ContainsAny(e.Subject, "\r\n") {
			return p, errors.New("email.subject must not contain a line break")
		}
	}
	if f := p.File; f != nil {
		dir, err := checkDir("file.dir", f.Dir)
		if err != nil {
			return p, err
		}
		f.Dir = dir
	}
	return p, nil
}

// ValidateArgs checks the args when a timer is created.
func (g *GenerateReport) ValidateArgs(args json.RawMessage) error {
	p, err := g.parse(args)
	if err != nil {
		return err
	}
	if p.File != nil {
		if _, _, err := resolveIn(g.Roots, "--output-root", p.File.Dir); err != nil {
			return fmt.Errorf("file: %w", err)
		}
	}
	return nil
}

// Run builds the report of the period that ends at the run's scheduled
// instant and delivers it to each destination; the report is the output.
// A destination that fails fails the run (once the others were tried): a
// retry delivers the same report again, with the same webhook-id, email
// Message-ID and file name, for receivers to dedupe.
func (g *GenerateReport) Run(ctx context.Context, run *chime.Run) ([]byte, error) {
	p, err := g.parse(run.Args)
	if err != nil {
		return nil, err
	}
	apps := p.Apps
	if len(apps) == 0 {
		apps = []string{run.Timer.App}
	}
	to := run.ScheduledAt
	rep, err := BuildReport(ctx, g.Store, to.Add(-p.period), to, apps, p.Top)
	if err != nil {
		return nil, err
	}
	rep.Period = p.Period
	body, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	var errs []error
	if p.Webhook != nil {
		if err := g.postWebhook(ctx, run, p.Webhook.URL, body); err != nil {
			errs = append(errs, fmt.Errorf("webhook: %w", err))
		}
	}
	if p.Email != nil {
		if err := g.mail(ctx, run, p, rep); err != nil {
			errs = append(errs, fmt.Errorf("email: %w", err))
		}
	}
	if p.File != nil {
		if err := g.writeFile(p, rep); err != nil {
			errs = append(errs, fmt.Errorf("file: %w", err))
		}
	}
	return body, errors.Join(errs...)
}

func (g *GenerateReport) postWebhook(ctx context.Context, run *chime.Run, u string, body []byte) error {
	if g.Webhook == nil {
		return errors.New("no webhook sender on this server")
	}
	t := *run.Timer
	t.Action = model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: u,
		Header: map[string]string{"Content-Type": "application/json"}, Body: string(body)}}
	_, err := g.Webhook(ctx, run.Run, &t)
	return err
}

func (g *GenerateReport) mail(ctx context.Context, run *chime.Run, p reportPlan, rep *Report) error {
	from, err := mail.ParseAddress(g.SMTP.From)
	if err != nil {
		return fmt.Errorf("--smtp-from %q is not an email address", g.SMTP.From)
	}
	subject := p.Email.Subject
	if subject == "" {
		subject = "chime report: " + rep.title()
	}
	body, ctype, err := rep.Render(p.Format)
	if err != nil {
		return err
	}
	if p.Format == FormatJSON {
		ctype = "text/plain"
	}
	return g.SMTP.deliver(ctx, from, p.to, message(from, p.to, subject, string(body), ctype, run.ID))
}

func (g *GenerateReport) writeFile(p reportPlan, rep *Report) error {
	root, _, err := openIn(g.Roots, "--output-root", p.File.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	body, _, err := rep.Render(p.Format)
	if err != nil {
		return err
	}
	ext := map[string]string{FormatText: ".txt", FormatHTML: ".html", FormatJSON: ".json"}[p.Format]
	name := "chime-report-" + rep.To.UTC().Format("20060102T150405Z") + ext
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if testHookOpened != nil {
		testHookOpened()
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// timerAcc accumulates one timer's runs.
type timerAcc struct {
	finished, failed int
	totalMS, maxMS   int64
}

// BuildReport summarises the runs of apps (["*"]: every app) scheduled in
// [from, to), read page by page with st.RunsScheduled; top is the length
// of the timer lists. It keeps one delay per run counted and one counter
// per timer in memory, and reads the timers of the lists only.
func BuildReport(ctx context.Context, st ReportStore, from, to time.Time, apps []string, top int) (*Report, error) {
	rep := &Report{From: from.UTC(), To: to.UTC(), Period: to.Sub(from).String(), Apps: slices.Clone(apps),
		Slowest: []TimerStat{}, MostFailing: []TimerStat{}}
	f := store.PeriodFilter{From: from, To: to}
	if !(len(apps) == 1 && apps[0] == "*") {
		f.Apps = apps
	}
	var delays []time.Duration
	timers := map[string]*timerAcc{}
	for {
		runs, next, err := st.RunsScheduled(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		for _, r := range runs {
			rep.Runs++
			rep.Attempts += r.Attempt
			// A skipped run was claimed, but its action did not run.
			fired := r.Attempt >= 1 && r.Status != model.RunSkipped
			if fired {
				rep.Fires++
			}
			if r.Attempt > 1 {
				rep.Retried++
			}
			if fired && r.Attempt == 1 && r.StartedAt != nil {
				// Clamped: a running run's start is its claim's, which can
				// come just before its instant.
				delays = append(delays, max(0, r.StartedAt.Sub(r.ScheduledAt)))
			}
			acc := timers[r.TimerID]
			if acc == nil {
				acc = &timerAcc{}
				timers[r.TimerID] = acc
			}
			switch r.Status {
			case model.RunSucceeded, model.RunFailed:
				if r.Status == model.RunSucceeded {
					rep.Succeeded++
				} else {
					rep.Failed++
					acc.failed++
				}
				acc.finished++
				acc.totalMS += r.DurationMS
				acc.maxMS = max(acc.maxMS, r.DurationMS)
			case model.RunSkipped:
				rep.Skipped++
			case model.RunCancelled:
				rep.Cancelled++
			case model.RunPending:
				rep.Pending++
			case model.RunRunning:
				rep.Running++
			}
		}
		if next == "" {
			break
		}
		f.After = next
	}
	rep.FailureRate = rate(rep.Failed, rep.Succeeded+rep.Failed)
	rep.Delay = delayStats(delays)

	stats := make([]TimerStat, 0, len(timers))
	for id, a := range timers {
		if a.finished == 0 {
			continue
		}
		stats = append(stats, TimerStat{ID: id, Finished: a.finished, Failed: a.failed, FailureRate: rate(a.failed, a.finished),
			AvgDurationMS: round3(float64(a.totalMS) / float64(a.finished)), MaxDurationMS: a.maxMS})
	}
	slices.SortFunc(stats, func(a, b TimerStat) int {
		return cmp.Or(cmp.Compare(b.AvgDurationMS, a.AvgDurationMS), cmp.Compare(a.ID, b.ID))
	})
	rep.Slowest = append(rep.Slowest, stats[:min(top, len(stats))]...)
	slices.SortFunc(stats, func(a, b TimerStat) int {
		return cmp.Or(cmp.Compare(b.Failed, a.Failed), cmp.Compare(b.FailureRate, a.FailureRate), cmp.Compare(a.ID, b.ID))
	})
	for _, s := range stats {
		if s.Failed == 0 || len(rep.MostFailing) == top {
			break
		}
		rep.MostFailing = append(rep.MostFailing, s)
	}
	names := map[string]*model.Timer{}
	for _, list := range [][]TimerStat{rep.Slowest, rep.MostFailing} {
		for i := range list {
			t, ok := names[list[i].ID]
			if !ok {
				t, _ = st.GetTimer(ctx, list[i].ID) // a timer deleted since: its id only
				names[list[i].ID] = t
			}
			if t != nil {
				list[i].App, list[i].Name = t.App, t.Name
			}
		}
	}
	return rep, nil
}

func rate(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return round3(float64(n) / float64(of))
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// delayStats returns the nearest-rank percentiles of ds.
func delayStats(ds []time.Duration) Delay {
	if len(ds) == 0 {
		return Delay{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(ds)))) - 1
		return ds[max(0, min(i, len(ds)-1))]
	}
	return Delay{Count: len(ds), P50MS: ms(rank(50)), P90MS: ms(rank(90)), P99MS: ms(rank(99)), MaxMS: ms(ds[len(ds)-1])}
}

// title names the report's apps and period.
func (r *Report) title() string {
	apps := strings.Join(r.Apps, ", ")
	if len(r.Apps) == 1 && r.Apps[0] == "*" {
		apps = "every app"
	}
	return fmt.Sprintf("%s, %s to %s", apps, r.From.Format("2006-01-02 15:04 MST"), r.To.Format("2006-01-02 15:04 MST"))
}

// Render returns the report in format (text, html or json) and its media
// type.
func (r *Report) Render(format string) ([]byte, string, error) {
	switch format {
	case FormatJSON:
		b, err := json.MarshalIndent(r, "", "  ")
		return append(b, '\n'), "application/json", err
	case FormatHTML:
		return []byte(r.HTML()), "text/html", nil
	}
	return []byte(r.Text()), "text/plain", nil
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }

func timerName(s TimerStat) string {
	if s.Name == "" {
		return s.ID + " (deleted)"
	}
	return s.App + "/" + s.Name
}

// Text is the report as readable text.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chime report: %s (%s)\n\n", r.title(), r.Period)
	fmt.Fprintf(&b, "runs %d, fires %d: succeeded %d, failed %d (%s), skipped %d, cancelled %d, pending %d, running %d\n",
		r.Runs, r.Fires, r.Succeeded, r.Failed, pct(r.FailureRate), r.Skipped, r.Cancelled, r.Pending, r.Running)
	fmt.Fprintf(&b, "attempts %d, runs retried %d\n", r.Attempts, r.Retried)
	if r.Delay.Count > 0 {
		fmt.Fprintf(&b, "fire delay (%d runs started at their first attempt): p50 %v ms, p90 %v ms, p99 %v ms, max %v ms\n",
			r.Delay.Count, r.Delay.P50MS, r.Delay.P90MS, r.Delay.P99MS, r.Delay.MaxMS)
	}
	b.WriteString("\nslowest timers (average duration):\n")
	if len(r.Slowest) == 0 {
		b.WriteString("  none\n")
	}
	for i, s := range r.Slowest {
		fmt.Fprintf(&b, "  %d. %s: average %v ms, max %d ms over %d runs\n", i+1, timerName(s), s.AvgDurationMS, s.MaxDurationMS, s.Finished)
	}
	b.WriteString("\nmost failing timers:\n")
	if len(r.MostFailing) == 0 {
		b.WriteString("  none\n")
	}
	for i, s := range r.MostFailing {
		fmt.Fprintf(&b, "  %d. %s: %d failed of %d (%s)\n", i+1, timerName(s), s.Failed, s.Finished, pct(s.FailureRate))
	}
	return b.String()
}

// HTML is the report as an HTML page. It is written with html.EscapeString
// rather than html/template: a template's reflective method calls keep
// every exported method of every type in the binary (13 MB more).
func (r *Report) HTML() string {
	var b strings.Builder
	e := html.EscapeString
	title := e(r.title())
	b.WriteString(`<!doctype html>
<html><head><meta charset="utf-8"><title>chime report: ` + title + `</title>
<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}</style>
</head><body>
<h1>chime report</h1>
`)
	fmt.Fprintf(&b, "<p>%s (%s)</p>\n", title, e(r.Period))
	b.WriteString("<table>\n<tr><th>runs</th><th>fires</th><th>succeeded</th><th>failed</th><th>failure rate</th><th>skipped</th><th>cancelled</th><th>pending</th><th>running</th><th>attempts</th><th>retried</th></tr>\n")
	fmt.Fprintf(&b, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>\n</table>\n",
		r.Runs, r.Fires, r.Succeeded, r.Failed, pct(r.FailureRate), r.Skipped, r.Cancelled, r.Pending, r.Running, r.Attempts, r.Retried)
	fmt.Fprintf(&b, "<h2>Fire delay</h2>\n<p>%d runs started at their first attempt: p50 %v ms, p90 %v ms, p99 %v ms, max %v ms</p>\n",
		r.Delay.Count, r.Delay.P50MS, r.Delay.P90MS, r.Delay.P99MS, r.Delay.MaxMS)
	b.WriteString("<h2>Slowest timers</h2>\n<table><tr><th>timer</th><th>average ms</th><th>max ms</th><th>runs</th></tr>\n")
	for _, t := range r.Slowest {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%v</td><td>%d</td><td>%d</td></tr>\n", e(timerName(t)), t.AvgDurationMS, t.MaxDurationMS, t.Finished)
	}
	if len(r.Slowest) == 0 {
		b.WriteString("<tr><td colspan=\"4\">none</td></tr>\n")
	}
	b.WriteString("</table>\n<h2>Most failing timers</h2>\n<table><tr><th>timer</th><th>failed</th><th>runs</th><th>failure rate</th></tr>\n")
	for _, t := range r.MostFailing {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%s</td></tr>\n", e(timerName(t)), t.Failed, t.Finished, pct(t.FailureRate))
	}
	if len(r.MostFailing) == 0 {
		b.WriteString("<tr><td colspan=\"4\">none</td></tr>\n")
	}
	b.WriteString("</table>\n</body></html>\n")
	return b.String()
}

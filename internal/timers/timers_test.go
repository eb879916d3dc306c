package timers_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// valid returns a valid timer definition.
func valid() *model.Timer {
	t := timers.Defaults()
	t.App, t.Name, t.Schedule = "a", "b", "@every 1m"
	t.Action = model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{URL: "https://x.test/"}}
	return &t
}

func TestValidateNormalises(t *testing.T) {
	t.Parallel()
	london := time.FixedZone("X", 3600)
	tm := &model.Timer{App: "a", Name: "b", Schedule: "@every 1m", Timeout: time.Second,
		Retry:  model.RetryPolicy{MaxAttempts: 1},
		Policy: model.Policy{StartAt: time.Date(2026, 1, 1, 12, 0, 0, 0, london)},
		Action: model.Action{Type: "http", HTTP: &model.HTTPAction{Method: "patch", URL: "https://x.test/"}}}
	if err := timers.Validate(tm, timers.ValidateOptions{}); err != nil {
		t.Fatal(err)
	}
	if tm.Timezone != "UTC" || tm.Action.HTTP.Method != "PATCH" || tm.Policy.StartAt.Location() != time.UTC {
		t.Errorf("not normalised: zone %q method %q start %v", tm.Timezone, tm.Action.HTTP.Method, tm.Policy.StartAt)
	}
	tm.Action = model.Action{Type: "handler", Handler: &model.HandlerAction{Name: "x"}}
	err := timers.Validate(tm, timers.ValidateOptions{})
	var fe *model.FieldError
	if !errors.As(err, &fe) || fe.Field != "action.handler.name" {
		t.Errorf("handler without HandlerExists: %v", err)
	}
}

// TestValidateOptions checks each option of ValidateOptions: the message
// of every refusal is the REST API's.
func TestValidateOptions(t *testing.T) {
	t.Parallel()
	shell := model.Action{Type: model.ActionShell, Shell: &model.ShellAction{Command: "ls"}}
	handler := model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: "h", Args: []byte(`{}`)}}
	exists := func(name string) bool { return name == "h" }
	tests := []struct {
		name      string
		action    model.Action
		opts      timers.ValidateOptions
		wantField string // "" for valid
		wantMsg   string
	}{
		{"shell off", shell, timers.ValidateOptions{}, "action.type", "--allow-shell"},
		{"shell on", shell, timers.ValidateOptions{AllowShell: true}, "", ""},
		{"shell not allowed", shell, timers.ValidateOptions{AllowShell: true, ShellAllow: []string{"date"}}, "action.shell.command", "--shell-allow"},
		{"shell allowed", shell, timers.ValidateOptions{AllowShell: true, ShellAllow: []string{"ls"}}, "", ""},
		{"no such handler", handler, timers.ValidateOptions{}, "action.handler.name", `no such handler "h"`},
		{"handler", handler, timers.ValidateOptions{HandlerExists: exists}, "", ""},
		{"args refused", handler, timers.ValidateOptions{HandlerExists: exists,
			ValidateArgs: func(string, []byte) error { return errors.New("dir is required") }}, "action.handler.args", "dir is required"},
		{"args refused on a field", handler, timers.ValidateOptions{HandlerExists: exists,
			ValidateArgs: func(string, []byte) error { return model.Errorf("action.handler.args.dir", "is required") }},
			"action.handler.args.dir", "is required"},
		{"egress", model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{URL: "http://169.254.169.254/"}},
			timers.ValidateOptions{Egress: egress.Default()}, "action.http.url", "callbacks may not go there"},
		{"no egress policy", model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{URL: "http://169.254.169.254/"}},
			timers.ValidateOptions{}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := valid()
			tm.Action = tt.action
			err := timers.Validate(tm, tt.opts)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *model.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(fe.Message, tt.wantMsg) {
				t.Fatalf("err %v, want field %s with %q", err, tt.wantField, tt.wantMsg)
			}
		})
	}
}

func TestFillDefaults(t *testing.T) {
	t.Parallel()
	var tm model.Timer
	timers.FillDefaults(&tm)
	want := timers.Defaults()
	want.Enabled = false // FillDefaults leaves it
	if !timers.SameDefinition(&tm, &want) {
		t.Errorf("FillDefaults gave %+v, want %+v", tm, want)
	}
	prio := 0
	set := model.Timer{Timezone: "Europe/Paris", Timeout: time.Minute, Retry: model.RetryPolicy{MaxAttempts: 3, Backoff: time.Hour}, Priority: &prio}
	got := set
	timers.FillDefaults(&got)
	if !timers.SameDefinition(&got, &set) {
		t.Errorf("FillDefaults changed set fields: %+v", got)
	}
}

// TestLocalRefused checks that the zone "Local", which validation refuses
// because nodes must agree on instants, is refused by every path that
// reads a zone: it was once accepted by the planner's schedule.
func TestLocalRefused(t *testing.T) {
	t.Parallel()
	if _, err := timers.LoadLocation("Local"); !errors.Is(err, timers.ErrUnknownZone) || err.Error() != `unknown time zone "Local"` {
		t.Errorf("LoadLocation(Local): %v", err)
	}
	tm := valid()
	tm.Timezone = "Local"
	var fe *model.FieldError
	if err := timers.Validate(tm, timers.ValidateOptions{}); !errors.As(err, &fe) || fe.Field != "timezone" {
		t.Errorf("Validate: %v", err)
	}
	tm.Timezone = "Local" // a timer stored before the rule, or by hand
	if _, err := timers.Schedule(tm); !errors.Is(err, timers.ErrUnknownZone) {
		t.Errorf("Schedule: %v", err)
	}
	if got := timers.NextFireTimes(tm, time.Now(), 3); got != nil {
		t.Errorf("NextFireTimes: %v", got)
	}
}

// TestScheduleSharesZones checks that Schedule loads a zone once: every
// timer of a zone gets the same *time.Location, which is what the schedule
// package keys its per-zone tables by (time.LoadLocation makes a new one
// per call, which built a table per timer).
func TestScheduleSharesZones(t *testing.T) {
	t.Parallel()
	a, b := valid(), valid()
	a.Timezone, b.Timezone = "America/New_York", "America/New_York"
	a.Schedule, b.Schedule = "0 9 * * *", "30 17 * * MON"
	sa, err := timers.Schedule(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := timers.Schedule(b)
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := timers.LoadLocation("America/New_York")
	if schedule.Location(sa) != loc || schedule.Location(sb) != loc {
		t.Errorf("zones not shared: %p %p, cached %p", schedule.Location(sa), schedule.Location(sb), loc)
	}
	if loc, _ := timers.LoadLocation(""); loc != time.UTC {
		t.Errorf("empty zone is %v, want UTC", loc)
	}
}

func TestScheduleAnchor(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 0, 0, 7, 0, time.UTC)
	start := time.Date(2026, 2, 1, 0, 0, 3, 0, time.UTC)
	tests := []struct {
		name  string
		start time.Time
		want  time.Time
	}{
		{"from creation", time.Time{}, created.Add(time.Minute)},
		{"from start bound", start, start.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := valid()
			tm.CreatedAt, tm.Policy.StartAt = created, tt.start
			s, err := timers.Schedule(tm)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(tt.want.Add(-time.Second)); !got.Equal(tt.want) {
				t.Errorf("next %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNextFireTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	day := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	tests := []struct {
		name       string
		schedule   string
		zone       string
		start, end time.Time
		want       []time.Time
	}{
		{"hourly", "0 * * * *", "", time.Time{}, time.Time{}, []time.Time{day(1, 11), day(1, 12), day(1, 13)}},
		{"start bound", "0 * * * *", "", day(2, 0), time.Time{}, []time.Time{day(2, 0), day(2, 1), day(2, 2)}},
		{"end bound", "0 * * * *", "", time.Time{}, day(1, 12), []time.Time{day(1, 11), day(1, 12)}},
		{"in the zone", "0 12 * * *", "Europe/Paris", time.Time{}, time.Time{}, []time.Time{day(1, 11), day(2, 11), day(3, 11)}},
		{"bad schedule", "0 24 * * *", "", time.Time{}, time.Time{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := valid()
			tm.Schedule, tm.Timezone, tm.Policy.StartAt, tm.Policy.EndAt = tt.schedule, tt.zone, tt.start, tt.end
			got := timers.NextFireTimes(tm, now, 3)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if !got[i].Equal(tt.want[i]) {
					t.Errorf("fire %d: %v, want %v", i, got[i], tt.want[i])
				}
				if tt.zone != "" && got[i].Location().String() != tt.zone {
					t.Errorf("fire %d in %v, want %s", i, got[i].Location(), tt.zone)
				}
			}
		})
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 1, 1, 0, 0, 0, 500, time.UTC)
	got, err := timers.Preview("@every 90m", time.UTC, schedule.DSTDefault, from, 2)
	if err != nil || len(got) != 2 || !got[0].Equal(from.Add(90*time.Minute)) || !got[1].Equal(from.Add(3*time.Hour)) {
		t.Errorf("@every anchored at from: %v %v", got, err)
	}
	var pe *schedule.ParseError
	if _, err := timers.Preview("0 24 * * *", time.UTC, schedule.DSTDefault, from, 2); !errors.As(err, &pe) || err.Error() != "hour: 24 is out of range 0-23" {
		t.Errorf("bad spec: %v", err)
	}
}

func TestNeedsReplan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*model.Timer)
		want   bool
	}{
		{"nothing", func(*model.Timer) {}, false},
		{"schedule", func(t *model.Timer) { t.Schedule = "@every 2m" }, true},
		{"zone", func(t *model.Timer) { t.Timezone = "Europe/Paris" }, true},
		{"disabled", func(t *model.Timer) { t.Enabled = false }, true},
		{"misfire", func(t *model.Timer) { t.Policy.Misfire = model.MisfireSkip }, true},
		{"max fires", func(t *model.Timer) { t.Policy.MaxFires = 3 }, true},
		{"jitter", func(t *model.Timer) { t.Policy.Jitter = time.Second }, true},
		{"dst", func(t *model.Timer) { t.Policy.DST = "both" }, true},
		{"dst default spelt out", func(t *model.Timer) { t.Policy.DST = model.DSTDefault }, false},
		{"end bound", func(t *model.Timer) { t.Policy.EndAt = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }, true},
		{"default spelt out", func(t *model.Timer) { t.Policy.Misfire, t.Policy.Overlap = model.MisfireAll, model.OverlapAllow }, false},
		{"timeout", func(t *model.Timer) { t.Timeout = time.Hour }, false},
		{"action", func(t *model.Timer) { t.Action.HTTP = &model.HTTPAction{URL: "https://y.test/"} }, false},
		{"description", func(t *model.Timer) { t.Description = "new" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			old, cur := valid(), valid()
			tt.change(cur)
			if got := timers.NeedsReplan(old, cur); got != tt.want {
				t.Errorf("NeedsReplan = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSameDefinition(t *testing.T) {
	t.Parallel()
	args := func(s string) *model.Timer {
		tm := valid()
		tm.Action = model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: "h", Args: []byte(s)}}
		return tm
	}
	stamped := valid()
	stamped.ID, stamped.CreatedAt, stamped.UpdatedAt, stamped.PlannedUntil = "X", time.Now(), time.Now(), time.Now()
	headers := valid()
	headers.Action.HTTP.Header = map[string]string{}
	policy := valid()
	policy.Policy.Overlap = model.OverlapSkip
	keep := 5
	history := valid()
	history.History.Keep = &keep
	tests := []struct {
		name string
		a, b *model.Timer
		want bool
	}{
		{"equal", valid(), valid(), true},
		{"id and timestamps ignored", valid(), stamped, true},
		{"args spacing and order", args(`{"a":1,"b":2}`), args(`{ "b": 2, "a": 1 }`), true},
		{"args differ", args(`{"a":1}`), args(`{"a":2}`), false},
		{"empty map is nil", valid(), headers, true},
		{"policy differs", valid(), policy, false},
		{"history differs", valid(), history, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := timers.SameDefinition(tt.a, tt.b); got != tt.want {
				t.Errorf("SameDefinition = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestValidateHistory: a history limit must not be negative; zero (no
// limit) and absent (the server's default) are valid.
func TestValidateHistory(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	d := func(v time.Duration) *time.Duration { return &v }
	tests := []struct {
		name      string
		h         model.History
		wantField string // "" for valid
	}{
		{"absent", model.History{}, ""},
		{"zero", model.History{Keep: n(0), MaxAge: d(0)}, ""},
		{"set", model.History{Keep: n(10), MaxAge: d(time.Hour)}, ""},
		{"negative keep", model.History{Keep: n(-1)}, "history.keep"},
		{"negative max age", model.History{MaxAge: d(-time.Second)}, "history.max_age"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := valid()
			tm.History = tt.h
			err := timers.Validate(tm, timers.ValidateOptions{})
			var fe *model.FieldError
			switch {
			case tt.wantField == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(fe.Message, "must be ≥ 0")):
				t.Errorf("Validate = %v, want %s: must be ≥ 0", err, tt.wantField)
			}
		})
	}
}

// TestValidateJitterAndDST checks policy.jitter against its bounds and the
// schedule's shortest interval, and policy.dst against the choices.
func TestValidateJitterAndDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		schedule  string
		jitter    time.Duration
		dst       string
		wantField string // "" for valid
		wantMsg   string
	}{
		{"no jitter", "@every 1m", 0, "", "", ""},
		{"jitter under the interval", "@every 1m", 59 * time.Second, "", "", ""},
		{"jitter of the interval", "@every 1m", time.Minute, "", "policy.jitter", "must be shorter than the schedule's shortest interval between fires (1m0s), got 1m0s"},
		{"jitter over the cron interval", "0 0,30 9 * * *", 30 * time.Minute, "", "policy.jitter", "(30m0s)"},
		{"hourly herd", "0 * * * *", 5 * time.Minute, "", "", ""},
		{"negative", "@every 1m", -time.Second, "", "policy.jitter", "must not be negative"},
		{"under a millisecond", "@every 1m", time.Microsecond, "", "policy.jitter", "at least 1ms"},
		{"over the cap", "@at 2030-01-01T00:00:00Z", 25 * time.Hour, "", "policy.jitter", "must be at most 24h0m0s"},
		{"one-shot under the cap", "@at 2030-01-01T00:00:00Z", 2 * time.Hour, "", "", ""},
		{"dst choice", "30 2 * * *", 0, "skip_gap", "", ""},
		{"dst default", "30 2 * * *", 0, "default", "", ""},
		{"dst unknown", "30 2 * * *", 0, "twice", "policy.dst", `must be one of default, shift, skip_gap, both, wall, got "twice"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := valid()
			tm.Schedule, tm.Policy.Jitter, tm.Policy.DST = tt.schedule, tt.jitter, tt.dst
			err := timers.Validate(tm, timers.ValidateOptions{})
			var fe *model.FieldError
			switch {
			case tt.wantField == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(fe.Message, tt.wantMsg)):
				t.Errorf("Validate = %v, want %s: ...%s", err, tt.wantField, tt.wantMsg)
			}
		})
	}
}

// TestScheduleDST checks that a timer's schedule follows its policy.dst.
func TestScheduleDST(t *testing.T) {
	t.Parallel()
	tm := valid()
	tm.Schedule, tm.Timezone, tm.Policy.DST = "30 2 * * *", "America/New_York", "shift"
	s, err := timers.Schedule(tm)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)).Format(time.RFC3339); got != "2026-03-08T03:30:00-04:00" {
		t.Errorf("Next in the gap with shift = %s, want 2026-03-08T03:30:00-04:00", got)
	}
}

func TestValidateAfter(t *testing.T) {
	t.Parallel()
	dep := func(timer, on string) model.Dependency { return model.Dependency{Timer: timer, On: on} }
	many := make([]model.Dependency, model.MaxUpstreams+1)
	for i := range many {
		many[i] = dep(fmt.Sprintf("app/t%d", i), model.OnSuccess)
	}
	tests := []struct {
		name      string
		schedule  string
		after     []model.Dependency
		wantField string // "" for valid
		wantMsg   string
	}{
		{"schedule only", "@daily", nil, "", ""},
		{"after only", "", []model.Dependency{dep("app/a", model.OnSuccess)}, "", ""},
		{"both", "@daily", []model.Dependency{dep("01ABC", model.OnFailure), dep("app/b", model.OnFinish)}, "", ""},
		{"neither", "", nil, "schedule", "unless after"},
		{"blank schedule", "  ", []model.Dependency{dep("app/a", model.OnSuccess)}, "schedule", "blank"},
		{"no timer", "", []model.Dependency{dep(" ", model.OnSuccess)}, "after[0].timer", "required"},
		{"no on", "", []model.Dependency{dep("app/a", "")}, "after[0].on", "required"},
		{"bad on", "", []model.Dependency{dep("app/a", model.OnSuccess), dep("app/b", "done")}, "after[1].on", `"done"`},
		{"twice", "", []model.Dependency{dep("app/a", model.OnSuccess), dep("app/a", model.OnFailure)}, "after[1].timer", "after[0]"},
		{"too many", "", many, "after", "more than 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := valid()
			tm.Schedule, tm.After = tt.schedule, tt.after
			err := timers.Validate(tm, timers.ValidateOptions{})
			var fe *model.FieldError
			switch {
			case tt.wantField == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField || !strings.Contains(fe.Message, tt.wantMsg)):
				t.Errorf("Validate = %v, want %s: …%s…", err, tt.wantField, tt.wantMsg)
			}
		})
	}
}

// BenchmarkSchedule measures compiling a timer's schedule and computing its
// next fires, as the planner does for every timer of each pass.
func BenchmarkSchedule(b *testing.B) {
	tm := valid()
	tm.Schedule, tm.Timezone = "0 9 * * MON-FRI", "Europe/Berlin"
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		s, err := timers.Schedule(tm)
		if err != nil {
			b.Fatal(err)
		}
		s.Next(now)
	}
}

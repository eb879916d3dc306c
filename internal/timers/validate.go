package timers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/schedule"
)

// ValidateOptions are the settings of the node or server that validation
// depends on.
type ValidateOptions struct {
	// AllowShell permits shell actions.
	AllowShell bool
	// ShellAllow, when not empty, lists the only commands shell actions
	// may run (exact match of action.shell.command).
	ShellAllow []string
	// HandlerExists reports whether a handler is registered under name;
	// nil means none is.
	HandlerExists func(name string) bool
	// ValidateArgs, when set, checks a handler action's args at creation;
	// its error is reported on action.handler.args (or on the field a
	// *model.FieldError names).
	ValidateArgs func(name string, args []byte) error
	// Egress, when set, refuses an HTTP action whose URL host is a literal
	// address it denies (a name is checked by the sender, at each
	// connection).
	Egress *egress.Policy
	// EmailAllowed, when set, refuses the email addresses of notify rules
	// the node may not send to (--email-allow).
	EmailAllowed func(address string) error
}

// Limits of timer fields.
const (
	// MaxDescriptionLen is the longest description, in characters.
	MaxDescriptionLen = 1000
	// MaxScheduleLen is the longest schedule spec, in bytes.
	MaxScheduleLen = 512
	// MaxTimeout is the longest timeout of one attempt.
	MaxTimeout = 24 * time.Hour
	// MaxAttemptsLimit is the most attempts a retry policy may ask for.
	MaxAttemptsLimit = 100
	// MaxJitter is the longest policy.jitter; it must also be shorter than
	// the schedule's shortest interval between fires (schedule.MinInterval).
	MaxJitter = 24 * time.Hour
)

var identRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,100}$`)

// Validate checks t as a client defined it and returns a *model.FieldError
// naming the first offending field, or nil. It also normalises t: an empty
// timezone becomes UTC, the HTTP method is upper cased (an empty one
// becomes POST) and the policy's bounds are in UTC. The field names and
// messages are those the REST API answers: its clients and tests depend on
// them. Service validates with it before every write.
func Validate(t *model.Timer, opts ValidateOptions) error {
	if err := ValidateIdent("app", t.App); err != nil {
		return err
	}
	if err := ValidateIdent("name", t.Name); err != nil {
		return err
	}
	if utf8.RuneCountInString(t.Description) > MaxDescriptionLen {
		return model.Errorf("description", "is longer than %d characters", MaxDescriptionLen)
	}
	if t.Timezone == "" {
		t.Timezone = DefaultTimezone
	}
	loc, err := LoadLocation(t.Timezone)
	if err != nil {
		return model.Errorf("timezone", "%v", err)
	}
	if err := validateAfter(t); err != nil {
		return err
	}
	var sched schedule.Schedule // nil for a timer that runs only after its upstreams
	switch {
	case t.Schedule == "" && len(t.After) > 0:
		// Runs only after its upstreams.
	case strings.TrimSpace(t.Schedule) == "":
		if t.Schedule != "" {
			return model.Errorf("schedule", "is blank: leave it out (with after) or give a schedule")
		}
		return model.Errorf("schedule", "is required unless after names the timers this one runs after")
	case len(t.Schedule) > MaxScheduleLen:
		return model.Errorf("schedule", "is longer than %d bytes", MaxScheduleLen)
	default:
		if sched, err = schedule.ParseInLocation(t.Schedule, loc); err != nil {
			return &model.FieldError{Field: "schedule", Message: scheduleMessage(err)}
		}
	}
	if err := validateAction(&t.Action, opts); err != nil {
		return err
	}
	if t.Timeout <= 0 {
		return model.Errorf("timeout", "must be positive")
	}
	if t.Timeout > MaxTimeout {
		return model.Errorf("timeout", "must be at most %s", MaxTimeout)
	}
	if n := t.Retry.MaxAttempts; n < 1 || n > MaxAttemptsLimit {
		return model.Errorf("retry.max_attempts", "must be between 1 and %d, got %d", MaxAttemptsLimit, n)
	}
	if t.Retry.Backoff < 0 {
		return model.Errorf("retry.backoff", "must not be negative")
	}
	if t.Retry.MaxBackoff < 0 {
		return model.Errorf("retry.max_backoff", "must not be negative")
	}
	if err := validatePolicy(&t.Policy); err != nil {
		return err
	}
	if err := ValidatePriority(t.Priority); err != nil {
		return err
	}
	if t.Priority == nil {
		t.Priority = defaultPriority()
	}
	if err := ValidateNotify("notify", t.Notify, opts.EmailAllowed); err != nil {
		return err
	}
	if err := validateJitter(t.Policy.Jitter, sched); err != nil {
		return err
	}
	if err := validateFleet(&t.Policy); err != nil {
		return err
	}
	return validateHistory(t.History)
}

// validateFleet checks how p splits fires over nodes (the timer's mode
// and shards; docs/fleet.md) and normalises it: mode single is "", one
// shard is none.
func validateFleet(p *model.Policy) error {
	switch p.Mode {
	case "", model.ModeSingle:
		p.Mode = ""
	case model.ModeBroadcast:
	default:
		return model.Errorf("mode", "must be single or broadcast, got %q", p.Mode)
	}
	if p.Shards < 0 || p.Shards > model.MaxShards {
		return model.Errorf("shards", "must be between 0 and %d, got %d", model.MaxShards, p.Shards)
	}
	if p.Shards == 1 {
		p.Shards = 0
	}
	if p.Shards > 1 && p.Mode == model.ModeBroadcast {
		return model.Errorf("shards", "must not be set with mode broadcast (a broadcast runs one shard per live node)")
	}
	return nil
}

// validateAfter checks t.After: at most model.MaxUpstreams entries, each
// naming a timer (an id or "app/name"; the save path resolves and checks
// it) once, with on success, failure or finish.
func validateAfter(t *model.Timer) error {
	if len(t.After) > model.MaxUpstreams {
		return model.Errorf("after", "names %d timers, more than %d", len(t.After), model.MaxUpstreams)
	}
	for i, d := range t.After {
		field := fmt.Sprintf("after[%d]", i)
		if strings.TrimSpace(d.Timer) == "" {
			return model.Errorf(field+".timer", "is required: a timer id or app/name")
		}
		if len(d.Timer) > 256 {
			return model.Errorf(field+".timer", "is longer than 256 bytes")
		}
		switch d.On {
		case model.OnSuccess, model.OnFailure, model.OnFinish:
		case "":
			return model.Errorf(field+".on", "is required: success, failure or finish")
		default:
			return model.Errorf(field+".on", "must be success, failure or finish, got %q", d.On)
		}
		for j := range i {
			if t.After[j].Timer == d.Timer {
				return model.Errorf(field+".timer", "names the same timer as after[%d]", j)
			}
		}
	}
	return nil
}

// validateHistory checks h: a limit that is set must not be negative (0
// means no limit, nil the server's default).
func validateHistory(h model.History) error {
	if h.Keep != nil && *h.Keep < 0 {
		return model.Errorf("history.keep", "must be ≥ 0, got %d", *h.Keep)
	}
	if h.MaxAge != nil && *h.MaxAge < 0 {
		return model.Errorf("history.max_age", "must be ≥ 0, got %s", *h.MaxAge)
	}
	return nil
}

// validatePolicy checks p and normalises its bounds to UTC, as the store
// keeps them (so that a definition compares equal to its stored form).
func validatePolicy(p *model.Policy) error {
	if !p.StartAt.IsZero() {
		p.StartAt = p.StartAt.UTC()
	}
	if !p.EndAt.IsZero() {
		p.EndAt = p.EndAt.UTC()
	}
	switch p.Misfire {
	case "", model.MisfireAll, model.MisfireLatest, model.MisfireSkip:
	default:
		return model.Errorf("policy.misfire", "must be all, latest or skip, got %q", p.Misfire)
	}
	switch p.Overlap {
	case "", model.OverlapAllow, model.OverlapSkip, model.OverlapBufferOne, model.OverlapCancelRunning:
	default:
		return model.Errorf("policy.overlap", "must be allow, skip, buffer_one or cancel_running, got %q", p.Overlap)
	}
	if p.CatchupWindow < 0 {
		return model.Errorf("policy.catchup_window", "must not be negative")
	}
	if p.CatchupWindow > 0 && p.CatchupWindow < time.Second {
		return model.Errorf("policy.catchup_window", "must be at least 1s, got %s", p.CatchupWindow)
	}
	if !p.StartAt.IsZero() && !p.EndAt.IsZero() && p.EndAt.Before(p.StartAt) {
		return model.Errorf("policy.end_at", "must not be before policy.start_at")
	}
	if p.MaxFires < 0 {
		return model.Errorf("policy.max_fires", "must not be negative")
	}
	if _, err := schedule.ParseDST(p.DST); err != nil {
		return model.Errorf("policy.dst", "must be one of %s, got %q", strings.Join(schedule.DSTNames(), ", "), p.DST)
	}
	return nil
}

// validateJitter checks policy.jitter against s, the timer's schedule: 0,
// or at least 1ms, at most MaxJitter and shorter than the schedule's
// shortest interval between fires, so that jittered fires keep their
// order.
func validateJitter(j time.Duration, s schedule.Schedule) error {
	switch {
	case j < 0:
		return model.Errorf("policy.jitter", "must not be negative, got %s", j)
	case j == 0:
		return nil
	case j < time.Millisecond:
		return model.Errorf("policy.jitter", "must be 0 or at least 1ms, got %s", j)
	case j > MaxJitter:
		return model.Errorf("policy.jitter", "must be at most %s, got %s", MaxJitter, j)
	}
	if s == nil {
		// No schedule (a timer that runs only after its upstreams): its
		// runs are made at once, never jittered.
		return nil
	}
	if iv := schedule.MinInterval(s); iv > 0 && j >= iv {
		return model.Errorf("policy.jitter", "must be shorter than the schedule's shortest interval between fires (%s), got %s", iv, j)
	}
	return nil
}

// scheduleMessage is the message of a schedule parse error: the schedule
// package's own (such as "hour: 24 is out of range 0-23").
func scheduleMessage(err error) string {
	var pe *schedule.ParseError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	return err.Error()
}

// ValidateIdent checks v, the value of field, as an identifier: an app
// name or a timer name (1 to 100 letters, digits and . _ : -). Its error is
// a *model.FieldError for field.
func ValidateIdent(field, v string) error {
	if v == "" {
		return model.Errorf(field, "is required")
	}
	if !identRE.MatchString(v) {
		return model.Errorf(field, "must be 1 to 100 characters among letters, digits and . _ : -")
	}
	return nil
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true}

func validateAction(a *model.Action, opts ValidateOptions) error {
	set := map[string]bool{
		model.ActionHTTP:    a.HTTP != nil,
		model.ActionHandler: a.Handler != nil,
		model.ActionShell:   a.Shell != nil,
	}
	switch a.Type {
	case "":
		return model.Errorf("action.type", "is required (http, handler or shell)")
	case model.ActionHTTP, model.ActionHandler, model.ActionShell:
	default:
		return model.Errorf("action.type", "%q is not one of http, handler, shell", a.Type)
	}
	if a.Type == model.ActionShell && !opts.AllowShell {
		return model.Errorf("action.type", "shell actions are disabled on this server; start it with --allow-shell to enable them")
	}
	if !set[a.Type] {
		return model.Errorf("action."+a.Type, "is required when action.type is %s", a.Type)
	}
	for _, other := range []string{model.ActionHTTP, model.ActionHandler, model.ActionShell} {
		if other != a.Type && set[other] {
			return model.Errorf("action."+other, "must not be set when action.type is %s", a.Type)
		}
	}
	switch a.Type {
	case model.ActionHTTP:
		return validateHTTP(a.HTTP, opts.Egress)
	case model.ActionHandler:
		if a.Handler.Name == "" {
			return model.Errorf("action.handler.name", "is required")
		}
		if opts.HandlerExists == nil || !opts.HandlerExists(a.Handler.Name) {
			return model.Errorf("action.handler.name", "no such handler %q", a.Handler.Name)
		}
		if err := validateSecretArgs(a.Handler); err != nil {
			return err
		}
		if opts.ValidateArgs != nil {
			if err := opts.ValidateArgs(a.Handler.Name, a.Handler.Args); err != nil {
				var fe *model.FieldError
				if errors.As(err, &fe) {
					return fe
				}
				return model.Errorf("action.handler.args", "%v", err)
			}
		}
	case model.ActionShell:
		if strings.TrimSpace(a.Shell.Command) == "" {
			return model.Errorf("action.shell.command", "is required")
		}
		if len(opts.ShellAllow) > 0 && !slices.Contains(opts.ShellAllow, a.Shell.Command) {
			return model.Errorf("action.shell.command", "%q is not among the commands this server allows (--shell-allow)", a.Shell.Command)
		}
		if err := model.CheckShellEnv(a.Shell.Env); err != nil {
			return err
		}
	}
	return nil
}

// validateSecretArgs checks that the secret args of h name members of its
// args, a JSON object, whose values are strings (a missing member is
// allowed: it has no value to hide).
func validateSecretArgs(h *model.HandlerAction) error {
	if len(h.SecretArgs) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	if len(h.Args) > 0 {
		if err := json.Unmarshal(h.Args, &args); err != nil {
			return model.Errorf("action.handler.secret_args", "needs action.handler.args to be a JSON object")
		}
	}
	for _, k := range h.SecretArgs {
		if k == "" {
			return model.Errorf("action.handler.secret_args", "names an empty member")
		}
		raw, ok := args[k]
		var v string
		if ok && json.Unmarshal(raw, &v) != nil {
			return model.Errorf("action.handler.args."+k, "is named in action.handler.secret_args, so its value must be a JSON string")
		}
	}
	return nil
}

func validateHTTP(h *model.HTTPAction, policy *egress.Policy) error {
	h.Method = strings.ToUpper(h.Method)
	if h.Method == "" {
		h.Method = "POST"
	}
	if !methods[h.Method] {
		return model.Errorf("action.http.method", "%q is not one of GET, POST, PUT, PATCH, DELETE", h.Method)
	}
	if h.URL == "" {
		return model.Errorf("action.http.url", "is required")
	}
	// App secret references (in the userinfo) are put in when the action
	// runs; the URL is checked with a placeholder for each.
	u, err := url.Parse(model.PlaceholdAppSecretRefs(h.URL))
	if err != nil {
		return model.Errorf("action.http.url", "does not parse: %v", errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return model.Errorf("action.http.url", "must be an absolute http or https URL")
	}
	if u.Host == "" {
		return model.Errorf("action.http.url", "has no host")
	}
	if err := policy.CheckHost(u.Hostname()); err != nil {
		return model.Errorf("action.http.url", "%v: callbacks may not go there (see --callback-deny and --callback-allow)", err)
	}
	for k, v := range h.Header {
		if !validHeaderName(k) {
			return model.Errorf("action.http.header", "%q is not a valid header name", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return model.Errorf("action.http.header", "value of %s contains a line break or NUL", k)
		}
	}
	for _, k := range h.SecretHeaders {
		if !validHeaderName(k) {
			return model.Errorf("action.http.secret_headers", "%q is not a valid header name", k)
		}
	}
	return nil
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

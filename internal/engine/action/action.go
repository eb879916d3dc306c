// Package action performs the action of one attempt of a run: an HTTP
// callback (HTTPRunner: through the egress policy, signed with its app's
// secrets, which a SecretCache keeps), a Go handler (HandlerRunner) or a
// command (ShellRunner). Each is a Runner, which package executor calls
// for the action's type once the store confirmed the attempt's lease,
// with the timer's timeout; it puts in the app secrets the action refers to
// (ResolveAppSecrets) and records, with the result, what the runner
// reported sending and the answer it got (RecordRequest, RecordResponse),
// the secrets' values scrubbed (ScrubAppSecrets).
//
// Where to start reading: action.go (Runner, and what a runner records),
// http.go (the HTTP runner and chime's callback headers), secrets.go (the
// signing secrets of callbacks), appsecrets.go ({{secret.NAME}}
// references), handler.go (Go handlers), shell.go (commands).
package action

import (
	"context"
	"time"

	"github.com/chimehq/chime/model"
)

// Runner performs one kind of action. Run returns the action's output
// (truncated by the executor to MaxOutput) and an error when it failed. ctx
// is cancelled at the timer's timeout.
type Runner interface {
	Run(ctx context.Context, run *model.Run, t *model.Timer) (output []byte, err error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	return f(ctx, run, t)
}

// MaxOutput is how much of an action's output a run records.
const MaxOutput = 64 << 10

// Notes are what the runner of an attempt recorded (RecordRequest,
// RecordResponse) in a context made by WithNotes.
type Notes struct {
	// Sent is the request the runner sent, secrets redacted; nil when it
	// recorded none.
	Sent *model.SentRequest
	// Status and Header are the HTTP status and headers its receiver
	// answered; 0 and nil when it recorded none.
	Status int
	Header map[string]string
}

// notesKey carries, in an action's context, the *Notes that RecordRequest
// and RecordResponse record in.
type notesKey struct{}

// WithNotes returns a context, derived from ctx, in which RecordRequest
// and RecordResponse record in n: the executor runs an attempt's action
// with it.
func WithNotes(ctx context.Context, n *Notes) context.Context {
	return context.WithValue(ctx, notesKey{}, n)
}

// RecordRequest records, for the attempt whose action runs with ctx, what
// it sent (secrets redacted): the run's result stores it, and the web UI
// and GET /api/v1/runs/{id} show it as the run's request. A Runner calls
// it just before it sends; a later call replaces an earlier one. The
// executor records the action itself for handler and shell actions whose
// runner records nothing. Outside an attempt it does nothing.
func RecordRequest(ctx context.Context, r *model.SentRequest) {
	if n, ok := ctx.Value(notesKey{}).(*Notes); ok {
		n.Sent = r
	}
}

// RecordResponse records, for the attempt whose action runs with ctx, the
// HTTP status and headers its receiver answered (headers as
// model.ResponseHeaders keeps them): the attempt's record keeps them, and
// GET /api/v1/runs/{id} shows them. A later call replaces an earlier one.
// Outside an attempt it does nothing.
func RecordResponse(ctx context.Context, status int, header map[string]string) {
	if n, ok := ctx.Value(notesKey{}).(*Notes); ok {
		n.Status, n.Header = status, header
	}
}

// DueAt returns the instant run's action is told it is due (the HTTP
// header X-Chime-Due-At, a command's CHIME_DUE_AT) and its result records:
// run.DueAt, or run.ScheduledAt for a run that has none (a zero DueAt
// means ScheduledAt, as the store reads it).
func DueAt(run *model.Run) time.Time {
	if run.DueAt.IsZero() {
		return run.ScheduledAt
	}
	return run.DueAt
}

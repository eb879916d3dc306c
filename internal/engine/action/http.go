package action

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

var (
	upstreamKey = http.CanonicalHeaderKey(model.HeaderUpstreamRunID)
	rerunKey    = http.CanonicalHeaderKey(model.HeaderRerunOf)
)

// HTTPRunner performs HTTP callback actions with one shared client, so that
// connections to a receiver are reused across fires.
//
// A runner built by NewHTTPRunner or NewHTTPRunnerWith connects only where
// its egress policy allows and signs every callback (see HTTPOptions); one
// built as a struct literal does whatever its Client does and signs only
// when Secrets is set.
type HTTPRunner struct {
	Client *http.Client
	// Secrets, when set, gives the signing secrets of a timer's app: every
	// callback then carries the Standard Webhooks headers webhook-id (the
	// run id), webhook-timestamp and webhook-signature (see package
	// webhook). A callback whose secrets cannot be had fails.
	Secrets SigningSecrets
	// Clock tells webhook-timestamp; nil means the system clock.
	Clock clock.Clock
}

// SigningSecrets gives the secrets that sign an app's callbacks, the
// newest first ("whsec_…"; several while a rotated secret is still
// active). SecretCache is the store-backed one.
type SigningSecrets interface {
	SigningSecrets(ctx context.Context, app string) ([]string, error)
}

// HTTPOptions configures NewHTTPRunnerWith.
type HTTPOptions struct {
	// Egress decides which addresses callbacks may connect to; nil means
	// egress.Default() (link-local, metadata, multicast and the like are
	// refused; loopback and private ranges are not). &egress.Policy{}
	// allows everything.
	Egress *egress.Policy
	// Resolver resolves callback hosts; nil means net.DefaultResolver.
	Resolver egress.Resolver
	// Secrets signs the callbacks; nil sends them unsigned.
	Secrets SigningSecrets
	// Clock tells webhook-timestamp; nil means the system clock.
	Clock clock.Clock
}

// MaxConnsPerHost bounds the connections that NewHTTPRunner's client opens
// to one receiver (host and port). Callbacks due together beyond it wait for
// a connection instead of dialing new ones: a burst then runs on warm
// keep-alive connections, and a slow receiver is not flooded with thousands
// of connections it cannot accept (which made the sender dial and close
// connections in a loop, and fall further behind, before this bound).
const MaxConnsPerHost = 256

// NewHTTPRunner returns NewHTTPRunnerWith(HTTPOptions{}): the default
// egress policy, unsigned callbacks.
func NewHTTPRunner() *HTTPRunner { return NewHTTPRunnerWith(HTTPOptions{}) }

// NewHTTPRunnerWith returns an HTTPRunner whose transport keeps up to
// MaxConnsPerHost connections per receiver open and idle for reuse: enough
// for thousands of fires per second to one receiver.
//
// Its transport resolves each callback host itself and connects to the
// resolved addresses only when o.Egress allows every one of them, for the
// first request and for each redirect, so that a DNS name, a redirect or a
// DNS answer that changes between check and connection (rebinding) cannot
// reach a denied address; the socket's address is checked once more just
// before connecting (net.Dialer.Control). A refused attempt fails with an
// error that starts "egress policy:" and names the address. The
// environment's HTTP proxy settings (HTTP_PROXY, HTTPS_PROXY) are not used
// for callbacks: through a proxy, the policy would check the proxy's
// address instead of the receiver's.
func NewHTTPRunnerWith(o HTTPOptions) *HTTPRunner {
	policy := o.Egress
	if policy == nil {
		policy = egress.Default()
	}
	d := &egress.Dialer{Policy: policy, Resolver: o.Resolver,
		Dialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 4 * MaxConnsPerHost
	tr.MaxConnsPerHost = MaxConnsPerHost
	tr.MaxIdleConnsPerHost = MaxConnsPerHost
	tr.IdleConnTimeout = 90 * time.Second
	tr.DialContext = d.DialContext
	return &HTTPRunner{Secrets: o.Secrets, Clock: o.Clock, Client: &http.Client{
		Transport: tr,
		// A callback's redirect is followed like a browser would (each
		// hop's address checked by the dialer); the timeout comes from
		// the context.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			if offHost(req, via[0]) && req.Context().Value(appSecretsKey{}) != nil {
				return fmt.Errorf("redirect to %s://%s not followed: the request carries app secrets, which go only to their own hosts", req.URL.Scheme, req.URL.Host)
			}
			dropSecretsOffHost(req, via[0])
			return nil
		},
	}}
}

// Lane returns the scheme and host of t's callback URL (executor.Laner): the
// executor sends the callbacks due together to one receiver over a few
// connections, and over up to MaxConnsPerHost while it answers slowly. A
// runner whose Client opens fewer connections per host still sends up to
// MaxConnsPerHost at once; they wait for a connection in the transport.
func (h *HTTPRunner) Lane(t *model.Timer) (string, int) {
	a := t.Action.HTTP
	if a == nil {
		return "", 0
	}
	i := strings.Index(a.URL, "://")
	if i < 0 {
		return "", 0
	}
	host := a.URL[i+3:]
	if j := strings.IndexAny(host, "/?#"); j >= 0 {
		host = host[:j]
	}
	return strings.ToLower(a.URL[:i+3+len(host)]), MaxConnsPerHost
}

// chimeHeaders are the canonical forms (http.CanonicalHeaderKey) of the
// callback headers every HTTP action sends, in the order of the values
// HTTPRunner.Run gives them.
var chimeHeaders = [...]string{
	http.CanonicalHeaderKey(model.HeaderTimerID), http.CanonicalHeaderKey(model.HeaderRunID),
	http.CanonicalHeaderKey(model.HeaderScheduledAt), http.CanonicalHeaderKey(model.HeaderDueAt),
	http.CanonicalHeaderKey(model.HeaderAttempt), http.CanonicalHeaderKey(model.HeaderNode),
}

var userAgent = http.CanonicalHeaderKey("User-Agent")

// idempotencyKey is the header (draft-ietf-httpapi-idempotency-key-header)
// that every callback carries, the run id unless the timer sets it: with
// it net/http's transport retries a request whose kept-alive connection
// the receiver closed as it was sent (net/http.Transport: "the request is
// idempotent or has an Idempotency-Key"). Receivers whose idle timeout is
// short (Node.js: 5 s) close connections that a timer firing about that
// often reuses.
var idempotencyKey = http.CanonicalHeaderKey("Idempotency-Key")

// actionKey carries a request's action to CheckRedirect.
type actionKey struct{}

// dropSecretsOffHost removes the action's secret headers (see
// model.HTTPAction.IsSecretHeader) from a redirected request that goes to
// another host than the first: net/http drops Authorization and Cookie on
// its own, but would send X-Api-Key and the action's secret_headers on.
func dropSecretsOffHost(req, first *http.Request) {
	a, ok := first.Context().Value(actionKey{}).(*model.HTTPAction)
	if !ok || !offHost(req, first) {
		return
	}
	for k := range req.Header {
		if a.IsSecretHeader(k) {
			req.Header.Del(k)
		}
	}
}

// offHost reports whether a redirected request goes to another scheme or
// host (and port) than the first.
func offHost(req, first *http.Request) bool {
	return !strings.EqualFold(req.URL.Host, first.URL.Host) || req.URL.Scheme != first.URL.Scheme
}

// Run sends the callback. 2xx is success; any other status, a timeout or a
// connection error is a failure. The response body, truncated, is the output.
func (h *HTTPRunner) Run(ctx context.Context, run *model.Run, t *model.Timer) ([]byte, error) {
	a := t.Action.HTTP
	if a == nil {
		return nil, errors.New("http action without http settings")
	}
	var body io.Reader
	if a.Body != "" {
		body = strings.NewReader(a.Body)
	}
	if len(a.Header) > 0 || len(a.SecretHeaders) > 0 {
		// For CheckRedirect, which drops the action's secret headers off
		// its host: an action without headers has none to drop.
		ctx = context.WithValue(ctx, actionKey{}, a)
	}
	req, err := http.NewRequestWithContext(ctx, a.Method, a.URL, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	// The header map is sized for every header at once, and chime's own
	// headers go in under their canonical keys, their values sharing one
	// slice: Header.Set would canonicalise each key and allocate each
	// value, which a herd of callbacks pays a thousand times at the same
	// instant.
	hdr := make(http.Header, len(a.Header)+len(chimeHeaders)+4)
	for k, v := range a.Header {
		hdr.Set(k, v)
	}
	scheduled := run.ScheduledAt
	if run.RerunOf != "" && !run.RerunScheduledAt.IsZero() {
		scheduled = run.RerunScheduledAt // a rerun sends its original's instant
	}
	sched, due := scheduled.UTC().Format(time.RFC3339Nano), ""
	if d := DueAt(run); d.Equal(scheduled) {
		due = sched // a first attempt on time, without jitter: most callbacks
	} else {
		due = d.UTC().Format(time.RFC3339Nano)
	}
	vals := [...]string{run.TimerID, run.ID, sched, due, strconv.Itoa(run.Attempt), run.Node, "chime"}
	for i, k := range chimeHeaders {
		hdr[k] = vals[i : i+1 : i+1]
	}
	if _, ok := hdr[idempotencyKey]; !ok {
		// The run id, as X-Chime-Run-ID (vals[1]): marked idempotent, the
		// request is sent again on a new connection by the transport when
		// a kept-alive one turns out closed by the receiver before it
		// answered, instead of failing the attempt with EOF.
		hdr[idempotencyKey] = vals[1:2:2]
	}
	if run.Shard != nil {
		hdr[model.HeaderShardIndex] = []string{strconv.Itoa(run.Shard.Index)}
		hdr[model.HeaderShardTotal] = []string{strconv.Itoa(run.Shard.Total)}
	}
	delete(hdr, upstreamKey)
	if run.UpstreamRunID != "" {
		hdr[upstreamKey] = []string{run.UpstreamRunID}
	}
	delete(hdr, rerunKey)
	if run.RerunOf != "" {
		hdr[rerunKey] = []string{run.RerunOf}
	}
	req.Header = hdr
	if h.Secrets != nil {
		secrets, err := h.Secrets.SigningSecrets(ctx, t.App)
		if err != nil {
			return nil, fmt.Errorf("signing secrets of app %s: %w", t.App, err)
		}
		if err := webhook.SetHeaders(req.Header, secrets, run.ID, clock.Default(h.Clock).Now(), []byte(a.Body)); err != nil {
			return nil, fmt.Errorf("sign callback: %w", err)
		}
	}
	if hdr.Get(userAgent) == "" {
		hdr[userAgent] = vals[len(chimeHeaders):]
	}
	RecordRequest(ctx, model.SentHTTP(a, req.Method, a.URL, req.Header, a.Body))
	resp, err := h.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	RecordResponse(ctx, resp.StatusCode, model.ResponseHeaders(a, resp.Header))
	var out []byte
	var rerr error
	if resp.ContentLength != 0 { // a 204, or an empty 200, has nothing to read
		out, rerr = io.ReadAll(io.LimitReader(resp.Body, MaxOutput))
		// Drain a little more so the connection can be reused.
		_, _ = io.CopyN(io.Discard, resp.Body, 256<<10)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return out, fmt.Errorf("http status %d", resp.StatusCode)
	}
	if rerr != nil {
		return out, fmt.Errorf("read response: %w", rerr)
	}
	return out, nil
}

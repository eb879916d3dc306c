package cli

// chime echo: a receiver for HTTP callbacks that shows what chime sends.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/webhook"
)

func init() { addCommand(newEchoCmd) }

// maxEchoBody is the most of a callback's body chime echo reads.
const maxEchoBody = 1 << 20

func newEchoCmd() *cobra.Command {
	var (
		o      clientOptions
		listen string
		secret string
		app    string
	)
	cmd := &cobra.Command{
		Use:   "echo [--listen ADDR] [--secret whsec_… | --app APP]",
		Short: "Receive HTTP callbacks: answer 200, print each one and check its signature",
		Long: `Listen for HTTP callbacks, answer 200 to every request whatever its method,
and print each one: method, path, the X-Chime-* headers and the body.

With --secret (the app's signing secret, "whsec_…") or --app (the secret is
read from the server with --server and --token, and read again when a
signature does not match, after a rotation), each callback's Standard
Webhooks signature (webhook-id, webhook-timestamp, webhook-signature) is
checked: the line "signature ok", or why not, follows the callback.

  chime echo --listen 127.0.0.1:9000 --app demo
  chime echo --listen 127.0.0.1:9000 --secret whsec_…`,
	}
	addClientFlags(cmd, &o) // --server and --token, for --app
	cmd.Args = exactArgs(0, "no arguments")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if secret != "" && app != "" {
			return usageErrorf("give --secret or --app, not both")
		}
		if secret != "" {
			if _, err := webhook.ParseSecret(secret); err != nil {
				return usageErrorf("--secret: %w", err)
			}
		}
		e := &echo{out: cmd.OutOrStdout()}
		switch {
		case secret != "":
			e.secrets = []string{secret}
		case app != "":
			c, err := o.client()
			if err != nil {
				return err
			}
			e.fetch = func(ctx context.Context) ([]string, error) {
				var ss api.SigningSecret
				if _, err := c.do(ctx, "GET", "/api/v1/apps/"+url.PathEscape(app)+"/signing-secret", nil, nil, &ss); err != nil {
					return nil, fmt.Errorf("read the signing secret of app %s: %w", app, err)
				}
				out := []string{ss.Secret}
				for _, v := range ss.Active {
					if v.Secret != "" && v.Secret != ss.Secret {
						out = append(out, v.Secret)
					}
				}
				return out, nil
			}
		}
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return usageErrorf("--listen: %w", err)
		}
		srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(cmd.OutOrStdout(), "chime echo: listening on http://%s/ (Ctrl-C to stop)\n", ln.Addr())
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = srv.Shutdown(sctx)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return err
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9000", "address to listen on")
	cmd.Flags().StringVar(&secret, "secret", "", "check signatures with this signing secret (whsec_…; see chime app secret)")
	cmd.Flags().StringVar(&app, "app", "", "check signatures with this app's signing secrets, read from --server")
	return cmd
}

// echo is chime echo's handler.
type echo struct {
	out   io.Writer
	fetch func(context.Context) ([]string, error) // --app; nil otherwise

	mu      sync.Mutex // one callback printed at a time; guards secrets
	secrets []string
}

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEchoBody))
	w.WriteHeader(http.StatusOK)
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
	var names []string
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-chime-") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(&b, "  %s: %s\n", k, strings.Join(r.Header.Values(k), ", "))
	}
	if err != nil {
		fmt.Fprintf(&b, "  body: (read: %v)\n", err)
	} else if len(body) > 0 {
		fmt.Fprintf(&b, "  body: %s\n", body)
	}
	fmt.Fprintf(&b, "  %s\n\n", e.verify(r.Context(), r.Header, body))
	_, _ = io.WriteString(e.out, b.String())
}

// verify checks the callback's signature and says how it went.
func (e *echo) verify(ctx context.Context, h http.Header, body []byte) string {
	if e.secrets == nil && e.fetch == nil {
		return "signature not checked: give --secret or --app"
	}
	try := func() error {
		var err error
		for _, s := range e.secrets {
			if err = webhook.Verify(s, h, body); err == nil {
				return nil
			}
		}
		if err == nil {
			err = errors.New("no signing secret")
		}
		return err
	}
	err := try()
	if err != nil && e.fetch != nil && !errors.Is(err, webhook.ErrMissingHeaders) {
		// The first callback, or a rotation since the secrets were read.
		secrets, ferr := e.fetch(ctx)
		if ferr != nil {
			return "signature not checked: " + ferr.Error()
		}
		e.secrets = secrets
		err = try()
	}
	if err != nil {
		return "signature NOT ok: " + strings.TrimPrefix(err.Error(), "webhook: verify: ")
	}
	return "signature ok"
}

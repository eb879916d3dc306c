package cli

// chime healthcheck: is a node ready? For container health checks, which
// have no curl in a scratch image.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func init() { addCommand(newHealthcheckCmd) }

// Defaults of chime healthcheck.
const (
	// DefaultHealthcheckURL is the node asked by chime healthcheck: the
	// one of this host, on the port of the container image.
	DefaultHealthcheckURL = "http://127.0.0.1:8080"
	// DefaultHealthcheckTimeout bounds the whole check, connection
	// included: shorter than a container health check's own timeout.
	DefaultHealthcheckTimeout = 3 * time.Second
)

func newHealthcheckCmd() *cobra.Command {
	var (
		rawURL  string
		timeout time.Duration
		caCert  string
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the node at --url is ready (GET /readyz answers 200), 1 if not",
		Long: `Ask a node whether it is ready: GET /readyz of --url, exit 0 on a 200 answer
and 1 otherwise (no answer within --timeout, a refused connection, a 503 when
the node cannot use its store or its clock is too far off), with the reason
on stderr. It is the HEALTHCHECK of the container image and of the compose
file. /readyz needs no token.

Each flag can also be set by its environment variable (CHIME_URL,
CHIME_TIMEOUT, CHIME_CA_CERT).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return usageError(err)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout must be positive, not %v", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := checkReady(ctx, rawURL, caCert); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ready")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&rawURL, "url", DefaultHealthcheckURL, "base URL of the node (env CHIME_URL); /readyz is added to its path")
	f.DurationVar(&timeout, "timeout", DefaultHealthcheckTimeout, "give up after this long (env CHIME_TIMEOUT)")
	f.StringVar(&caCert, "ca-cert", "", "PEM file of the CA of the node's certificate, for an https URL (env "+EnvCACert+")")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(err) })
	return cmd
}

// checkReady GETs /readyz under base and returns nil on a 200 answer, else
// an ExitError with code 1 that says why (code 2 for a bad URL or CA file).
func checkReady(ctx context.Context, base, caCert string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("--url %q is not an http or https URL", base)
	}
	u = u.JoinPath("readyz")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a health check asks the node itself, never through a proxy
	if caCert != "" {
		pem, err := os.ReadFile(caCert)
		if err != nil {
			return usageErrorf("--ca-cert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usageErrorf("--ca-cert %s: no PEM certificate in it", caCert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return usageErrorf("--url: %v", err)
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return &ExitError{Code: 1, Err: fmt.Errorf("not ready: %s did not answer in time", u)}
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("not ready: %w", err)}
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode != http.StatusOK {
		return &ExitError{Code: 1, Err: fmt.Errorf("not ready: GET %s: HTTP %d %s", u, res.StatusCode, strings.TrimSpace(string(body)))}
	}
	return nil
}

// applyEnv sets every flag of flags that was not given on the command line
// from its environment variable (EnvName), for the commands that take no
// --config file.
func applyEnv(flags *pflag.FlagSet) error {
	var err error
	flags.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s (--%s): %w", EnvName(f.Name), f.Name, serr)
			}
		}
	})
	return err
}

package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
)

// DefaultServer is the API address of the client commands when neither
// --server nor CHIME_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:8080"

// EnvServer names the environment variable with the default --server.
const EnvServer = "CHIME_SERVER"

// EnvToken and EnvCACert name the environment variables of --token and
// --ca-cert.
const (
	EnvToken  = "CHIME_TOKEN"
	EnvCACert = "CHIME_CA_CERT"
)

// clientOptions are the flags shared by the client commands.
type clientOptions struct {
	server string
	output string
	token  string
	caCert string
}

// addClientFlags adds --server and --output to a client command group and
// makes its flag errors usage errors (exit 2).
func addClientFlags(cmd *cobra.Command, o *clientOptions) {
	def := os.Getenv(EnvServer)
	if def == "" {
		def = DefaultServer
	}
	cmd.PersistentFlags().StringVar(&o.server, "server", def, "chime API address (env "+EnvServer+")")
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "table", "output format: table, json, or id (a timer's id alone, for scripts: ID=$(chime timer create … -o id))")
	// No default from the environment here: help would print the token.
	cmd.PersistentFlags().StringVar(&o.token, "token", "", "API token (env "+EnvToken+")")
	cmd.PersistentFlags().StringVar(&o.caCert, "ca-cert", "", "PEM file of the CA that signed the server's certificate (env "+EnvCACert+")")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(err) })
	// A group without a subcommand, or with an unknown one, is a usage error.
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unknown command %q for %q", args[0], c.CommandPath())
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		_ = c.Help()
		return usageErrorf("%s needs a subcommand", c.CommandPath())
	}
}

// usageError marks err as a usage error: exit code 2.
func usageError(err error) error { return &ExitError{Code: 2, Err: err} }

func usageErrorf(format string, args ...any) error { return usageError(fmt.Errorf(format, args...)) }

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s takes %s, got %d arguments", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

// client calls the chime REST API.
type client struct {
	base   *url.URL
	http   *http.Client
	output string
	token  string
}

// newClient checks the shared flags and returns a client.
func (o *clientOptions) client() (*client, error) {
	if o.output != "table" && o.output != "json" && o.output != "id" {
		return nil, usageErrorf("--output must be table, json or id, not %q", o.output)
	}
	u, err := url.Parse(strings.TrimRight(o.server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--server %q is not an http or https URL", o.server)
	}
	token := o.token
	if token == "" {
		token = os.Getenv(EnvToken)
	}
	caCert := o.caCert
	if caCert == "" {
		caCert = os.Getenv(EnvCACert)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caCert != "" {
		pem, err := os.ReadFile(caCert)
		if err != nil {
			return nil, usageErrorf("--ca-cert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErrorf("--ca-cert %s: no PEM certificate in it", caCert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &client{base: u, http: &http.Client{Timeout: 30 * time.Second, Transport: tr}, output: o.output, token: token}, nil
}

// APIError is an error answer of the API.
type APIError struct {
	Status  int
	Field   string
	Message string
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (HTTP %d)", e.Field, e.Message, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// do sends a request with body in (a []byte is sent as is, anything else
// encoded as JSON, nil sends nothing), decodes a success answer into out
// (when not nil) and returns the raw answer. path is escaped: its
// segments are URL-encoded (url.PathEscape), so that an app/name keeps its
// slash in one segment. Failures are ExitErrors with code 1.
func (c *client) do(ctx context.Context, method, path string, query url.Values, in, out any) ([]byte, error) {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	u.RawQuery = query.Encode()
	var body io.Reader
	switch v := in.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("encode request: %w", err)}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("%s %s: %w", method, path, err)}
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("cannot reach the chime server: %w", err)}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("%s %s: read answer: %w", method, path, err)}
	}
	if res.StatusCode >= 300 {
		var eb api.ErrorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error.Message == "" {
			eb.Error.Message = strings.TrimSpace(string(raw))
			if eb.Error.Message == "" {
				eb.Error.Message = http.StatusText(res.StatusCode)
			}
		}
		if res.StatusCode == http.StatusUnauthorized && c.token == "" {
			eb.Error.Message += "; pass --token or set " + EnvToken
		}
		return nil, &ExitError{Code: 1, Err: &APIError{Status: res.StatusCode, Field: eb.Error.Field, Message: eb.Error.Message}}
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("%s %s: decode answer: %w", method, path, err)}
		}
	}
	return raw, nil
}

// printJSON writes the API's JSON answer indented.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		cols[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fmtTime formats t for people: RFC 3339 in its own zone, or "-".
func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// truncate shortens s to n runes for a table cell.
func truncate(s string, n int) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}

// newDeleteCmd builds a command that deletes the thing whose id it is
// given (DELETE prefix+ID) and says done: "timer delete", "token revoke".
func newDeleteCmd(o *clientOptions, use, short, argName, prefix, done string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1, argName),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if _, err := c.do(cmd.Context(), "DELETE", prefix+url.PathEscape(args[0]), nil, nil, nil); err != nil {
				return err
			}
			if c.output == "json" {
				return nil
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", done, args[0])
			return err
		},
	}
}

package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	chimelib "github.com/chimehq/chime"
	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/internal/server"
)

// defaultsTable is each `chime serve` flag with a default, and the
// constant the default is.
var defaultsTable = []struct {
	flag string
	want any // time.Duration, int or string
}{
	{"listen", server.DefaultListen},
	{"data-dir", chimelib.DefaultDataDir},
	{"db", chimelib.DefaultDB(chimelib.DefaultDataDir)},
	{"lookahead", chimelib.DefaultLookahead},
	{"pool-size", chimelib.DefaultPoolSize},
	{"lock-ttl", chimelib.DefaultLockTTL},
	{"lease", chimelib.DefaultLease},
	{"shutdown-timeout", server.DefaultShutdownTimeout},
	{"max-clock-skew", chimelib.DefaultMaxClockSkew},
	{"signing-overlap", api.DefaultSigningOverlap},
	{"buckets", fmt.Sprintf("%d embedded, %d with Redis", chimelib.DefaultBuckets, chimelib.DefaultRedisBuckets)},
}

// TestServeFlagDefaults: the help of each `chime serve` flag states the
// default that chime applies (the constant), whether the flag carries it
// as its value or leaves zero for chime.New to fill in.
func TestServeFlagDefaults(t *testing.T) {
	cmd := newServeCmd()
	for _, tc := range defaultsTable {
		t.Run(tc.flag, func(t *testing.T) {
			f := cmd.Flags().Lookup(tc.flag)
			if f == nil {
				t.Fatalf("no flag --%s", tc.flag)
			}
			want := fmt.Sprint(tc.want)
			if f.DefValue != "0" && f.DefValue != "" && f.DefValue != "0s" {
				if f.DefValue != want {
					t.Errorf("--%s default %q, want %q", tc.flag, f.DefValue, want)
				}
				return
			}
			if !strings.Contains(f.Usage, "default "+want) {
				t.Errorf("--%s help %q does not say default %s", tc.flag, f.Usage, want)
			}
		})
	}
}

// TestREADMEDefaults: the README's configuration table gives the same
// defaults as the constants.
func TestREADMEDefaults(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string]string{} // flag → default column
	for _, line := range strings.Split(string(b), "\n") {
		col := strings.Split(line, "|")
		if len(col) < 5 || !strings.HasPrefix(strings.TrimSpace(col[1]), "`--") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(col[1]), "`-")
		cells[name] = strings.Trim(strings.TrimSpace(col[3]), "`")
	}
	for _, tc := range defaultsTable {
		t.Run(tc.flag, func(t *testing.T) {
			cell, ok := cells[tc.flag]
			if !ok {
				t.Fatalf("README's table has no row for --%s", tc.flag)
			}
			var got any = cell
			var err error
			switch tc.want.(type) {
			case time.Duration:
				got, err = time.ParseDuration(cell)
			case int:
				got, err = strconv.Atoi(cell)
			}
			if err != nil || got != tc.want {
				t.Errorf("README says --%s defaults to %q, want %v (err %v)", tc.flag, cell, tc.want, err)
			}
		})
	}
}

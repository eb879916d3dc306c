package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	chimelib "github.com/chimehq/chime"
	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/bench"
	"github.com/chimehq/chime/internal/app/chaos"
	"github.com/chimehq/chime/internal/app/server"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/engine/retention"
	"github.com/chimehq/chime/internal/engine/scheduler"
	"github.com/chimehq/chime/internal/engine/trigger"
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
	{"lookahead", planner.DefaultLookahead},
	{"plan-fires", planner.DefaultFiresAhead},
	{"plan-ahead", engine.DefaultPlanAhead},
	{"pool-size", executor.DefaultPoolSize},
	{"lock-ttl", scheduler.DefaultLockTTL},
	{"lease", executor.DefaultLease},
	{"shutdown-timeout", server.DefaultShutdownTimeout},
	{"http-read-timeout", server.DefaultHTTPReadTimeout},
	{"http-write-timeout", server.DefaultHTTPWriteTimeout},
	{"http-idle-timeout", server.DefaultHTTPIdleTimeout},
	{"http-max-header-bytes", server.DefaultHTTPMaxHeaderBytes},
	{"max-clock-skew", engine.DefaultMaxClockSkew},
	{"signing-overlap", api.DefaultSigningOverlap},
	{"history-keep", retention.DefaultKeep},
	{"history-max-age", retention.DefaultMaxAge},
	{"buckets", fmt.Sprintf("%d embedded, %d with --coordination db, %d with Redis", chimelib.DefaultBuckets, chimelib.DefaultDBBuckets, chimelib.DefaultRedisBuckets)},
}

// flagDefaults are flags of other commands with a default, and the
// constant the default is.
var flagDefaults = []struct {
	cmd  func() *cobra.Command
	flag string
	want any
}{
	{newBenchCmd, "rate", bench.DefaultRate},
	{newBenchCmd, "duration", bench.DefaultDuration},
	{newBenchCmd, "warmup", bench.DefaultWarmup},
	{newBenchCmd, "drain", bench.DefaultDrain},
	{newBenchCmd, "timers", bench.DefaultBurstTimers},
	{newBenchCmd, "lookahead", bench.DefaultLookahead},
	{newBenchCmd, "pool-size", executor.DefaultPoolSize},
	{newBenchCmd, "claim-ahead", trigger.DefaultClaimAhead},
	{newBenchCmd, "concurrency", bench.DefaultConcurrency},
	{newBenchCmd, "enable", bench.DefaultEnable},
	{newBenchCmd, "action", bench.ActionHTTP},
	{newChaosCmd, "nodes", chaos.DefaultNodes},
	{newChaosCmd, "timers", chaos.DefaultTimers},
	{newChaosCmd, "duration", chaos.DefaultDuration},
	{newChaosCmd, "fault-every", chaos.DefaultFaultEvery},
	{newChaosCmd, "warmup", chaos.DefaultWarmup},
	{newChaosCmd, "max-settle", chaos.DefaultMaxSettle},
	{newChaosCmd, "kill-pause", chaos.DefaultKillPause},
	{newChaosCmd, "lookahead", chaos.DefaultLookahead},
	// chaos passes no --lease or --lock-ttl by default: its windows assume
	// the nodes' defaults.
	{newChaosCmd, "lease", executor.DefaultLease},
	{newChaosCmd, "lock-ttl", scheduler.DefaultLockTTL},
	{newHealthcheckCmd, "url", DefaultHealthcheckURL},
	{newHealthcheckCmd, "timeout", DefaultHealthcheckTimeout},
}

// checkFlagDefault checks that flag states want as its default: as its
// value, or, for a flag that leaves zero for the code to fill in, in its
// help, after say ("default ").
func checkFlagDefault(t *testing.T, cmd *cobra.Command, flag string, want any, say string) {
	t.Helper()
	f := cmd.Flags().Lookup(flag)
	if f == nil {
		t.Fatalf("%s: no flag --%s", cmd.Name(), flag)
	}
	w := fmt.Sprint(want)
	if f.DefValue != "0" && f.DefValue != "" && f.DefValue != "0s" {
		if f.DefValue != w {
			t.Errorf("%s --%s default %q, want %q", cmd.Name(), flag, f.DefValue, w)
		}
		return
	}
	if !strings.Contains(f.Usage, say+w) {
		t.Errorf("%s --%s help %q does not say its default, %s", cmd.Name(), flag, f.Usage, w)
	}
}

// TestServeFlagDefaults: the help of each `chime serve` flag states the
// default that chime applies (the constant), whether the flag carries it
// as its value or leaves zero for chime.New to fill in.
func TestServeFlagDefaults(t *testing.T) {
	cmd := newServeCmd()
	for _, tc := range defaultsTable {
		t.Run(tc.flag, func(t *testing.T) { checkFlagDefault(t, cmd, tc.flag, tc.want, "default ") })
	}
}

// TestFlagDefaults: the flags of chime bench and chime chaos state the
// constants they default to.
func TestFlagDefaults(t *testing.T) {
	for _, tc := range flagDefaults {
		cmd := tc.cmd()
		say := "default "
		if tc.flag == "lease" || tc.flag == "lock-ttl" {
			say = "assume "
		}
		t.Run(cmd.Name()+"/"+tc.flag, func(t *testing.T) { checkFlagDefault(t, cmd, tc.flag, tc.want, say) })
	}
}

// TestDocsDefaults: the flag table of docs/configuration.md gives the
// same defaults as the constants.
func TestDocsDefaults(t *testing.T) {
	b, err := os.ReadFile("../../../docs/configuration.md")
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
				t.Fatalf("docs/configuration.md's table has no row for --%s", tc.flag)
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
				t.Errorf("docs/configuration.md says --%s defaults to %q, want %v (err %v)", tc.flag, cell, tc.want, err)
			}
		})
	}
}

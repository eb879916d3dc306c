package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/app/chaos"
)

func init() { addCommand(newChaosCmd) }

func newChaosCmd() *cobra.Command {
	var (
		cfg      chaos.Config
		asJSON   bool
		jsonFile string
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a chime cluster under faults and check that no fire is lost or doubled",
		Long: `chaos starts --nodes processes of this binary (chime serve) on loopback,
an HTTP receiver (in this process) and --timers timers (every second, every
3 seconds, @every 2s, one-shots, once a minute; a --long-share of them every
30 s with callbacks that the receiver holds open 12-20 s), then for
--duration injects faults one after the other, about every --fault-every:

  kill   SIGKILL a node and restart it
  stop   SIGSTOP a node longer than its lease, then SIGCONT
  redis  restart Redis (--redis-restart-cmd; mysql and postgres)
  db     restart the database (--db-restart-cmd)
  stall  freeze the store 6-14 s: --db-stall-cmd, then --db-resume-cmd
         (SIGSTOP/SIGCONT of the server); on SQLite chaos holds the
         file's write lock itself
  skew   restart a node with CHIME_TEST_CLOCK_OFFSET=±5s for 10-20 s,
         then normally
  partition  cut a node off from the database, from Redis or from both
         (drawn at random; the database alone with --coordination db) for
         5-20 s: each node reaches its servers through a proxy of chaos's
         that then stops forwarding, so its connections hang; mysql and
         postgres with one-server URLs
  redis-failover  SIGKILL the primary of the Redis that --redis-ha
         started (the Sentinel group's, or one of the cluster's three),
         wait for its replica's promotion, restart it as a replica
  db-failover  SIGKILL the PostgreSQL primary that --db-ha started and
         promote its synchronous standby (once a run)

--faults-first injects the given kinds first, in order. After a settle
phase it compares every expected fire with the callbacks received and the
runs in the store (docs/chaos.md).

Backends: sqlite (the nodes share one SQLite file with --file-locks), mysql
and postgres (a fresh database on --db, the slice index and locks on
--redis, or with --coordination db in lease rows of the database and no
Redis). --redis-ha and --db-ha start the servers of the failover faults
from Debian's redis-server and postgresql binaries on loopback.

The exit status is 1 when a guarantee broke: a fire missed, a run id
delivered twice with the same attempt, one fire under two run ids, two
deliveries of one fire overlapping (unless the first one's node was
SIGSTOPped meanwhile), a fire delivered early, or a completed delivery whose
run is not succeeded in the store; 3 when a fault could not be injected; 2
when the run could not be set up (a bad fault list, a server that does not
answer, a node that does not start).
Redeliveries with a higher attempt, from attempts in flight at a fault, are
allowed and counted by cause. scripts/chaos.sh runs the three backends with
their servers.`,
		Example: `  chime chaos --duration 60s
  chime chaos --backend mysql --db mysql://root@127.0.0.1:3306/ --redis redis://127.0.0.1:6379/5 --json
  chime chaos --backend postgres --db 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' \
    --redis redis://127.0.0.1:6379/6 --faults-first kill,stall,db --db-stall-cmd '…' --db-resume-cmd '…'
  chime chaos --backend postgres --db-ha --redis-ha sentinel --faults-first redis-failover,db-failover --duration 40s
  chime chaos --backend mysql --db mysql://root@127.0.0.1:3306/ --coordination db
  scripts/chaos.sh long`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if cfg.LongShare == 0 {
				cfg.LongShare = -1 // --long-share 0: none (0 in a Config is the default share)
			}
			rep, err := chaos.Run(cmd.Context(), cfg)
			if err != nil {
				// Set-up, not a verdict: 1 is kept for broken guarantees.
				return &ExitError{Code: 2, Err: err}
			}
			if jsonFile != "" {
				data, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonFile, append(data, '\n'), 0o644); err != nil {
					return fmt.Errorf("chaos: write report: %w", err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteTable(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !rep.OK() {
				return &ExitError{Code: 1, Err: fmt.Errorf("chaos: guarantees broken (%s); node logs in %s",
					strings.Join(rep.Failures(), "; "), rep.WorkDir)}
			}
			if rep.FaultErrors > 0 {
				return &ExitError{Code: 3, Err: fmt.Errorf("chaos: %d faults could not be injected (see the report's faults)", rep.FaultErrors)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Backend, "backend", chaos.BackendSQLite, "sqlite, mysql or postgres")
	f.StringVar(&cfg.DB, "db", "", "mysql: server DSN mysql://user:pass@host:port/; postgres: postgres://user:pass@host:port/db?sslmode=disable (a fresh database is created)")
	f.StringVar(&cfg.Redis, "redis", "", "mysql, postgres: redis://host:port/N for the slice index and locks")
	f.BoolVar(&cfg.RedisFlush, "redis-flush", false, "empty the --redis DB first (only if it is chaos's own)")
	f.StringVar(&cfg.Coordination, "coordination", "", "mysql, postgres: the nodes' --coordination, redis (default) or db (lease rows in the database; no --redis)")
	f.StringVar(&cfg.RedisHA, "redis-ha", "", "start a Redis of chaos's own instead of --redis: sentinel (primary, replica, 3 Sentinels) or cluster (3 primaries with a replica each); enables the redis-failover fault")
	f.BoolVar(&cfg.DBHA, "db-ha", false, "postgres: start a PostgreSQL primary with a synchronous standby of chaos's own instead of --db; enables the db-failover fault")
	f.IntVar(&cfg.Nodes, "nodes", chaos.DefaultNodes, "node processes")
	f.IntVar(&cfg.Timers, "timers", chaos.DefaultTimers, "timers")
	f.Float64Var(&cfg.LongShare, "long-share", chaos.DefaultLongShare, fmt.Sprintf("share of timers with long actions (held open %v-%v, every 30s, timeout %v); 0: none",
		chaos.LongHoldMin, chaos.LongHoldMax, chaos.LongTimeout))
	f.DurationVar(&cfg.Duration, "duration", chaos.DefaultDuration, "fault phase")
	f.DurationVar(&cfg.FaultEvery, "fault-every", chaos.DefaultFaultEvery, "mean interval between faults (uniform in [½, 1½]×)")
	f.DurationVar(&cfg.Warmup, "warmup", chaos.DefaultWarmup, "time without faults before the first one")
	f.DurationVar(&cfg.Settle, "settle", 0, "least settle time after the faults (default lease + lock TTL + 5s)")
	f.DurationVar(&cfg.MaxSettle, "max-settle", chaos.DefaultMaxSettle, "longest wait for fires still missing after the faults")
	f.DurationVar(&cfg.FaultWindow, "fault-window", 0, "fires scheduled this long after a fault count as during it (default lease + lock TTL + 2s)")
	f.DurationVar(&cfg.KillPause, "kill-pause", chaos.DefaultKillPause, "longest pause before a killed node restarts (at least 1s)")
	f.DurationVar(&cfg.LockTTL, "lock-ttl", 0, fmt.Sprintf("--lock-ttl of the nodes (default: not passed, the nodes' default; windows assume %v)", chaos.DefaultNodeLockTTL))
	f.DurationVar(&cfg.Lease, "lease", 0, fmt.Sprintf("--lease of the nodes (default: not passed, the nodes' default; windows and stops assume %v)", chaos.DefaultNodeLease))
	f.DurationVar(&cfg.Lookahead, "lookahead", chaos.DefaultLookahead, "--lookahead of the nodes")
	f.StringVar(&cfg.RedisRestartCmd, "redis-restart-cmd", "", "shell command that restarts Redis (enables the redis fault)")
	f.StringVar(&cfg.DBRestartCmd, "db-restart-cmd", "", "shell command that restarts the database (enables the db fault)")
	f.StringVar(&cfg.DBStallCmd, "db-stall-cmd", "", "shell command that freezes the database server, e.g. SIGSTOP (with --db-resume-cmd, enables the stall fault on mysql and postgres)")
	f.StringVar(&cfg.DBResumeCmd, "db-resume-cmd", "", "shell command that lets the frozen database server go, e.g. SIGCONT")
	f.StringSliceVar(&cfg.Faults, "faults", nil, "fault kinds to inject: kill, stop, redis, db, stall, skew, partition, redis-failover, db-failover (default all possible)")
	f.StringSliceVar(&cfg.FaultsFirst, "faults-first", nil, "fault kinds to inject first, in this order, whatever the duration (e.g. kill,stall,db); then random ones")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "node data dirs and logs (default a temp dir, removed when the run passes)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the work dir and the database")
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (default from the clock)")
	f.StringVar(&cfg.NodeLogLevel, "node-log-level", chaos.DefaultNodeLogLevel, "--log-level of the nodes")
	f.StringVar(&cfg.Bin, "bin", "", "chime binary for the nodes (default this one)")
	f.StringVar(&cfg.AltBin, "alt-bin", "", "a second chime binary for every other node (2nd, 4th…), restarts included: two versions in one cluster, as in a rolling upgrade")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&jsonFile, "json-file", "", "also write the report as JSON to this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "log progress (faults, settling)")
	return cmd
}

// Package chime embeds chime's distributed timer engine in a Go
// application: the same planner, scheduler, trigger, executor and sweeper,
// over the same backends and with the same guarantees as `chime serve`.
//
// One process keeps everything in one SQLite file (the default DB is
// sqlite://./chime-data/chime.db). A cluster of replicas shares MySQL/MariaDB
// or PostgreSQL and Redis: every replica runs a Node with the same Config,
// and each fire of each timer runs on exactly one replica.
//
//	n, err := chime.New(chime.Config{})
//	n.HandleFunc("backup_database", func(ctx context.Context, run *chime.Run) ([]byte, error) {
//		var args struct{ DB string `json:"db"` }
//		if err := run.Decode(&args); err != nil {
//			return nil, err
//		}
//		return backup(ctx, args.DB, run.ID) // run.ID is stable across retries
//	})
//	n.Every("nightly-backup", "0 3 * * *", "backup_database")
//	n.Start(ctx)
//	defer n.Shutdown(context.Background())
//
// # Handlers
//
// Handlers are registered by name, in the style of net/http: Handle and
// HandleFunc. A timer whose action is
//
//	{"type": "handler", "handler": {"name": "backup_database", "args": {"db": "main"}}}
//
// calls the handler registered under that name with a *Run that carries the
// run's id (the same for every attempt of one fire, for idempotency), its
// timer, its attempt number, its scheduled instant and the JSON args. The
// handler's context is cancelled at the timer's timeout. What it returns is
// recorded like the result of any run: output (truncated to 64 KiB) and, on
// error, a failed attempt that is retried per the timer's retry policy. A
// panic in a handler is recovered into a failed attempt whose error holds
// the panic value and the stack.
//
// A Handler that also implements ArgsValidator has its args checked when a
// timer is created or updated (Upsert, Every), not when it fires.
//
// # Runs whose handler is missing
//
// A node runs a handler run only if it registered that handler; the node
// never asks the cluster which nodes have which handler. Any node may claim
// a due run, so when the node that claims a run has no handler of that
// name, it fails the attempt with the error
//
//	no handler "backup_database" registered on node <node id>
//
// and the run is retried per the timer's retry policy, like any failure, so
// that another node that has the handler may claim the retry. A run whose
// handler no live node has therefore ends failed, after its attempts, with
// that error recorded: nothing waits forever. Give every replica the same
// handlers (the normal case: the same binary), and give handler timers
// retries with backoff if a rolling deploy may leave some replicas without a
// new handler for a while.
//
// # Timers from code
//
// Upsert creates or updates a timer by its (app, name), idempotently: every
// replica may call it at start-up with the same definition and the cluster
// ends up with one timer. A definition equal to the stored one writes
// nothing and does not replan; a changed one is updated and its future runs
// replanned. Every is the short form for a handler timer with no args.
//
// # Leader election
//
// Select elects one leader per service among the callers, with the node's
// Elector: Redis in a cluster, in process (or flock files, with
// Config.Cluster.FileLocks) on one host. Call it periodically with a hold longer
// than the period; the winner keeps leading while it calls.
//
// # Shell actions
//
// Shell actions ({"type": "shell", ...}) run commands and are disabled
// unless Config.Security.AllowShell is set; see action.ShellRunner.
package chime

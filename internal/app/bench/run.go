package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/trigger"
	"github.com/chimehq/chime/internal/store/sqlstore"
)

// Run: the entry point, from a Config to a Report.

// Run runs the scenario of cfg and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if err := checkAction(cfg); err != nil {
		return nil, err
	}
	rep := &Report{Machine: machine(), Started: time.Now().UTC()}
	rep.Params = Params{Scenario: cfg.Scenario, Backend: backendName(cfg), Receiver: receiverName(cfg), Timers: cfg.Timers,
		Buckets: cfg.Buckets, PoolSize: cfg.PoolSize, Lookahead: cfg.Lookahead.String(), ClaimAhead: trigger.DefaultClaimAhead.String()}
	if strings.HasPrefix(rep.Params.Backend, "sqlite") {
		rep.Params.Synchronous = cfg.SQLiteSynchronous
		if rep.Params.Synchronous == "" {
			rep.Params.Synchronous = sqlstore.SynchronousFull
		}
	}
	rep.Params.Action = cfg.Action
	if cfg.ClaimAhead > 0 {
		rep.Params.ClaimAhead = cfg.ClaimAhead.String()
	}
	if rep.Params.PoolSize == 0 {
		rep.Params.PoolSize = executor.DefaultPoolSize
	}
	var err error
	switch cfg.Scenario {
	case Steady:
		rep.Params.Rate, rep.Params.Duration, rep.Params.Warmup = cfg.Rate, cfg.Duration.String(), cfg.Warmup.String()
		rep.Params.Mix = steadyMixText
		if cfg.Spread {
			rep.Params.Mix = steadySpreadMix
		}
		rep.Steady, err = runSteady(ctx, cfg, &rep.Params)
	case Burst:
		rep.Params.Mix = "@at <one instant>"
		rep.Burst, err = runBurst(ctx, cfg)
	case Scale:
		rep.Params.Duration = cfg.Duration.String()
		rep.Params.Mix = scaleMixText
		rep.Scale, err = runScale(ctx, cfg)
	case API:
		rep.Params.Mix = apiMixText
		rep.API, err = runAPI(ctx, cfg)
	case Herd:
		rep.Params.Duration, rep.Params.Warmup, rep.Params.Mix = cfg.Duration.String(), cfg.Warmup.String(), herdMixText
		rep.Herd, err = runHerd(ctx, cfg, &rep.Params)
	default:
		return nil, fmt.Errorf("bench: unknown scenario %q (steady, burst, scale, api or herd)", cfg.Scenario)
	}
	if err != nil {
		return rep, err
	}
	if cfg.MemProfile != "" && cfg.Scenario != Steady && cfg.Scenario != Herd && cfg.Scenario != Scale { // those write it as their window ends
		if err := writeHeapProfile(cfg.MemProfile); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func backendName(cfg Config) string {
	db := "sqlite"
	switch {
	case strings.HasPrefix(cfg.DB, "mysql:"):
		db = "mysql"
	case strings.HasPrefix(cfg.DB, "postgres:"), strings.HasPrefix(cfg.DB, "postgresql:"):
		db = "postgres"
	}
	switch {
	case cfg.Redis != "":
		return db + "+redis"
	case cfg.FileLocks:
		return db + "+files"
	}
	return db + "+memory"
}

func receiverName(cfg Config) string {
	if cfg.Action == ActionHandler {
		return "none (Go handler in process)"
	}
	if cfg.Receiver != "" {
		return cfg.Receiver
	}
	return "in-process"
}

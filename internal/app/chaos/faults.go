package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
)

// estimate is a generous length of a fault of kind k, for fitting
// Config.FaultsFirst into the fault phase.
func (c *cluster) estimate(k string) time.Duration {
	switch k {
	case FaultKill:
		return c.cfg.KillPause + 3*time.Second
	case FaultPause:
		return c.cfg.lease() + 2*time.Second
	case FaultStall:
		return StallMax + time.Second
	case FaultSkew:
		return SkewMax + 2*(nodeShutdownTimeout+3*time.Second)
	case FaultDB:
		return 8 * time.Second
	case FaultPartition:
		return PartitionMax + time.Second
	case FaultRedisFailover, FaultDBFailover:
		return 15 * time.Second
	default:
		return 3 * time.Second
	}
}

// injectFaults injects faults one after the other until end, and returns
// them: first Config.FaultsFirst in order (all of them, even past end),
// then random kinds of Config.Faults.
func (c *cluster) injectFaults(ctx context.Context, end time.Time) []Fault {
	var faults []Fault
	first := slicesClone(c.cfg.FaultsFirst)
	maxFaults := int(c.cfg.Duration/time.Second) + 1 // at most one a second
	for len(first) > 0 || len(faults) < maxFaults {
		wait := c.cfg.FaultEvery/2 + time.Duration(c.rng.Int64N(int64(c.cfg.FaultEvery)+1))
		kind := ""
		if len(first) > 0 {
			kind, first = first[0], first[1:]
			// Leave room for the forced faults still to come: share the
			// time left after their estimates among the waits.
			need := c.estimate(kind)
			for _, k := range first {
				need += c.estimate(k)
			}
			slack := (time.Until(end) - need) / time.Duration(len(first)+1)
			wait = min(wait, max(slack, time.Second))
		} else if time.Now().Add(wait).After(end) {
			break
		}
		if clock.Sleep(ctx, nil, wait) != nil {
			break
		}
		if kind == "" {
			if len(c.cfg.Faults) == 0 {
				break // the only kind was a db-failover, done
			}
			kind = c.cfg.Faults[c.rng.IntN(len(c.cfg.Faults))]
		}
		f := c.inject(ctx, kind)
		c.log.Info("chaos: fault", "kind", f.Kind, "node", f.Node, "offset", f.Offset, "target", f.Target,
			"took", f.End.Sub(f.Start).Round(time.Millisecond), "err", f.Err)
		faults = append(faults, f)
	}
	if d := time.Until(end); d > 0 {
		_ = clock.Sleep(ctx, nil, d)
	} else if len(c.cfg.FaultsFirst) > 0 {
		c.log.Warn("chaos: the faults to inject first outlasted the fault phase", "over", -d.Round(time.Millisecond))
	}
	return faults
}

// inject injects one fault and returns when it is over.
func (c *cluster) inject(ctx context.Context, kind string) Fault {
	f := Fault{Kind: kind, Start: time.Now()}
	var err error
	switch kind {
	case FaultKill:
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		f.Node = n.name
		f.Start = time.Now()
		if err = n.kill(); err == nil {
			_ = clock.Sleep(ctx, nil, time.Second+time.Duration(c.rng.Int64N(int64(max(c.cfg.KillPause-time.Second, 0))+1)))
			if err = n.start(nil); err == nil {
				err = n.waitReady(ctx, 60*time.Second)
			}
		}
	case FaultPause:
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		f.Node = n.name
		f.Start = time.Now()
		if err = n.pause(); err == nil {
			_ = clock.Sleep(ctx, nil, c.cfg.lease()+time.Second+time.Duration(c.rng.Int64N(int64(time.Second))))
			err = n.resume()
		}
	case FaultRedis:
		err = c.shell(ctx, c.cfg.RedisRestartCmd)
	case FaultDB:
		err = c.shell(ctx, c.cfg.DBRestartCmd)
	case FaultRedisFailover:
		err = c.ha.redisFailover(&f, c.rng)
	case FaultDBFailover:
		if err = c.ha.dbFailover(&f); err == nil {
			// The promoted standby has no standby of its own: no more
			// db-failovers drawn at random.
			c.cfg.Faults = slices.DeleteFunc(c.cfg.Faults, func(k string) bool { return k == FaultDBFailover })
		}
	case FaultStall:
		err = c.stall(ctx, StallMin+time.Duration(c.rng.Int64N(int64(StallMax-StallMin)+1)), &f)
	case FaultPartition:
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		target := c.nextPartitionTarget()
		err = c.partition(ctx, n, target, PartitionMin+time.Duration(c.rng.Int64N(int64(PartitionMax-PartitionMin)+1)), &f)
	case FaultSkew:
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		off := SkewOffset
		if c.rng.IntN(2) == 0 {
			off = -off
		}
		err = c.skew(ctx, n, off, SkewMin+time.Duration(c.rng.Int64N(int64(SkewMax-SkewMin)+1)), &f)
	}
	f.End = time.Now()
	if err != nil {
		f.Err = err.Error()
		c.log.Warn("chaos: fault failed", "kind", kind, "node", f.Node, "err", err)
	}
	// A node that a failed fault left down (or skewed) is restarted.
	c.reviveAll(ctx)
	return f
}

// stall freezes the store for d: on SQLite this process holds the file's
// write lock; otherwise the stall command freezes the server and the
// resume command lets it go (run even if ctx is done).
func (c *cluster) stall(ctx context.Context, d time.Duration, f *Fault) error {
	f.StallMS = ms(d)
	if c.cfg.Backend == BackendSQLite {
		return holdSQLiteWriteLock(ctx, c.sqlite, d, func() { f.Start = time.Now() })
	}
	c.mu.Lock()
	c.stalled = true
	c.mu.Unlock()
	f.Start = time.Now()
	if err := c.shell(ctx, c.cfg.DBStallCmd); err != nil {
		if rerr := c.unstall(); rerr != nil {
			return fmt.Errorf("stall: %w (and resume: %v)", err, rerr)
		}
		return fmt.Errorf("stall: %w", err)
	}
	_ = clock.Sleep(ctx, nil, d)
	if err := c.unstall(); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// unstall runs the resume command if a stall command froze the database.
func (c *cluster) unstall() error {
	c.mu.Lock()
	stalled := c.stalled
	c.mu.Unlock()
	if !stalled {
		return nil
	}
	err := c.shell(context.Background(), c.cfg.DBResumeCmd)
	if err != nil {
		c.log.Warn("chaos: resume the database", "err", err)
		return err
	}
	c.mu.Lock()
	c.stalled = false
	c.mu.Unlock()
	return nil
}

// nextPartitionTarget draws the target of a partition: the three targets
// (db, redis, both) in a random order, then again, so that any three
// partitions in a row cover each of them.
func (c *cluster) nextPartitionTarget() string {
	if !c.cfg.withRedis() {
		return PartitionDB // the nodes have no Redis to be cut off from
	}
	if len(c.partitionTargets) == 0 {
		c.partitionTargets = []string{PartitionDB, PartitionRedis, PartitionBoth}
		c.rng.Shuffle(3, func(i, j int) {
			c.partitionTargets[i], c.partitionTargets[j] = c.partitionTargets[j], c.partitionTargets[i]
		})
	}
	t := c.partitionTargets[0]
	c.partitionTargets = c.partitionTargets[1:]
	return t
}

// partition cuts n off from target (db, redis or both) for d: its proxies
// stop forwarding, so its connections hang; then they forward again (also
// when ctx is done).
func (c *cluster) partition(ctx context.Context, n *node, target string, d time.Duration, f *Fault) error {
	f.Node, f.Target = n.name, target
	ps := n.proxiesOf(target)
	if len(ps) == 0 {
		return fmt.Errorf("partition: node %s has no proxy to %s", n.name, target)
	}
	f.Start = time.Now()
	for _, p := range ps {
		p.partition()
	}
	_ = clock.Sleep(ctx, nil, d)
	for _, p := range ps {
		p.heal()
	}
	return nil
}

// skew restarts n with its clock shifted by off (ClockOffsetEnv), keeps it
// so for hold, records what it answers on /readyz and its clock-skew
// gauge, and restarts it normally. A skewed node is expected to stay
// unready (503, "clock skew") and to send no callback: it is waited for
// with /healthz.
func (c *cluster) skew(ctx context.Context, n *node, off, hold time.Duration, f *Fault) error {
	f.Node, f.Offset = n.name, off.String()
	f.Start = time.Now()
	if err := n.stop(nodeShutdownTimeout + 5*time.Second); err != nil {
		c.log.Warn("chaos: skew: stop node", "node", n.name, "err", err)
	}
	if err := n.start([]string{ClockOffsetEnv + "=" + off.String()}); err != nil {
		return err
	}
	f.SkewedFrom = time.Now()
	if err := n.waitHealthy(ctx, 60*time.Second); err != nil {
		return err
	}
	_ = clock.Sleep(ctx, nil, hold)
	status, body, err := n.get(ctx, "/readyz")
	if err != nil {
		f.SkewReadyz = "error: " + err.Error()
	} else {
		f.SkewReadyz = fmt.Sprintf("%d %s", status, truncate(body, 200))
	}
	f.SkewGauge = n.metric(ctx, "chime_clock_skew_seconds")
	if err := n.stop(nodeShutdownTimeout + 5*time.Second); err != nil {
		c.log.Warn("chaos: skew: stop skewed node", "node", n.name, "err", err)
	}
	f.SkewedTo = time.Now()
	if err := n.start(nil); err != nil {
		return err
	}
	return n.waitReady(ctx, 60*time.Second)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// reviveAll heals partitions, resumes paused nodes, restarts exited ones
// and restarts skewed ones without the skew.
func (c *cluster) reviveAll(ctx context.Context) {
	c.healAll()
	for _, n := range c.nodes {
		if err := n.resume(); err != nil {
			c.log.Warn("chaos: resume node", "node", n.name, "err", err)
		}
		n.mu.Lock()
		skewed := n.skewed
		n.mu.Unlock()
		if skewed && n.alive() {
			c.log.Warn("chaos: node still skewed; restarting it", "node", n.name)
			if err := n.stop(nodeShutdownTimeout + 5*time.Second); err != nil {
				c.log.Warn("chaos: stop skewed node", "node", n.name, "err", err)
			}
		}
		if n.alive() {
			continue
		}
		c.log.Warn("chaos: node down; restarting", "node", n.name, "log", n.logPath)
		if err := n.start(nil); err != nil {
			c.log.Warn("chaos: restart node", "node", n.name, "err", err)
			continue
		}
		if err := n.waitReady(ctx, 60*time.Second); err != nil {
			c.log.Warn("chaos: restarted node not ready", "node", n.name, "err", err)
		}
	}
}

// shell runs a command with sh -c, for at most two minutes.
func (c *cluster) shell(ctx context.Context, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%q: %w: %s", command, err, strings.TrimSpace(string(out)))
	}
	return nil
}

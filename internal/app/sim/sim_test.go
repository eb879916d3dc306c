package sim

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"
)

// defaultSeeds and defaultHour are what TestSimulation runs without -seeds
// and -hour: 12 seeds of a 10-minute "hour" (faults in its first half,
// checks at its end) take about 1.5 minutes of one CPU, which keeps the
// default run within 3 minutes on the 2-core CI machine; a real simulated
// hour costs about a CPU-minute (docs/guarantees.md, "Deterministic
// simulation"). With -short or -race it runs one seed of a 3-minute "hour".
const (
	defaultSeeds = 12
	defaultHour  = 10 * time.Minute
)

var (
	seedFlag   = flag.Uint64("seed", 0, "run this one seed (replay)")
	seedsFlag  = flag.Int("seeds", defaultSeeds, "how many seeds to run, from -first")
	firstFlag  = flag.Uint64("first", 1, "first seed of a -seeds run")
	hoursFlag  = flag.Int("hours", 1, "simulated hours per seed")
	hourFlag   = flag.Duration("hour", defaultHour, "length of a simulated \"hour\", the span checked at its end (longer: more faults, slower)")
	nodesFlag  = flag.Int("nodes", 0, "cluster size (0: drawn from the seed, 3 to 5)")
	timersFlag = flag.Int("timers", 0, "timers in the workload (0: drawn from the seed)")
	allFlag    = flag.Bool("all", false, "fail on the known holes too")
	logFlag    = flag.Bool("simlog", false, "print the engines' logs (with -seed)")
)

// knownHoles are the invariants the engine is known to break: a seed that
// breaks only these is reported, not failed; -all fails on them
// regardless. None is known: docs/guarantees.md, "Deterministic
// simulation", would list a seed that breaks each.
var knownHoles = []string{}

// TestSimulation runs the deterministic simulation for many seeds (or one,
// with -seed) and fails on any broken invariant that knownHoles does not
// list. A failure prints its seed and the command that replays it.
func TestSimulation(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (testing.Short() || raceEnabled) && !set["seeds"] && !set["hour"] {
		*seedsFlag, *hourFlag = 1, 3*time.Minute
	}
	seeds := make([]uint64, 0, *seedsFlag)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range *seedsFlag {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	start := time.Now()
	holes := map[string][]uint64{}
	for _, seed := range seeds {
		res := runSeed(t, seed)
		if res == nil {
			continue
		}
		var fail []Violation
		for _, v := range res.Violations {
			if *allFlag || !slices.Contains(knownHoles, v.Invariant) {
				fail = append(fail, v)
			}
			if !slices.Contains(holes[v.Invariant], seed) {
				holes[v.Invariant] = append(holes[v.Invariant], seed)
			}
		}
		if *seedFlag != 0 || testing.Verbose() && len(res.Violations) > 0 {
			t.Logf("seed %d: %d nodes, %d executions, %d store calls, faults: %s", seed, res.Nodes, res.Execs, res.StoreCalls, strings.Join(res.Faults, "; "))
			for _, v := range res.Violations {
				t.Logf("seed %d: %s", seed, v)
			}
		}
		if len(fail) > 0 {
			t.Errorf("seed %d broke %s\nreplay: %s", seed, fail[0], replay(seed))
		}
	}
	t.Logf("%d seeds of %d simulated hour(s) of %s in %s", len(seeds), *hoursFlag, *hourFlag, time.Since(start).Round(time.Millisecond))
	for _, inv := range Invariants {
		if s := holes[inv]; len(s) > 0 {
			t.Logf("%s broken by %d seeds: %v", inv, len(s), s[:min(len(s), 20)])
		}
	}
}

// runSeed runs one seed in a synctest bubble.
func runSeed(t *testing.T, seed uint64) *Result {
	var res *Result
	t.Run(fmt.Sprint(seed), func(t *testing.T) {
		stop := make(chan struct{})
		defer close(stop)
		go watchdog(seed, stop)
		cryptotest.SetGlobalRandom(t, seed)
		synctest.Test(t, func(t *testing.T) {
			opts := Options{Seed: seed, Hours: *hoursFlag, Hour: *hourFlag, Nodes: *nodesFlag, Timers: *timersFlag}
			if *logFlag {
				opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			r, err := Run(opts)
			if err != nil {
				t.Fatalf("seed %d: %v\nreplay: %s", seed, err, replay(seed))
			}
			res = r
		})
	})
	return res
}

// replay is the command that replays seed with this run's settings.
func replay(seed uint64) string {
	cmd := fmt.Sprintf("go test ./internal/app/sim -run TestSimulation -seed %d -v", seed)
	if *hoursFlag != 1 {
		cmd += fmt.Sprintf(" -hours %d", *hoursFlag)
	}
	if *hourFlag != defaultHour {
		cmd += fmt.Sprintf(" -hour %s", *hourFlag)
	}
	if *nodesFlag != 0 {
		cmd += fmt.Sprintf(" -nodes %d", *nodesFlag)
	}
	if *timersFlag != 0 {
		cmd += fmt.Sprintf(" -timers %d", *timersFlag)
	}
	return cmd
}

// stuckAfter is how long, in real time, a simulation may make no store call
// before watchdog ends the process.
const stuckAfter = 3 * time.Minute

// watchdog, outside the bubble, ends the process with every goroutine's
// stack when the simulation of seed makes no store call for stuckAfter: its
// clock stopped because a goroutine waits for a mutex (which the bubble
// does not count as durably blocked) that another holds across a store call
// that a fault delays on simulated time (see the package doc).
func watchdog(seed uint64, stop <-chan struct{}) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	last, since := Progress.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if p := Progress.Load(); p != last {
			last, since = p, time.Now()
			continue
		}
		if time.Since(since) >= stuckAfter {
			debug.SetTraceback("all")
			panic(fmt.Sprintf("seed %d: the simulation made no progress for %s of real time: a goroutine waits for a mutex held across a delayed store call (internal/app/sim package doc)\nreplay: %s", seed, stuckAfter, replay(seed)))
		}
	}
}

// Command chime is the chime timer service and its command line client.
package main

import (
	"context"
	"os"
	"runtime/debug"
	// The time-zone database, embedded (about 450 KB): timers' zones load
	// on a machine or in an image without /usr/share/zoneinfo (the
	// container image is FROM scratch). A system database, when there is
	// one, is still read first.
	_ "time/tzdata"

	"github.com/chimehq/chime/internal/app/cli"
)

// defaultGOGC is the garbage collector's target percentage when the
// environment sets no GOGC: the heap grows to 1.7 times the live heap
// between collections instead of Go's default 2. A node's live heap is
// mostly the plan and the queues of runs due soon, which a collection
// keeps; at 10,000 every-second timers the anonymous memory fell from
// 277–322 MiB to 253–277 MiB for no measurable CPU
// (docs/performance.md, "Knobs"). Programs that
// embed the engine keep their own setting.
const defaultGOGC = 70

func main() {
	applyGCDefault()
	os.Exit(cli.Run(context.Background()))
}

// applyGCDefault sets the collector's target to defaultGOGC unless the
// environment sets GOGC.
func applyGCDefault() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGOGC)
	}
}

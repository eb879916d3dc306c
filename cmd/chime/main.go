// Command chime is the chime timer service and its command line client.
package main

import (
	"context"
	"os"
	// The time-zone database, embedded (about 450 KB): timers' zones load
	// on a machine or in an image without /usr/share/zoneinfo (the
	// container image is FROM scratch). A system database, when there is
	// one, is still read first.
	_ "time/tzdata"

	"github.com/chimehq/chime/internal/cli"
)

func main() { os.Exit(cli.Run(context.Background())) }

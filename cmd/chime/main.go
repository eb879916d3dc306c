// Command chime is the chime timer service and its command line client.
package main

import (
	"context"
	"os"

	"github.com/chimehq/chime/internal/cli"
)

func main() { os.Exit(cli.Run(context.Background())) }

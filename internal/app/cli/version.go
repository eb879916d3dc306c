package cli

// chime version: what this binary was built from.

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

func init() { addCommand(newVersionCmd) }

// Version is what a binary was built from, as chime version prints it.
type Version struct {
	// Module is the main module's version: a tag (v1.2.0), a pseudo-version
	// for a build from a checkout (v0.0.0-20261201173000-6538665abcde, with
	// +dirty when the work tree had changes). When the toolchain stamped a
	// commit but no version (as go build -buildvcs=true in a checkout
	// without tags did before Go 1.24), it is the pseudo-version of the
	// commit and its time; (devel) when it knew neither.
	Module string
	// Commit is the VCS revision the binary was built from, empty when
	// unknown (built with -buildvcs=false, or outside a checkout, as by
	// go run or go test).
	Commit string
	// Time is the commit's time, zero when unknown.
	Time time.Time
	// Dirty reports that the work tree had uncommitted changes.
	Dirty bool
	// Go is the version of the toolchain that built the binary.
	Go string
}

// BuildVersion reads this binary's Version from its build information.
func BuildVersion() Version {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Version{Module: "unknown", Go: runtime.Version()}
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) Version {
	v := Version{Module: bi.Main.Version, Go: bi.GoVersion}
	if v.Module == "" {
		v.Module = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Dirty = s.Value == "true"
		case "vcs.time":
			v.Time, _ = time.Parse(time.RFC3339, s.Value)
		}
	}
	if v.Module == "(devel)" && len(v.Commit) >= 12 && !v.Time.IsZero() {
		v.Module = "v0.0.0-" + v.Time.UTC().Format("20060102150405") + "-" + v.Commit[:12]
		if v.Dirty {
			v.Module += "+dirty"
		}
	}
	return v
}

// String is the output of chime version: one "name: value" line each.
func (v Version) String() string {
	commit := v.Commit
	switch {
	case commit == "":
		commit = "unknown"
	default:
		if !v.Time.IsZero() {
			commit += " " + v.Time.UTC().Format(time.RFC3339)
		}
		if v.Dirty {
			commit += " (dirty)"
		}
	}
	return fmt.Sprintf("version: %s\ncommit:  %s\ngo:      %s\n", v.Module, commit, v.Go)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version this binary was built from",
		Long: `Print the main module's version, the VCS commit the binary was built from
("(dirty)" when the work tree had uncommitted changes; "unknown" for a build
without VCS information, such as go run) and the Go version that built it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), BuildVersion())
			return err
		},
	}
}

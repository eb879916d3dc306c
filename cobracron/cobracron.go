// Package cobracron runs commands of a cobra application on a schedule,
// once per fire across all the replicas of the application, with an
// embedded chime node (package chime).
//
//	root := &cobra.Command{Use: "myapp"}
//	report := &cobra.Command{Use: "report", RunE: runReport}
//	cobracron.AddCronCommand(root, "0 7 * * MON-FRI", report)
//	root.AddCommand(cobracron.NodeCommand("cron-node", func() chime.Config {
//		return chime.Config{DB: os.Getenv("DB"), Redis: os.Getenv("REDIS"), App: "myapp"}
//	}))
//	root.Execute()
//
// `myapp report` still runs the command by hand; `myapp cron-node` (on
// every replica) runs the node that runs it at 7:00 on weekdays, on one
// replica. Start does the same from code.
//
// Each cron command becomes a handler named "cobra:<command path>" and a
// timer of the same name in Config.App (spaces become dots), with a 1 hour
// timeout. A fire calls the command's hooks and RunE as cobra would (the
// nearest PersistentPreRun(E), PreRun(E), Run(E), PostRun(E), the nearest
// PersistentPostRun(E)), with the context of the run (cancelled at the
// timeout) as cmd.Context(), and with what the command writes to
// cmd.OutOrStdout() and cmd.ErrOrStderr() recorded as the run's output.
// The timer's args may give the command line: {"args": ["--full", "eu"]}.
// Flags are reset to their defaults before each fire, and the fires of one
// command are serialised in a process, since cobra keeps flag values in the
// command.
package cobracron

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/chimehq/chime"
)

// Annotation is the key of cmd.Annotations that holds a cron command's
// schedule.
const Annotation = "chime.cron"

// DefaultTimeout is the timeout of the timers of cron commands.
const DefaultTimeout = time.Hour

// AddCronCommand adds cmd to root, unless it is already a subcommand of a
// command of root's tree, and marks it to run on spec (a chime schedule:
// cron, "@every 10m", ...) once per fire across the replicas that run a
// node with Start or NodeCommand.
func AddCronCommand(root *cobra.Command, spec string, cmd *cobra.Command) {
	if !under(root, cmd) {
		root.AddCommand(cmd)
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[Annotation] = spec
}

func under(root, cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c == root {
			return true
		}
	}
	return false
}

// Job is one cron command.
type Job struct {
	Spec    string
	Cmd     *cobra.Command
	Handler string // handler name: "cobra:" + command path
	Timer   string // timer name: the command path with dots
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._:-]+`)

// Jobs returns the cron commands of root's tree.
func Jobs(root *cobra.Command) []Job {
	var jobs []Job
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if spec, ok := c.Annotations[Annotation]; ok {
			path := c.CommandPath()
			name := unsafeName.ReplaceAllString(strings.Join(strings.Fields(path), "."), "_")
			if len(name) > 100 {
				name = name[len(name)-100:]
			}
			jobs = append(jobs, Job{Spec: spec, Cmd: c, Handler: "cobra:" + path, Timer: name})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return jobs
}

// Register registers a handler for each cron command of root's tree on n
// and upserts its timer (idempotently: every replica may do it).
func Register(ctx context.Context, n *chime.Node, root *cobra.Command) error {
	var errs []error
	for _, j := range Jobs(root) {
		n.Handle(j.Handler, &handler{cmd: j.Cmd})
		_, err := n.Upsert(ctx, chime.Timer{
			Name: j.Timer, Description: "cobra command " + j.Cmd.CommandPath(),
			Schedule: j.Spec, Timeout: DefaultTimeout,
			Action: chime.HandlerAction(j.Handler, map[string][]string{"args": {}}),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cron command %q: %w", j.Cmd.CommandPath(), err))
		}
	}
	return errors.Join(errs...)
}

// Start creates a node with cfg, registers root's cron commands and starts
// it. The caller shuts the node down.
func Start(ctx context.Context, root *cobra.Command, cfg chime.Config) (*chime.Node, error) {
	n, err := chime.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := Register(ctx, n, root); err != nil {
		n.Shutdown(context.Background())
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		n.Shutdown(context.Background())
		return nil, err
	}
	return n, nil
}

// NodeCommand returns a command, named use, that runs the node of the cron
// commands of its root until SIGINT, SIGTERM or the end of its context,
// then shuts it down (in-flight commands finish within 30s). cfg is called
// when the command runs, after flags and configuration were parsed.
func NodeCommand(use string, cfg func() chime.Config) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: "Run the scheduled commands of this program (a chime node)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := Start(ctx, cmd.Root(), cfg())
			if err != nil {
				return err
			}
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return n.Shutdown(sctx)
		},
	}
}

// handler runs one cobra command.
type handler struct {
	mu  sync.Mutex
	cmd *cobra.Command
}

func (h *handler) Run(ctx context.Context, run *chime.Run) ([]byte, error) {
	var a struct {
		Args []string `json:"args"`
	}
	if err := run.Decode(&a); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.cmd
	resetFlags(c.Flags())
	if err := c.ParseFlags(a.Args); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	args := c.Flags().Args()
	if c.Args != nil {
		if err := c.Args(c, args); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	prevCtx := c.Context()
	c.SetContext(ctx)
	defer func() {
		c.SetOut(nil)
		c.SetErr(nil)
		if prevCtx != nil {
			c.SetContext(prevCtx)
		}
	}()
	err := execute(c, args)
	return out.Bytes(), err
}

func execute(c *cobra.Command, args []string) error {
	for p := c; p != nil; p = p.Parent() {
		if p.PersistentPreRunE != nil {
			if err := p.PersistentPreRunE(c, args); err != nil {
				return err
			}
			break
		}
		if p.PersistentPreRun != nil {
			p.PersistentPreRun(c, args)
			break
		}
	}
	if c.PreRunE != nil {
		if err := c.PreRunE(c, args); err != nil {
			return err
		}
	} else if c.PreRun != nil {
		c.PreRun(c, args)
	}
	switch {
	case c.RunE != nil:
		if err := c.RunE(c, args); err != nil {
			return err
		}
	case c.Run != nil:
		c.Run(c, args)
	default:
		return fmt.Errorf("command %q has no Run or RunE", c.CommandPath())
	}
	if c.PostRunE != nil {
		if err := c.PostRunE(c, args); err != nil {
			return err
		}
	} else if c.PostRun != nil {
		c.PostRun(c, args)
	}
	for p := c; p != nil; p = p.Parent() {
		if p.PersistentPostRunE != nil {
			return p.PersistentPostRunE(c, args)
		}
		if p.PersistentPostRun != nil {
			p.PersistentPostRun(c, args)
			return nil
		}
	}
	return nil
}

// resetFlags sets every flag back to its default.
func resetFlags(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			def := strings.TrimSuffix(strings.TrimPrefix(f.DefValue, "["), "]")
			var vals []string
			if def != "" {
				vals = strings.Split(def, ",")
			}
			_ = sv.Replace(vals)
		} else {
			_ = f.Value.Set(f.DefValue)
		}
		f.Changed = false
	})
}

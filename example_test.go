package chime_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/chimehq/chime"
)

// A single process: SQLite in a directory, a handler, and a timer that
// fires once, a second from now.
func Example() {
	dir, err := os.MkdirTemp("", "chime-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	n, err := chime.New(chime.Config{
		DataDir: dir,
		DB:      "sqlite://" + filepath.Join(dir, "chime.db"),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan string, 1)
	n.HandleFunc("greet", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		var args struct {
			Who string `json:"who"`
		}
		if err := run.Decode(&args); err != nil {
			return nil, err
		}
		done <- fmt.Sprintf("hello, %s (attempt %d)", args.Who, run.Attempt)
		return []byte("greeted"), nil
	})
	ctx := context.Background()
	if err := n.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer n.Shutdown(ctx)

	at := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	if _, err := n.Upsert(ctx, chime.Timer{
		Name:     "greet-once",
		Schedule: "@at " + at,
		Action:   chime.HandlerAction("greet", map[string]string{"who": "world"}),
	}); err != nil {
		log.Fatal(err)
	}
	select {
	case msg := <-done:
		fmt.Println(msg)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output: hello, world (attempt 1)
}

// Three replicas of one application share MariaDB and Redis. Each runs
// this same code; every replica upserts the same timer, the cluster keeps
// one, and each fire runs on exactly one replica. (Not run: it needs the
// servers.)
func Example_cluster() {
	ctx := context.Background()
	n, err := chime.New(chime.Config{
		DB:    "mysql://chime:secret@db.internal:3306/chime",
		Redis: "redis://redis.internal:6379/0",
		App:   "billing",
	})
	if err != nil {
		log.Fatal(err)
	}
	n.HandleFunc("send_invoices", func(ctx context.Context, run *chime.Run) ([]byte, error) {
		// run.ID is the same for every attempt of this fire: use it as
		// the idempotency key of the work.
		return nil, sendInvoices(ctx, run.ID)
	})
	if err := n.Every("invoices", "0 */5 * * * *", "send_invoices"); err != nil {
		log.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer n.Shutdown(context.Background())

	// Leader election for the application's own singleton duties.
	leader, err := n.Select(ctx, "report-aggregator", n.ID(), 30*time.Second)
	if err == nil && leader == n.ID() {
		fmt.Println("this replica aggregates the reports")
	}
	<-ctx.Done()
}

func sendInvoices(ctx context.Context, key string) error { return nil }

package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// backends opens a fresh, empty store of each kind that shares nothing
// with any other it opened, as storetest.Run (whose tests run in parallel)
// requires: SQLite on a file in the test's temp dir or in a private
// in-memory database (a random name per Open); MariaDB and PostgreSQL on a
// database of its own (testenv), dropped when the test ends.
var backends = []struct {
	name string
	open func(tb testing.TB) *Store
}{
	{"sqlite", openSQLiteFile},
	{"sqlite-memory", func(tb testing.TB) *Store { return mustOpen(tb, "sqlite::memory:") }},
	{"mariadb", openMySQLTemp},
	{"postgres", openPostgresTemp},
}

func mustOpen(tb testing.TB, dsn string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		tb.Fatalf("Open(%s): %v", dsn, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func openSQLiteFile(tb testing.TB) *Store {
	// A directory that does not exist yet: Open creates it.
	return mustOpen(tb, "sqlite://"+filepath.Join(tb.TempDir(), "data", "chime.db"))
}

func openMySQLTemp(tb testing.TB) *Store { return mustOpen(tb, testenv.MySQLDatabase(tb)) }

func openPostgresTemp(tb testing.TB) *Store { return mustOpen(tb, testenv.PostgresDatabase(tb)) }

func TestStore(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) store.Store { return be.open(t) })
		})
	}
}

// TestMigrateConcurrently opens one database from several goroutines at once
// (as several processes would) and then again: every Open succeeds.
func TestMigrateConcurrently(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "m.db") },
		"mariadb":  func(t *testing.T) string { return testenv.MySQLDatabase(t) },
		"postgres": func(t *testing.T) string { return testenv.PostgresDatabase(t) },
	}
	for name, mk := range dsns {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := mk(t)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { mustOpen(t, dsn) })
			}
			wg.Wait()
			s := mustOpen(t, dsn)
			files, err := fs.ReadDir(migrationsFS, path.Join("migrations", s.d.String()))
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := s.r.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(files) {
				t.Errorf("schema_migrations has %d rows (%v), want %d", n, err, len(files))
			}
		})
	}
}

// TestSQLiteSharedFile: two stores (as two processes) on one file claim the
// same runs concurrently, without errors and without double claims.
func TestSQLiteSharedFile(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "shared.db")
	a, b := mustOpen(t, dsn), mustOpen(t, dsn)
	ctx := t.Context()
	tm := storetest.NewTimer("app", "shared")
	if _, err := a.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
		t.Fatal(err)
	}
	runs := storetest.NewRuns(tm.ID, time.Now(), time.Millisecond, 2000)
	// Both plan the same runs.
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		wg.Go(func() {
			if _, err := s.InsertRuns(ctx, runs); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var mu sync.Mutex
	owner := map[string]string{}
	for i, s := range []*Store{a, b, a, b} {
		node := fmt.Sprintf("node%d", i)
		wg.Go(func() {
			in := slices.Clone(runs)
			if i%2 == 1 {
				slices.Reverse(in)
			}
			for len(in) > 0 {
				n := min(100, len(in))
				var cs []store.Claim
				now := time.Now()
				for _, r := range in[:n] {
					cs = append(cs, store.Claim{RunID: r.ID, Node: node, LeaseUntil: now.Add(time.Minute), Now: now})
				}
				in = in[n:]
				got, err := s.ClaimRuns(ctx, cs)
				if err != nil {
					t.Error(err)
					return
				}
				var rs []model.Result
				mu.Lock()
				for _, c := range got {
					if prev, ok := owner[c.Run.ID]; ok {
						t.Errorf("run %s claimed by %s and %s", c.Run.ID, prev, node)
					}
					owner[c.Run.ID] = node
					rs = append(rs, model.Result{RunID: c.Run.ID, Node: node, Attempt: 1, Status: model.RunSucceeded,
						StartedAt: now, FinishedAt: time.Now()})
				}
				mu.Unlock()
				ok, _, err := s.FinishRuns(ctx, rs)
				if err != nil {
					t.Error(err)
					return
				}
				for i, o := range ok {
					if !o {
						t.Errorf("finish of %s lost its fence", rs[i].RunID)
					}
				}
			}
		})
	}
	wg.Wait()
	if len(owner) != len(runs) {
		t.Errorf("%d runs claimed, want %d", len(owner), len(runs))
	}
	st, err := b.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs[model.RunSucceeded] != int64(len(runs)) || len(st.Runs) != 1 {
		t.Errorf("stats = %v, want %d succeeded", st.Runs, len(runs))
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct{ name, dsn string }{
		{"no scheme", "chime.db"},
		{"unknown scheme", "oracle://x"},
		{"empty sqlite path", "sqlite://"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Open(t.Context(), tc.dsn, Options{}); err == nil {
				s.Close()
				t.Errorf("Open(%q): no error", tc.dsn)
			}
		})
	}
}

func TestSplitSQL(t *testing.T) {
	got := splitSQL("-- comment\nCREATE TABLE a (x INT);\nCREATE INDEX i\n ON a (x);\n\n")
	want := []string{"CREATE TABLE a (x INT)", "CREATE INDEX i\n ON a (x)"}
	if !slices.Equal(got, want) {
		t.Errorf("splitSQL = %q, want %q", got, want)
	}
}

func TestRebind(t *testing.T) {
	s := &core{d: dialectPostgres}
	if got := s.q("a = ? AND b IN (?,?)"); got != "a = $1 AND b IN ($2,$3)" {
		t.Errorf("q = %q", got)
	}
}

// benchTimer creates a timer and returns runs generator for it.
func benchSetup(b *testing.B, s *Store) *model.Timer {
	tm := storetest.NewTimer("bench", "b"+randomHex(4))
	if _, err := s.SaveTimer(b.Context(), store.TimerWrite{Timer: tm, Create: true}); err != nil {
		b.Fatal(err)
	}
	return tm
}

func benchRuns(tm *model.Timer, i, n int) []*model.Run {
	start := time.Unix(0, 0).Add(time.Duration(i*n) * time.Second)
	return storetest.NewRuns(tm.ID, start, time.Second, n)
}

// forBackends runs fn on each backend with a file, and on SQLite with
// synchronous=NORMAL too (the default is FULL), to show what syncing each
// commit costs.
func forBackends(b *testing.B, fn func(b *testing.B, s *Store)) {
	for _, be := range backends {
		if be.name == "sqlite-memory" {
			continue
		}
		b.Run(be.name, func(b *testing.B) { fn(b, be.open(b)) })
		if be.name == "sqlite" {
			b.Run("sqlite-normal", func(b *testing.B) {
				s, err := Open(b.Context(), "sqlite://"+filepath.Join(b.TempDir(), "chime.db"), Options{Synchronous: SynchronousNormal})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				fn(b, s)
			})
		}
	}
}

// BenchmarkInsertRuns plans 1000 new runs per operation.
func BenchmarkInsertRuns(b *testing.B) {
	forBackends(b, func(b *testing.B, s *Store) {
		tm := benchSetup(b, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.InsertRuns(b.Context(), benchRuns(tm, i, 1000)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "runs/s")
	})
}

// BenchmarkClaimRuns claims 100 pending runs per operation.
func BenchmarkClaimRuns(b *testing.B) {
	forBackends(b, func(b *testing.B, s *Store) {
		tm := benchSetup(b, s)
		now := time.Now()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			runs := benchRuns(tm, i, 100)
			if _, err := s.InsertRuns(b.Context(), runs); err != nil {
				b.Fatal(err)
			}
			cs := make([]store.Claim, len(runs))
			for j, r := range runs {
				cs[j] = store.Claim{RunID: r.ID, Node: "bench", LeaseUntil: now.Add(time.Minute), Now: now}
			}
			b.StartTimer()
			got, err := s.ClaimRuns(b.Context(), cs)
			if err != nil || len(got) != len(runs) {
				b.Fatalf("claimed %d of %d: %v", len(got), len(runs), err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "runs/s")
	})
}

// BenchmarkFinishRuns records 100 results per operation.
func BenchmarkFinishRuns(b *testing.B) {
	forBackends(b, func(b *testing.B, s *Store) {
		tm := benchSetup(b, s)
		now := time.Now()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			runs := benchRuns(tm, i, 100)
			if _, err := s.InsertRuns(b.Context(), runs); err != nil {
				b.Fatal(err)
			}
			cs := make([]store.Claim, len(runs))
			rs := make([]model.Result, len(runs))
			for j, r := range runs {
				cs[j] = store.Claim{RunID: r.ID, Node: "bench", LeaseUntil: now.Add(time.Minute), Now: now}
				rs[j] = model.Result{RunID: r.ID, Node: "bench", Attempt: 1, Status: model.RunSucceeded,
					StartedAt: now, FinishedAt: now.Add(time.Millisecond), Output: "ok"}
			}
			if _, err := s.ClaimRuns(b.Context(), cs); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ok, _, err := s.FinishRuns(b.Context(), rs)
			if err != nil || !ok[0] {
				b.Fatalf("finish: %v %v", ok[0], err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "runs/s")
	})
}

// BenchmarkExtendLeases extends the leases of 500 running runs per
// operation, as the lease keeper's chunk does.
func BenchmarkExtendLeases(b *testing.B) {
	forBackends(b, func(b *testing.B, s *Store) {
		tm := benchSetup(b, s)
		now := time.Now()
		runs := benchRuns(tm, 0, 500)
		if _, err := s.InsertRuns(b.Context(), runs); err != nil {
			b.Fatal(err)
		}
		cs := make([]store.Claim, len(runs))
		leases := make([]store.Lease, len(runs))
		for j, r := range runs {
			cs[j] = store.Claim{RunID: r.ID, Node: "bench", LeaseUntil: now.Add(time.Minute), Now: now}
			leases[j] = store.Lease{RunID: r.ID, Attempt: 1}
		}
		if _, err := s.ClaimRuns(b.Context(), cs); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			lost, err := s.ExtendLeases(b.Context(), "bench", leases, now.Add(time.Minute+time.Duration(i)*time.Millisecond))
			if err != nil || len(lost) > 0 {
				b.Fatalf("extend: %d lost, %v", len(lost), err)
			}
		}
		b.ReportMetric(float64(b.N*len(leases))/b.Elapsed().Seconds(), "leases/s")
	})
}

// BenchmarkFirePath measures what the store writes per fire, 500 fires of
// 500 timers per operation (one second of a 500 fires/s workload), for
// three shapes of the path:
//
//   - planned: the path today, a pending run inserted by planning, claimed,
//     then its result recorded (three row writes);
//   - claimed-insert: the run inserted already running, as the slice owner
//     would by claim by insert, then its result (two);
//   - one-write: the run inserted with its result, the shape of a fire
//     that costs one write (here as skipped rows with a reason and an
//     error, which InsertRuns takes).
//
// It is the store's part of issue 14's "claim by insert" and "a fire costs
// one write" directions, measured before either is built (docs/performance.md).
func BenchmarkFirePath(b *testing.B) {
	const fires = 500
	forBackends(b, func(b *testing.B, s *Store) {
		timers := make([]*model.Timer, fires)
		for i := range timers {
			timers[i] = benchSetup(b, s)
		}
		now := time.Now()
		next := int64(1_000_000) // each operation its own second, across b.N rounds
		second := func(status model.RunStatus) []*model.Run {
			next++
			at := time.Unix(next, 0)
			rs := make([]*model.Run, fires)
			for j, tm := range timers {
				rs[j] = &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at, Status: status, CreatedAt: now}
				if status == model.RunSkipped {
					rs[j].Reason, rs[j].Error, rs[j].FinishedAt = "overlap", "ok", &now
				}
			}
			return rs
		}
		results := func(rs []*model.Run) []model.Result {
			out := make([]model.Result, len(rs))
			for j, r := range rs {
				out[j] = model.Result{RunID: r.ID, Node: "bench", Attempt: 1, Status: model.RunSucceeded,
					StartedAt: now, FinishedAt: now.Add(time.Millisecond), Output: "ok"}
			}
			return out
		}
		b.Run("planned", func(b *testing.B) {
			var insert, claim, finish time.Duration
			for i := 0; i < b.N; i++ {
				rs := second(model.RunPending)
				t0 := time.Now()
				if _, err := s.InsertRuns(b.Context(), rs); err != nil {
					b.Fatal(err)
				}
				cs := make([]store.Claim, len(rs))
				for j, r := range rs {
					cs[j] = store.Claim{RunID: r.ID, Node: "bench", LeaseUntil: now.Add(time.Minute), Now: now}
				}
				t1 := time.Now()
				if got, err := s.ClaimRuns(b.Context(), cs); err != nil || len(got) != fires {
					b.Fatalf("claimed %d: %v", len(got), err)
				}
				t2 := time.Now()
				if _, _, err := s.FinishRuns(b.Context(), results(rs)); err != nil {
					b.Fatal(err)
				}
				insert, claim, finish = insert+t1.Sub(t0), claim+t2.Sub(t1), finish+time.Since(t2)
			}
			b.ReportMetric(float64(b.N*fires)/b.Elapsed().Seconds(), "fires/s")
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*fires) / 1000 }
			b.ReportMetric(per(insert), "insert-µs/fire")
			b.ReportMetric(per(claim), "claim-µs/fire")
			b.ReportMetric(per(finish), "finish-µs/fire")
		})
		b.Run("claimed-insert", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rs := second(model.RunPending)
				err := s.tx(b.Context(), func(tx *wtx) error {
					for c := 0; c < len(rs); c += batchSize {
						part := rs[c:min(len(rs), c+batchSize)]
						var q strings.Builder
						q.WriteString(`INSERT INTO runs (id, timer_id, timer_hash, scheduled_at, due_at, status, attempt, node, lease_until, started_at, created_at, output, error) VALUES `)
						args := make([]any, 0, 10*len(part))
						for j, r := range part {
							if j > 0 {
								q.WriteByte(',')
							}
							q.WriteString(`(?,?,?,?,?,'running',1,?,?,?,?,'','')`)
							args = append(args, r.ID, r.TimerID, int64(model.TimerHash(r.TimerID)), nanos(r.ScheduledAt), nanos(r.DueAt),
								"bench", nanos(now.Add(time.Minute)), nanos(now), nanos(now))
						}
						if _, err := tx.ExecContext(b.Context(), s.q(q.String()), args...); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.FinishRuns(b.Context(), results(rs)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*fires)/b.Elapsed().Seconds(), "fires/s")
		})
		b.Run("one-write", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := s.InsertRuns(b.Context(), second(model.RunSkipped)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*fires)/b.Elapsed().Seconds(), "fires/s")
		})
	})
}

// TestSQLiteSynchronous: FULL unless asked otherwise, on the writer and the
// readers; a DSN pragma wins over the option; a bad value fails Open.
func TestSQLiteSynchronous(t *testing.T) {
	tests := []struct {
		name  string
		query string // DSN query
		opt   string
		want  int // PRAGMA synchronous: 0 off, 1 normal, 2 full
	}{
		{"default", "", "", 2},
		{"full", "", SynchronousFull, 2},
		{"normal", "", SynchronousNormal, 1},
		{"upper case", "", "NORMAL", 1},
		{"dsn wins over the option", "?_pragma=synchronous(OFF)", SynchronousFull, 0},
		{"dsn normal", "?_pragma=synchronous(NORMAL)", "", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := "sqlite://" + filepath.Join(t.TempDir(), "sync.db") + tc.query
			s, err := Open(t.Context(), dsn, Options{Synchronous: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for name, db := range map[string]interface {
				QueryRow(string, ...any) *sql.Row
			}{"writer": s.w, "reader": s.r} {
				var got int
				if err := db.QueryRow(`PRAGMA synchronous`).Scan(&got); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got != tc.want {
					t.Errorf("%s: synchronous = %d, want %d", name, got, tc.want)
				}
			}
		})
	}
	t.Run("bad value", func(t *testing.T) {
		t.Parallel()
		s, err := Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "sync.db"), Options{Synchronous: "off"})
		if err == nil {
			s.Close()
			t.Fatal("Open with synchronous off: no error")
		}
		if !strings.Contains(err.Error(), "synchronous") {
			t.Errorf("error %q does not name the setting", err)
		}
	})
}

// TestFinishRunsDataError: a schema that rejects some values (as MySQL's
// error column did at 64 KiB before migration 0003, or a constraint)
// fails the batch statement; every other result of the batch is recorded
// all the same, a rejected result is recorded with a note instead of its
// text, or with no text when the note is rejected too, and fences hold.
func TestFinishRunsDataError(t *testing.T) {
	// The schema rejects: output "poison"; an error over 1,000 bytes (over
	// 65,535 on MySQL: TEXT); a note on a run started at 42 ns.
	ddl := map[dialect][]string{
		dialectSQLite: {`CREATE TRIGGER poison BEFORE UPDATE ON runs WHEN NEW.output = 'poison' OR length(NEW.error) > 1000
			OR (NEW.started_at = 42 AND NEW.error LIKE 'chime:%') BEGIN SELECT RAISE(ABORT, 'rejected by the test'); END`},
		dialectMySQL: {`ALTER TABLE runs MODIFY error TEXT NOT NULL`,
			`ALTER TABLE runs ADD CONSTRAINT poison CHECK (output <> 'poison' AND NOT (started_at = 42 AND error LIKE 'chime:%'))`},
		dialectPostgres: {`ALTER TABLE runs ALTER COLUMN error TYPE varchar(1000)`,
			`ALTER TABLE runs ADD CONSTRAINT poison CHECK (output <> 'poison' AND NOT (started_at = 42 AND error LIKE 'chime:%'))`},
	}
	const note = "chime: the database rejected"
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			s := be.open(t)
			ctx := t.Context()
			tm := storetest.NewTimer("app", "poison")
			if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
				t.Fatal(err)
			}
			base := time.Unix(1_900_000_000, 0)
			runs := storetest.NewRuns(tm.ID, base, time.Second, 10)
			if _, err := s.InsertRuns(ctx, runs); err != nil {
				t.Fatal(err)
			}
			var cs []store.Claim
			for _, r := range runs {
				cs = append(cs, store.Claim{RunID: r.ID, Node: "n1", LeaseUntil: base.Add(time.Minute), Now: base})
			}
			if _, err := s.ClaimRuns(ctx, cs); err != nil {
				t.Fatal(err)
			}
			for _, q := range ddl[s.d] {
				if _, err := s.w.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			long := strings.Repeat("x", 70<<10)
			tests := []struct {
				name    string
				mod     func(r *model.Result)
				ok      bool
				status  model.RunStatus
				output  string
				errText string // "note": starts with the note
			}{
				{"ordinary", func(r *model.Result) { r.Output = "ok" }, true, model.RunSucceeded, "ok", ""},
				{"rejected output", func(r *model.Result) { r.Output, r.Error = "poison", "exit 1" }, true, model.RunSucceeded, "", "note"},
				{"rejected error", func(r *model.Result) { r.Status, r.Error = model.RunFailed, long }, true, model.RunFailed, "", "note"},
				{"ordinary between", func(r *model.Result) { r.Output, r.Error = "fine", "a warning" }, true, model.RunSucceeded, "fine", "a warning"},
				{"rejected note too", func(r *model.Result) { r.Output, r.StartedAt = "poison", time.Unix(0, 42) }, true, model.RunSucceeded, "", ""},
				{"rejected, fence lost", func(r *model.Result) { r.Output, r.Node = "poison", "n2" }, false, model.RunRunning, "", ""},
				{"rejected retry", func(r *model.Result) {
					r.Status, r.Output, r.RetryAt = model.RunFailed, "poison", base.Add(time.Hour)
				}, true, model.RunPending, "", "note"},
				{"ordinary after", func(r *model.Result) { r.Output = "ok" }, true, model.RunSucceeded, "ok", ""},
			}
			rs := make([]model.Result, len(tests))
			for i, tc := range tests {
				rs[i] = model.Result{RunID: runs[i].ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
					StartedAt: base, FinishedAt: base.Add(time.Second)}
				tc.mod(&rs[i])
			}
			ok, _, err := s.FinishRuns(ctx, rs)
			if err != nil {
				t.Fatalf("FinishRuns: %v", err)
			}
			check := func(name string, i int, wantOK, gotOK bool, status model.RunStatus, output, errText string) {
				t.Helper()
				r, err := s.GetRun(ctx, runs[i].ID)
				if err != nil {
					t.Fatal(err)
				}
				errOK := r.Error == errText
				if errText == "note" {
					errOK = strings.HasPrefix(r.Error, note) && len(r.Error) <= maxNote
				}
				if gotOK != wantOK || r.Status != status || r.Output != output || !errOK {
					t.Errorf("%s: ok %v, status %s, output %q, error %q; want ok %v, %s, %q, %q",
						name, gotOK, r.Status, r.Output, r.Error, wantOK, status, output, errText)
				}
			}
			for i, tc := range tests {
				check(tc.name, i, tc.ok, ok[i], tc.status, tc.output, tc.errText)
			}
			// FinishRun falls back the same way.
			i := len(tests)
			err = storetest.Finish(ctx, s, model.Result{RunID: runs[i].ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
				StartedAt: base, FinishedAt: base, Output: "poison", Error: long})
			check("FinishRun", i, true, err == nil, model.RunFailed, "", "note")
			if err != nil {
				t.Errorf("FinishRun: %v", err)
			}
		})
	}
}

func TestCleanText(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"clean", "héllo", 10, "héllo"},
		{"empty", "", 10, ""},
		{"nul", "a\x00b", 10, "ab"},
		{"invalid", "a\xffb", 10, "a\uFFFDb"},
		{"invalid run", "a\xff\xfe\xfdb", 10, "a\uFFFDb"},
		{"truncated sequence", "ab\xe2\x82", 10, "ab\uFFFD"},
		{"cut at a rune boundary", "aé", 2, "a"},
		{"cut exactly after a rune", "aéb", 3, "aé"},
		{"cut in a four-byte rune", "a🎉", 4, "a"},
		{"cut after repair", "\xff\xff", 3, "\uFFFD"},
		{"cut to zero", "é", 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cleanText(tc.in, tc.max)
			if got != tc.want {
				t.Errorf("cleanText(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
			if len(got) > tc.max || !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
				t.Errorf("cleanText(%q, %d) = %q: not storable", tc.in, tc.max, got)
			}
		})
	}
}

func TestBatchResults(t *testing.T) {
	mk := func(sizes ...int) []model.Result {
		rs := make([]model.Result, len(sizes))
		for i, n := range sizes {
			rs[i].Output = strings.Repeat("x", n)
		}
		return rs
	}
	many := make([]int, batchSize+3)
	tests := []struct {
		name string
		rs   []model.Result
		want []int // batch lengths
	}{
		{"small", mk(1, 2, 3), []int{3}},
		{"count", mk(many...), []int{batchSize, 3}},
		{"bytes", mk(maxBatchText/2, maxBatchText/2, 1, maxBatchText), []int{2, 1, 1}},
		{"one over the bound alone", mk(maxBatchText+1, 1), []int{1, 1}},
		{"none", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			err := batchResults(tc.rs, make([]bool, len(tc.rs)), func(rs []model.Result, ok []bool) error {
				if len(ok) != len(rs) {
					t.Errorf("batch of %d results, %d flags", len(rs), len(ok))
				}
				got = append(got, len(rs))
				return nil
			})
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("batches = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// BenchmarkHotVaryingBatches claims and records batches of varying sizes
// (as the trigger and the recorder make them under load: 1 to 500), one
// after the other, per backend: what the statement caches are worth.
func BenchmarkHotVaryingBatches(b *testing.B) {
	sizes := []int{37, 500, 1, 263, 412, 8, 150, 499, 77, 320}
	forBackends(b, func(b *testing.B, s *Store) {
		tm := benchSetup(b, s)
		now := time.Now()
		var total int
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n := sizes[i%len(sizes)]
			b.StopTimer()
			runs := benchRuns(tm, i, 500)[:n]
			if _, err := s.InsertRuns(b.Context(), runs); err != nil {
				b.Fatal(err)
			}
			cs := make([]store.Claim, n)
			rs := make([]model.Result, n)
			for j, r := range runs {
				cs[j] = store.Claim{RunID: r.ID, Node: "bench", LeaseUntil: now.Add(time.Minute), Now: now, DueBy: runs[n-1].DueAt}
				rs[j] = model.Result{RunID: r.ID, Node: "bench", Attempt: 1, Status: model.RunSucceeded,
					StartedAt: now, FinishedAt: now.Add(time.Millisecond), Output: "ok"}
			}
			b.StartTimer()
			if got, err := s.ClaimRuns(b.Context(), cs); err != nil || len(got) != n {
				b.Fatalf("claimed %d of %d: %v", len(got), n, err)
			}
			if ok, _, err := s.FinishRuns(b.Context(), rs); err != nil || !ok[0] {
				b.Fatalf("finish: %v", err)
			}
			total += n
		}
		b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "runs/s")
	})
}

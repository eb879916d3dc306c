package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestCombinedTransaction: claims and results that queue while a
// transaction holds the writer run together in the next one; a part that
// fails is rolled back alone and its caller alone gets the error; a caller
// that gives up while queued leaves the queue.
func TestCombinedTransaction(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			s := be.open(t)
			s.combineWrites = true // the machinery works on every dialect
			var mu sync.Mutex
			var sizes []int
			s.comb.size = func(n int) {
				mu.Lock()
				sizes = append(sizes, n)
				mu.Unlock()
			}
			ctx := t.Context()
			tm := storetest.NewTimer("app", "combine")
			if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			runs := storetest.NewRuns(tm.ID, now, time.Second, 30)
			if _, err := s.InsertRuns(ctx, runs); err != nil {
				t.Fatal(err)
			}
			claims := func(rs []*model.Run) []store.Claim {
				cs := make([]store.Claim, len(rs))
				for i, r := range rs {
					cs[i] = store.Claim{RunID: r.ID, Node: "n1", LeaseUntil: now.Add(time.Minute), Now: now}
				}
				return cs
			}
			// Runs 10-19 are running already, to be finished by a queued part.
			if got, err := s.ClaimRuns(ctx, claims(runs[10:20])); err != nil || len(got) != 10 {
				t.Fatalf("claim: %d, %v", len(got), err)
			}

			// The first transaction holds the writer until released.
			release := make(chan struct{})
			entered := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				err := s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
					close(entered)
					<-release
					return nil
				})
				if err != nil {
					t.Errorf("first transaction: %v", err)
				}
			})
			<-entered
			var claimed []store.ClaimedRun
			var claimErr, badErr, finishErr error
			var ok []bool
			wg.Go(func() { claimed, claimErr = s.ClaimRuns(ctx, claims(runs[:10])) })
			// A part that writes, then fails: its write is rolled back.
			boom := errors.New("boom")
			wg.Go(func() {
				badErr = s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
					if _, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET output = 'bad' WHERE id = ?`), runs[20].ID); err != nil {
						return err
					}
					return boom
				})
			})
			wg.Go(func() {
				rs := make([]model.Result, 10)
				for i, r := range runs[10:20] {
					rs[i] = model.Result{RunID: r.ID, Node: "n1", Attempt: 1, Status: model.RunSucceeded,
						StartedAt: now, FinishedAt: now.Add(time.Millisecond), Output: "ok"}
				}
				ok, _, finishErr = s.FinishRuns(ctx, rs)
			})
			// A caller that gives up while queued.
			gone, cancel := context.WithCancel(ctx)
			goneErr := make(chan error, 1)
			go func() {
				goneErr <- s.hotTx(gone, func(ctx context.Context, tx *wtx) error {
					_, err := tx.ExecContext(ctx, s.q(`UPDATE runs SET output = 'gone' WHERE id = ?`), runs[21].ID)
					return err
				})
			}()
			queued := func(n int) func() (bool, string) {
				return func() (bool, string) {
					s.comb.mu.Lock()
					defer s.comb.mu.Unlock()
					return len(s.comb.queue) == n, fmt.Sprintf("%d queued, want %d", len(s.comb.queue), n)
				}
			}
			testenv.Eventually(t, 5*time.Second, "parts queued", queued(4))
			cancel()
			if err := <-goneErr; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled while queued: %v, want context.Canceled", err)
			}
			testenv.Eventually(t, 5*time.Second, "cancelled part left the queue", queued(3))
			close(release)
			wg.Wait()

			if claimErr != nil || len(claimed) != 10 {
				t.Errorf("queued claim: %d runs, %v; want 10", len(claimed), claimErr)
			}
			if finishErr != nil {
				t.Errorf("queued results: %v", finishErr)
			}
			for i, o := range ok {
				if !o {
					t.Errorf("result %d: fence did not hold", i)
				}
			}
			if !errors.Is(badErr, boom) {
				t.Errorf("failing part: %v, want boom", badErr)
			}
			for _, id := range []string{runs[20].ID, runs[21].ID} {
				r, err := s.GetRun(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if r.Output != "" || r.Status != model.RunPending {
					t.Errorf("run of a failed or cancelled part: status %s, output %q; want pending, no output", r.Status, r.Output)
				}
			}
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Runs[model.RunRunning] != 10 || st.Runs[model.RunSucceeded] != 10 {
				t.Errorf("stats = %v, want 10 running, 10 succeeded", st.Runs)
			}
			mu.Lock()
			defer mu.Unlock()
			// The first transaction (with the timer's save and the claim
			// of runs 10-19 before it, each alone), then the three queued
			// parts together.
			if len(sizes) != 4 || sizes[3] != 3 {
				t.Errorf("transaction sizes = %v, want [1 1 1 3]", sizes)
			}
		})
	}
}

// TestCombinedBrokenTransaction: when the combined transaction itself is
// lost (here: a part's statement closes it), every part is run again alone,
// and the parts that succeed alone are applied.
func TestCombinedBrokenTransaction(t *testing.T) {
	s := openSQLiteFile(t)
	ctx := t.Context()
	release := make(chan struct{})
	entered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
			close(entered)
			<-release
			return nil
		})
	})
	<-entered
	var errA, errB error
	// Part A: fine alone. Part B: ends the transaction it was given (as
	// a broken connection would), so that the savepoints fail.
	wg.Go(func() {
		errA = s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, addr, started_at, seen_at, slices) VALUES ('a', '', 0, 0, '')`)
			return err
		})
	})
	wg.Go(func() {
		errB = s.hotTx(ctx, func(ctx context.Context, tx *wtx) error {
			_, err := tx.ExecContext(ctx, `ROLLBACK`)
			if err == nil {
				err = errors.New("rolled back")
			}
			return err
		})
	})
	testenv.Eventually(t, 5*time.Second, "parts queued", func() (bool, string) {
		s.comb.mu.Lock()
		defer s.comb.mu.Unlock()
		return len(s.comb.queue) == 2, fmt.Sprint(len(s.comb.queue), " queued")
	})
	close(release)
	wg.Wait()
	if errA != nil {
		t.Errorf("part A: %v", errA)
	}
	if errB == nil {
		t.Errorf("part B: no error")
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM nodes WHERE id = 'a'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("part A applied %d times (%v), want once", n, err)
	}
}

// BenchmarkClaimFinishParallel: 8 callers at once, each claiming 100 runs
// and recording their results per operation, with the hot writes combined
// into shared transactions and without. It reports runs/s and the write
// transactions and statements per run.
func BenchmarkClaimFinishParallel(b *testing.B) {
	forBackends(b, func(b *testing.B, s *Store) {
		for _, combine := range []bool{false, true} {
			b.Run(fmt.Sprintf("combine=%v", combine), func(b *testing.B) {
				s.combineWrites = combine
				tm := benchSetup(b, s)
				runs := benchRuns(tm, 0, b.N*100)
				for i := 0; i < len(runs); i += 5000 {
					if _, err := s.InsertRuns(b.Context(), runs[i:min(len(runs), i+5000)]); err != nil {
						b.Fatal(err)
					}
				}
				now := time.Now()
				var next atomic.Int64
				txs0, stmts0 := s.Counts()
				b.SetParallelism(4)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(next.Add(1) - 1)
						batch := runs[i*100 : (i+1)*100]
						cs := make([]store.Claim, len(batch))
						rs := make([]model.Result, len(batch))
						for j, r := range batch {
							cs[j] = store.Claim{RunID: r.ID, Node: "bench", LeaseUntil: now.Add(time.Minute), Now: now}
							rs[j] = model.Result{RunID: r.ID, Node: "bench", Attempt: 1, Status: model.RunSucceeded,
								StartedAt: now, FinishedAt: now.Add(time.Millisecond), Output: "ok"}
						}
						got, err := s.ClaimRuns(b.Context(), cs)
						if err != nil || len(got) != len(batch) {
							b.Errorf("claimed %d of %d: %v", len(got), len(batch), err)
							return
						}
						if ok, _, err := s.FinishRuns(b.Context(), rs); err != nil || !ok[0] {
							b.Errorf("finish: %v", err)
							return
						}
					}
				})
				b.StopTimer()
				txs, stmts := s.Counts()
				n := float64(b.N * 100)
				b.ReportMetric(n/b.Elapsed().Seconds(), "runs/s")
				b.ReportMetric(float64(txs-txs0)/n, "tx/run")
				b.ReportMetric(float64(stmts-stmts0)/n, "stmts/run")
			})
		}
	})
}

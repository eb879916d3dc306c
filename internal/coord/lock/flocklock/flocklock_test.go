package flocklock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/coord/lock/flocklock"
	"github.com/chimehq/chime/internal/coord/lock/locktest"
)

func TestLocker(t *testing.T) {
	t.Parallel()
	locktest.RunLocker(t, func(t *testing.T) lock.Locker {
		l, err := flocklock.NewLocker(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestElector(t *testing.T) {
	t.Parallel()
	locktest.RunElector(t, func(t *testing.T) func() lock.Elector {
		dir := t.TempDir()
		return func() lock.Elector {
			e, err := flocklock.NewElector(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			return e
		}
	})
}

func TestLockersShareDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, _ := flocklock.NewLocker(dir)
	b, _ := flocklock.NewLocker(dir)
	if ok, err := a.TryLock(ctx, "slice:1/2", "a", time.Minute); !ok || err != nil {
		t.Fatalf("a.TryLock = %v, %v", ok, err)
	}
	if ok, err := b.TryLock(ctx, "slice:1/2", "b", time.Minute); ok || err != nil {
		t.Fatalf("b.TryLock of a's lock = %v, %v", ok, err)
	}
	if filepath.Dir(a.Path("slice:1/2")) != dir || filepath.Dir(a.Path("..")) != dir {
		t.Errorf("lock files escape the directory: %s, %s", a.Path("slice:1/2"), a.Path(".."))
	}
	if ok, err := a.Unlock(ctx, "slice:1/2", "a"); !ok || err != nil {
		t.Fatalf("Unlock = %v, %v", ok, err)
	}
	if _, err := os.Stat(a.Path("slice:1/2")); !os.IsNotExist(err) {
		t.Errorf("lock file after Unlock: %v", err)
	}
	if ok, err := b.TryLock(ctx, "slice:1/2", "b", time.Minute); !ok || err != nil {
		t.Fatalf("b.TryLock after Unlock = %v, %v", ok, err)
	}
}

func TestSweepDeletesExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := flocklock.NewLocker(t.TempDir())
	if ok, _ := l.TryLock(ctx, "short", "a", time.Millisecond); !ok {
		t.Fatal("TryLock failed")
	}
	if ok, _ := l.TryLock(ctx, "long", "a", time.Minute); !ok {
		t.Fatal("TryLock failed")
	}
	// TryLock may have started a background sweep too: wait for the
	// file to go, whichever sweep deletes it.
	testenv.Eventually(t, 5*time.Second, "the expired lock file to be swept", func() (bool, string) {
		l.Sweep()
		_, err := os.Stat(l.Path("short"))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	if ok, _ := l.TryLock(ctx, "long", "b", time.Minute); ok {
		t.Error("sweep released a live lock")
	}
}

func TestElectorCloseHandsOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, _ := flocklock.NewElector(dir)
	b, _ := flocklock.NewElector(dir)
	defer b.Close()
	if id, err := a.Select(ctx, "planner", "a", time.Hour); id != "a" || err != nil {
		t.Fatalf("a.Select = %q, %v", id, err)
	}
	if id, err := b.Select(ctx, "planner", "b", time.Hour); id != "a" || err != nil {
		t.Fatalf("b.Select = %q, %v", id, err)
	}
	a.Close()
	if id, err := b.Select(ctx, "planner", "b", time.Hour); id != "b" || err != nil {
		t.Fatalf("b.Select after a.Close = %q, %v; want b at once", id, err)
	}
}

// TestHelperLeader is not a test: TestElectorCrashedLeader runs the test
// binary with it as a separate leader process.
func TestHelperLeader(t *testing.T) {
	dir := os.Getenv("FLOCKLOCK_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	e, err := flocklock.NewElector(dir)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	id, err := e.Select(context.Background(), "planner", "child", time.Hour)
	fmt.Println(id, err)
	select {} // lead until killed
}

func TestElectorCrashedLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLeader$")
	cmd.Env = append(os.Environ(), "FLOCKLOCK_HELPER_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "child <nil>\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	e, _ := flocklock.NewElector(dir)
	defer e.Close()
	if id, err := e.Select(ctx, "planner", "parent", time.Hour); id != "child" || err != nil {
		t.Fatalf("Select while the child leads = %q, %v", id, err)
	}
	// SIGKILL: the kernel releases the child's flock, so the parent takes
	// over at once, an hour before the child's term ends.
	cmd.Process.Kill()
	cmd.Wait()
	if id, err := e.Select(ctx, "planner", "parent", time.Hour); id != "parent" || err != nil {
		t.Fatalf("Select after the leader was killed = %q, %v; want parent at once", id, err)
	}
}

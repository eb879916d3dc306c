package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// fleetTests are the tests of runs placed on nodes (store.Fleet): the
// handlers a node advertises, hand-offs, and fires split into shards.
var fleetTests = []test{
	{"Handlers", testNodeHandlers},
	{"Handoff", testHandoff},
	{"Untarget", testUntarget},
	{"SplitFire", testSplitFire},
	{"FailedShard", testFailedShard},
	{"FireEndsOnce", testFireEndsOnce},
	{"FiresNotStarved", testFiresNotStarved},
}

// testNodeHandlers: a heartbeat's handlers are listed back; a node that
// did not tell has none.
func testNodeHandlers(t *testing.T, s store.Store) {
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "h1", StartedAt: base, SeenAt: base, Handlers: []string{"a", "b"}}))
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "h2", StartedAt: base, SeenAt: base}))
	ns, err := s.ListNodes(ctx(t), base)
	must(t, err)
	if len(ns) != 2 || !slices.Equal(ns[0].Handlers, []string{"a", "b"}) || len(ns[1].Handlers) != 0 ||
		!ns[0].HasHandler("b") || ns[1].HasHandler("a") {
		t.Errorf("ListNodes = %+v", ns)
	}
	must(t, s.Heartbeat(ctx(t), model.Node{ID: "h1", StartedAt: base, SeenAt: base, Handlers: []string{}}))
	ns, err = s.ListNodes(ctx(t), base)
	must(t, err)
	if len(ns[0].Handlers) != 0 {
		t.Errorf("handlers after an empty heartbeat = %v", ns[0].Handlers)
	}
}

// testHandoff: a handed-off run is pending at its attempt before the claim
// and placed on its target, which alone may claim it and finds it with
// DirectedRuns; a requeue makes it anybody's again.
func testHandoff(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "handoff", 1)
	r := runs[0]
	now := base.Add(-time.Second)
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	must(t, s.Handoff(ctx(t), got[0].Run, "n2", r.DueAt))
	if err := s.Handoff(ctx(t), got[0].Run, "n2", r.DueAt); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("second handoff = %v, want ErrNotClaimed", err)
	}
	back := getRun(t, s, r.ID)
	if back.Status != model.RunPending || back.Attempt != 0 || back.TargetNode != "n2" {
		t.Errorf("handed-off run = %+v", back)
	}
	if got, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now)); err != nil || len(got) != 0 {
		t.Errorf("claim by another node than the target = %d, %v", len(got), err)
	}
	dir, err := s.DirectedRuns(ctx(t), "n2", r.DueAt.Add(time.Millisecond), 0)
	must(t, err)
	if len(dir) != 1 || dir[0].ID != r.ID {
		t.Errorf("DirectedRuns(n2) = %v", dir)
	}
	if dir, err := s.DirectedRuns(ctx(t), "n2", r.DueAt, 0); err != nil || len(dir) != 0 {
		t.Errorf("DirectedRuns before the due time = %v, %v", dir, err)
	}
	if dir, err := s.DirectedRuns(ctx(t), "n1", r.DueAt.Add(time.Hour), 0); err != nil || len(dir) != 0 {
		t.Errorf("DirectedRuns(n1) = %v, %v", dir, err)
	}
	got, err = s.ClaimRuns(ctx(t), claimsFor(runs, "n2", now))
	must(t, err)
	if len(got) != 1 || got[0].Run.Attempt != 1 || got[0].Run.Node != "n2" {
		t.Fatalf("claim by the target = %+v", got)
	}
	held := *got[0].Run
	held.LeaseUntil = nil
	must(t, s.Requeue(ctx(t), &held, now, now))
	if back := getRun(t, s, r.ID); back.TargetNode != "" || back.Status != model.RunPending {
		t.Errorf("requeued run = %+v, want pending and anybody's", back)
	}
}

// testUntarget: runs placed on a node that is not live are anybody's
// again; those on live nodes stay.
func testUntarget(t *testing.T, s store.Store) {
	_, runs := pendingRuns(t, s, "untarget", 2)
	now := base.Add(-time.Second)
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", now))
	must(t, err)
	for i, c := range got {
		target := "alive"
		if c.Run.ID == runs[1].ID {
			target = "gone"
		}
		_ = i
		must(t, s.Handoff(ctx(t), c.Run, target, c.Run.DueAt))
	}
	freed, err := s.UntargetRuns(ctx(t), []string{"alive", "n1"}, 0)
	must(t, err)
	if len(freed) != 1 || freed[0].ID != runs[1].ID || freed[0].TargetNode != "" {
		t.Errorf("UntargetRuns = %+v", freed)
	}
	if r := getRun(t, s, runs[0].ID); r.TargetNode != "alive" {
		t.Errorf("run on a live node: target %q", r.TargetNode)
	}
	if r := getRun(t, s, runs[1].ID); r.TargetNode != "" {
		t.Errorf("run on a gone node: target %q", r.TargetNode)
	}
}

// splitFire claims the first of n runs of a new timer on node and splits
// it into total shards placed on the nodes in turn.
func splitFire(t *testing.T, s store.Store, name string, total int, nodes ...string) (*model.Run, []*model.Run) {
	t.Helper()
	_, runs := pendingRuns(t, s, name, 1)
	got, err := s.ClaimRuns(ctx(t), claimsFor(runs, "n1", base.Add(-time.Second)))
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	fire := got[0].Run
	shards := make([]*model.Run, total)
	for i := range shards {
		shards[i] = &model.Run{Shard: &model.Shard{Index: i, Total: total}, DueAt: base, TargetNode: nodes[i%len(nodes)]}
	}
	must(t, s.StartFire(ctx(t), fire, shards))
	return fire, shards
}

// finishShard claims shard i on its node and records status.
func finishShard(t *testing.T, s store.Store, fire *model.Run, i int, node string, status model.RunStatus) {
	t.Helper()
	id := model.ShardRunID(fire.TimerID, fire.ScheduledAt, i)
	got, err := s.ClaimRuns(ctx(t), []store.Claim{{RunID: id, Node: node, LeaseUntil: base.Add(time.Minute), Now: base}})
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("claim of shard %d by %s: %d claimed", i, node, len(got))
	}
	ok, _, err := s.FinishRuns(ctx(t), []model.Result{{RunID: id, Node: node, Attempt: 1, Status: status, StartedAt: base, FinishedAt: base}})
	must(t, err)
	if !ok[0] {
		t.Fatalf("result of shard %d not recorded", i)
	}
}

// testSplitFire: StartFire is fenced, inserts the shards once each (at the
// fire's instant, with their index, total and node) and leaves the fire
// running without a lease, no node's to give back; FinishFires ends it
// succeeded once every shard did.
func testSplitFire(t *testing.T, s store.Store) {
	fire, shards := splitFire(t, s, "split", 3, "a", "b", "c")
	stale := *fire
	stale.Attempt = 7
	if err := s.StartFire(ctx(t), &stale, shards); !errors.Is(err, model.ErrNotClaimed) {
		t.Errorf("StartFire with a stale attempt = %v, want ErrNotClaimed", err)
	}
	must(t, s.StartFire(ctx(t), fire, shards)) // again: nothing doubles
	got, err := s.FireShards(ctx(t), fire.ID)
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("FireShards = %d runs, want 3", len(got))
	}
	for i, sh := range got {
		if sh.Shard == nil || sh.Shard.Index != i || sh.Shard.Total != 3 || sh.FireID != fire.ID ||
			!sh.ScheduledAt.Equal(fire.ScheduledAt) || sh.TargetNode != []string{"a", "b", "c"}[i] ||
			sh.ID != model.ShardRunID(fire.TimerID, fire.ScheduledAt, i) || sh.Status != model.RunPending {
			t.Errorf("shard %d = %+v", i, sh)
		}
	}
	f := getRun(t, s, fire.ID)
	if f.Status != model.RunRunning || f.LeaseUntil != nil || f.FireID != fire.ID || !f.IsFire() || f.Shard != nil {
		t.Errorf("split fire = %+v", f)
	}
	if on, err := s.RunningOn(ctx(t), "n1", 0); err != nil || len(on) != 0 {
		t.Errorf("RunningOn(the node that split the fire) = %v, %v", on, err)
	}
	if exp, err := s.ExpiredLeases(ctx(t), time.Time{}, base.Add(time.Hour), 0); err != nil || len(exp) != 0 {
		t.Errorf("ExpiredLeases = %v, %v", exp, err)
	}
	// The list of the timer's runs pages through the fire and its shards.
	var seen []string
	cursor := ""
	for {
		page, next, err := s.ListRuns(ctx(t), store.RunFilter{TimerID: fire.TimerID, Limit: 1, Before: cursor})
		must(t, err)
		seen = append(seen, ids(page)...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 4 {
		t.Errorf("paged list of the timer's runs = %v, want the fire and 3 shards", seen)
	}
	finishShard(t, s, fire, 0, "a", model.RunSucceeded)
	finishShard(t, s, fire, 1, "b", model.RunSucceeded)
	done, _, err := s.FinishFires(ctx(t), base.Add(time.Second), 0)
	must(t, err)
	if len(done) != 0 {
		t.Errorf("FinishFires with a shard pending = %v", done)
	}
	finishShard(t, s, fire, 2, "c", model.RunSucceeded)
	done, _, err = s.FinishFires(ctx(t), base.Add(time.Second), 0)
	must(t, err)
	if !slices.Equal(done, []string{fire.ID}) {
		t.Errorf("FinishFires = %v, want the fire", done)
	}
	if f := getRun(t, s, fire.ID); f.Status != model.RunSucceeded || f.FinishedAt == nil {
		t.Errorf("finished fire = %+v", f)
	}
	if done, _, err := s.FinishFires(ctx(t), base.Add(time.Second), 0); err != nil || len(done) != 0 {
		t.Errorf("FinishFires again = %v, %v", done, err)
	}
}

// testFailedShard: a fire with a shard that failed ends failed, saying so.
func testFailedShard(t *testing.T, s store.Store) {
	fire, _ := splitFire(t, s, "failshard", 2, "a")
	finishShard(t, s, fire, 0, "a", model.RunSucceeded)
	finishShard(t, s, fire, 1, "a", model.RunFailed)
	done, _, err := s.FinishFires(ctx(t), base.Add(time.Second), 0)
	must(t, err)
	if len(done) != 1 {
		t.Fatalf("FinishFires = %v", done)
	}
	if f := getRun(t, s, fire.ID); f.Status != model.RunFailed || f.Error == "" {
		t.Errorf("fire with a failed shard = %+v", f)
	}
}

// testFireEndsOnce: the shards' ends make no downstream run and no notify
// event, even from results that name their timer and ask for one; the
// fire's end (FinishFires) makes one of each.
func testFireEndsOnce(t *testing.T, s store.Store) {
	fire, _ := splitFire(t, s, "fireonce", 3, "a", "b", "c")
	down := depTimer(t, s, "fireonce-down", model.Dependency{Timer: fire.TimerID, On: model.OnSuccess})
	for i, node := range []string{"a", "b", "c"} {
		id := model.ShardRunID(fire.TimerID, fire.ScheduledAt, i)
		got, err := s.ClaimRuns(ctx(t), []store.Claim{{RunID: id, Node: node, LeaseUntil: base.Add(time.Minute), Now: base}})
		must(t, err)
		if len(got) != 1 {
			t.Fatalf("claim of shard %d: %d claimed", i, len(got))
		}
		res := resultOf(got[0].Run, node, model.RunSucceeded)
		res.Notify = true
		ok, _, err := s.FinishRuns(ctx(t), []model.Result{res})
		must(t, err)
		if !ok[0] {
			t.Fatalf("result of shard %d not recorded", i)
		}
	}
	if runs := runsOf(t, s, down.ID); len(runs) != 0 {
		t.Errorf("downstream runs after the shards ended = %d, want none before the fire's end", len(runs))
	}
	evs, err := s.ClaimNotifyEvents(ctx(t), base.Add(time.Hour), base.Add(2*time.Hour), 10)
	must(t, err)
	if len(evs) != 0 {
		t.Errorf("notify events after the shards ended = %+v, want none", evs)
	}
	done, made, err := s.FinishFires(ctx(t), base.Add(time.Second), 0)
	must(t, err)
	if len(done) != 1 {
		t.Fatalf("FinishFires = %v, want the fire", done)
	}
	if len(made) != 1 || made[0].TimerID != down.ID || made[0].UpstreamRunID != fire.ID {
		t.Errorf("FinishFires made %+v, want one run of the downstream timer, of the fire", made)
	}
	if runs := runsOf(t, s, down.ID); len(runs) != 1 || runs[0].UpstreamRunID != fire.ID {
		t.Errorf("downstream runs after the fire ended = %+v, want one, of the fire", runs)
	}
	evs, err = s.ClaimNotifyEvents(ctx(t), base.Add(time.Hour), base.Add(2*time.Hour), 10)
	must(t, err)
	if len(evs) != 1 || evs[0].RunID != fire.ID || evs[0].Status != model.RunSucceeded || evs[0].TimerID != fire.TimerID {
		t.Errorf("notify events after the fire ended = %+v, want the fire's", evs)
	}
	if done, made, err := s.FinishFires(ctx(t), base.Add(2*time.Second), 0); err != nil || len(done) != 0 || len(made) != 0 {
		t.Errorf("FinishFires again = %v, made %v, %v", done, made, err)
	}
	if runs := runsOf(t, s, down.ID); len(runs) != 1 {
		t.Errorf("downstream runs after FinishFires again = %d, want 1", len(runs))
	}
}

// testFiresNotStarved: fires that wait for ever (a shard never ends) do
// not keep FinishFires from the fires after them, whatever its limit.
func testFiresNotStarved(t *testing.T, s store.Store) {
	var fires []*model.Run
	for i := range 4 {
		f, _ := splitFire(t, s, fmt.Sprintf("starve%d", i), 1, "a")
		fires = append(fires, f)
	}
	slices.SortFunc(fires, func(a, b *model.Run) int { return strings.Compare(a.ID, b.ID) })
	last := fires[len(fires)-1]
	finishShard(t, s, last, 0, "a", model.RunSucceeded)
	for range 4 {
		done, _, err := s.FinishFires(ctx(t), base.Add(time.Second), 2)
		must(t, err)
		if slices.Contains(done, last.ID) {
			return
		}
	}
	t.Errorf("the fire whose shards ended was not finished in 4 calls of limit 2, behind 3 waiting fires")
}

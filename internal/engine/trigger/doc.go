// Package trigger dispatches the runs of the slices this node holds, each at
// its instant. It keeps the due runs of its slices in memory, with one timer
// for the next claim and one for each instant of claimed runs (arming.go),
// instead of polling once a second:
// a run is claimed a little ahead of its instant (ClaimAhead) and its action
// is started at the instant itself, so that fires land within a millisecond
// or two of their schedule.
//
// Runs reach the heap three ways: reads of the store when a slice is taken
// and every few seconds after (the index is only a cache), a poll of the
// slice index every Poll for runs that other nodes planned, and Notify for
// runs planned or retried on this node.
//
// Where to start reading: trigger.go (Config, New, Start and Stop). A
// Trigger is a thin owner of two parts, each with one job:
//
//   - holder keeps the slices held and the runs queued for them, learnt
//     from the store, the index and Notify, each once;
//   - dispatcher takes the queued runs as their claims come due, claims
//     them in batches under backpressure, and starts the runs won at
//     their instants.
//
// One file per seam:
//
//   - trigger.go: Config, Trigger, its lifecycle and exported methods;
//   - slices.go: the holder, the slices held (Take, Drop, Notify), the
//     runs seen, and the queue's hand-over to the dispatcher;
//   - heap.go: the heaps of queued runs (earliest instant first, and
//     ready to claim by priority) and the timers' priorities;
//   - polling.go: the index polls and the end of a slice (OnDone);
//   - rechecks.go: the reads of the store, on Take and every few seconds;
//   - dispatch.go: the dispatcher and its loop, which claims runs in
//     batches, ahead of their instants, under backpressure;
//   - arming.go: the timers that start claimed runs at their instants, and
//     the runs given back at Stop;
//   - defaults.go: the exported defaults (DefaultClaimAhead, RetryClaim).
package trigger

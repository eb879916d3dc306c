// Package trigger dispatches the runs of the slices this node holds, each at
// its instant. It keeps the due runs of its slices in one in-memory heap and
// a single timer armed for the earliest, instead of polling once a second:
// a run is claimed a little ahead of its instant (ClaimAhead) and its action
// is started at the instant itself, so that fires land within a millisecond
// or two of their schedule.
//
// Runs reach the heap three ways: reads of the store when a slice is taken
// and every few seconds after (the index is only a cache), a poll of the
// slice index every Poll for runs that other nodes planned, and Notify for
// runs planned or retried on this node.
//
// Where to start reading: trigger.go (Config, New, Start and Stop), then
// one file per seam —
//
//   - slices.go: the slices held (Take, Drop, Notify) and the runs seen;
//   - heap.go: the heap of queued runs, earliest instant first;
//   - polling.go: the index polls and the end of a slice (OnDone);
//   - rechecks.go: the reads of the store, on Take and every few seconds;
//   - dispatch.go: the dispatch loop, which claims runs in batches, ahead
//     of their instants, under backpressure;
//   - arming.go: the timers that start claimed runs at their instants.
package trigger

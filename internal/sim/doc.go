// Package sim is chime's deterministic simulation: several nodes of the
// real engine in one process, on simulated time, sharing one store, one
// slice index and one lock server behind injected faults, under a workload
// drawn from a seed; after every simulated hour it checks the delivery
// invariants (check.go) against a log of every execution of every action.
//
// See TestSimulation for how it is run and replayed.
package sim

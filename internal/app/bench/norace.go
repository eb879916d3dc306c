//go:build !race

package bench

// raceEnabled reports whether the race detector is on; timings are then
// several times worse and the smoke test checks only correctness.
const raceEnabled = false

package bench

import (
	"slices"
)

// Percentiles and units of the figures.

// delays summarises durations in nanoseconds.
func delays(ns []int64) Delays {
	if len(ns) == 0 {
		return Delays{}
	}
	slices.Sort(ns)
	return Delays{Count: len(ns), P50: ms(pct(ns, 0.50)), P90: ms(pct(ns, 0.90)),
		P99: ms(pct(ns, 0.99)), Max: ms(ns[len(ns)-1])}
}

// pct is the nearest-rank percentile of sorted values.
func pct(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

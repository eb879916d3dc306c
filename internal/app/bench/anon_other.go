//go:build !linux

package bench

// anonRSS is not measured outside Linux.
func anonRSS() int64 { return 0 }

//go:build !unix

package bench

import "time"

func cpuTime() time.Duration { return 0 }
func maxRSS() int64          { return 0 }

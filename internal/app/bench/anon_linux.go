package bench

import (
	"bytes"
	"os"
	"strconv"
)

// anonRSS returns the resident memory of this process that no file backs
// (RssAnon in /proc/self/status), in bytes; 0 if it cannot be read. Unlike
// the RSS, it leaves out the pages of the SQLite file mapped in memory,
// which are the kernel's page cache.
func anonRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("RssAnon:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // "123456 kB"
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

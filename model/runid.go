package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"time"
)

// RunID returns the id of the run of timerID at the nominal instant at. It is
// derived, not random, so that every node that plans the same fire computes
// the same id: planning is idempotent across nodes, and the slice index holds
// one member per fire however many nodes add it. Receivers dedupe on it.
//
// The id is 32 hex digits: the instant's Unix second (8 digits, so that ids
// sort by second) and 24 digits of SHA-256 of (timer, instant). Ids that
// sort by time keep the runs due together next to each other in a store's
// primary key (SQLite's and InnoDB's tables are clustered on it): claiming
// and recording a second's runs then rewrites a few pages, not one page per
// run.
func RunID(timerID string, at time.Time) string {
	h := sha256.New()
	h.Write([]byte(timerID))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(at.UnixNano()))
	h.Write(b[:])
	var id [16]byte
	binary.BigEndian.PutUint32(id[:4], uint32(at.Unix()))
	copy(id[4:], h.Sum(nil))
	return hex.EncodeToString(id[:])
}

// TimerHash is the hash that spreads a timer's runs over the buckets of the
// slice index (index.BucketOf is TimerHash mod the bucket count). Stores
// keep it with each run so that a bucket's runs can be selected in SQL.
func TimerHash(timerID string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(timerID))
	return h.Sum32()
}

// JitterOffset returns the jitter of the fire of timerID at the nominal
// instant at, for a jitter window of jitter: a whole number of milliseconds
// in [0, jitter), taken from SHA-256 of (timer, instant), so that every node
// computes the same, the fires of one timer move by different amounts, and
// the timers of a herd that share an instant spread evenly over the window.
// It returns 0 when jitter is under a millisecond.
func JitterOffset(timerID string, at time.Time, jitter time.Duration) time.Duration {
	n := uint64(jitter / time.Millisecond)
	if jitter <= 0 || n == 0 {
		return 0
	}
	h := sha256.New()
	h.Write([]byte("jitter\x00"))
	h.Write([]byte(timerID))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(at.UnixNano()))
	h.Write(b[:])
	v := binary.BigEndian.Uint64(h.Sum(nil))
	return time.Duration(v%n) * time.Millisecond
}

// ShardRunID is the run id of shard index of the fire of timerID at at:
// the id RunID derives for the instant index+1 nanoseconds after at. A
// store keeps each shard's row under that instant (the runs of a timer
// are unique per instant) and gives back at; no schedule fires twice
// within a microsecond, so no fire of its own has such an instant.
func ShardRunID(timerID string, at time.Time, index int) string {
	return RunID(timerID, ShardInstant(at, index))
}

// ShardInstant is the instant under which a store keeps shard index of
// the fire at at (see ShardRunID).
func ShardInstant(at time.Time, index int) time.Time { return at.Add(time.Duration(index + 1)) }

// ParseRunID returns the 16 bytes that a run id of RunID's form (32
// lowercase hex digits) spells, and whether id is of that form. The bytes
// order as the ids do; hex.EncodeToString gives the id back. Those that
// hold many run ids (the slice index, the bench's fire logs) keep these 16
// bytes instead of the 32-byte string.
func ParseRunID(id string) (b [16]byte, ok bool) {
	if len(id) != 2*len(b) {
		return b, false
	}
	for i := range b {
		hi, lo := unhex(id[2*i]), unhex(id[2*i+1])
		if hi > 15 || lo > 15 {
			return [16]byte{}, false
		}
		b[i] = hi<<4 | lo
	}
	return b, true
}

// unhex returns the value of a lowercase hex digit, or 255.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

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
func RunID(timerID string, at time.Time) string {
	h := sha256.New()
	h.Write([]byte(timerID))
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], uint64(at.UnixNano()))
	h.Write(b[:])
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:16])
}

// TimerHash is the hash that spreads a timer's runs over the buckets of the
// slice index (index.BucketOf is TimerHash mod the bucket count). Stores
// keep it with each run so that a bucket's runs can be selected in SQL.
func TimerHash(timerID string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(timerID))
	return h.Sum32()
}

package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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

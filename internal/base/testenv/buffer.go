package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for a writer and a reader at once: a
// log sink that a test reads while the code under test writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

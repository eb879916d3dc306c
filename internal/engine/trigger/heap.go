package trigger

import (
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/model"
)

type item struct {
	entry index.Entry
	slice index.Slice
	st    *sliceState // the holding of the slice that queued the item
	// prio is the priority of the run's timer as the trigger knew it when
	// it queued the item (priorities.of).
	prio int8
}

// itemHeap is the runs waiting for their claim, earliest instant first.
type itemHeap []item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].entry.DueAt.Before(h[j].entry.DueAt) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	n := len(old) - 1
	it := old[n]
	old[n] = item{} // its strings are not held by the array
	*h = shrink(old[:n])
	return it
}

// readyHeap is the runs whose claim is due, waiting for the executor to
// take them (it is saturated, or a batch is full): higher priority first,
// then earlier instant, then run id.
type readyHeap []item

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio > h[j].prio
	}
	if c := h[i].entry.DueAt.Compare(h[j].entry.DueAt); c != 0 {
		return c < 0
	}
	return h[i].entry.RunID < h[j].entry.RunID
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(item)) }
func (h *readyHeap) Pop() any {
	old := *h
	n := len(old) - 1
	it := old[n]
	old[n] = item{}
	*h = shrink(old[:n])
	return it
}

// shrink returns s in an array half the size of its own once it fills
// less than a quarter of it: a heap that held a backlog (a catch-up at a
// start, 100,000s of runs of 88 bytes) does not keep its array for ever.
func shrink[T any](s []T) []T {
	if c := cap(s); c > 1024 && len(s) < c/4 {
		return append(make([]T, 0, c/2), s...)
	}
	return s
}

// priorities is the priorities of timers that are not
// model.DefaultPriority, as learnt from claims and SetPriority, by timer
// id; items are queued at their timer's (holder.mu guards it).
type priorities map[string]int8

// set records p as the priority of timerID's runs.
func (m priorities) set(timerID string, p int) {
	if p == model.DefaultPriority {
		delete(m, timerID)
		return
	}
	m[timerID] = int8(p)
}

// of returns the priority known for timerID's runs.
func (m priorities) of(timerID string) int8 {
	if p, ok := m[timerID]; ok {
		return p
	}
	return model.DefaultPriority
}

package trigger

import "github.com/chimehq/chime/index"

type item struct {
	entry index.Entry
	slice index.Slice
	st    *sliceState // the holding of the slice that queued the item
}

type itemHeap []item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].entry.DueAt.Before(h[j].entry.DueAt) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

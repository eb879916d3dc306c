package schedule

import (
	"sync"
	"sync/atomic"
	"time"
)

// A zoneTable lists the changes of a zone's UTC offset between tableStart
// and tableEnd, so that Next and Prev find the segment of an instant by a
// binary search instead of asking the time package, which re-reads the
// zone's TZ rule string on every lookup past its last listed transition.
type zoneTable struct {
	loc            *time.Location
	trans          []int64 // instants at which the offset changes
	offs           []int64 // offs[i] is in effect before trans[i]; len(trans)+1
	offMin, offMax int64   // bounds of the offsets at all times
}

var (
	tableStart = daysFromCivil(1800, 1, 1) * secondsPerDay
	tableEnd   = daysFromCivil(2200, 1, 1) * secondsPerDay
)

var (
	tableCache sync.Map // *time.Location -> *zoneTable
	tableCount atomic.Int64
)

// maxCachedTables bounds the cache, against callers that make a new
// *time.Location for every spec.
const maxCachedTables = 1024

// tableFor returns the zone table of loc, building it on first use.
func tableFor(loc *time.Location) *zoneTable {
	if v, ok := tableCache.Load(loc); ok {
		return v.(*zoneTable)
	}
	z := buildTable(loc)
	if tableCount.Load() < maxCachedTables {
		if _, loaded := tableCache.LoadOrStore(loc, z); !loaded {
			tableCount.Add(1)
		}
	}
	return z
}

func buildTable(loc *time.Location) *zoneTable {
	z := &zoneTable{loc: loc}
	off := int64(offsetAt(loc, tableStart))
	z.offs = append(z.offs, off)
	z.offMin, z.offMax = off, off
	for s := tableStart; s < tableEnd; {
		seg := liveSegment(loc, s)
		if seg.end >= tableEnd {
			break
		}
		if o := int64(offsetAt(loc, seg.end)); o != z.offs[len(z.offs)-1] {
			z.trans = append(z.trans, seg.end)
			z.offs = append(z.offs, o)
			z.offMin, z.offMax = min(z.offMin, o), max(z.offMax, o)
		}
		s = seg.end
	}
	// After tableEnd the zone's rule repeats every year.
	for s := tableEnd; s < tableEnd+2*366*secondsPerDay; {
		seg := liveSegment(loc, s)
		z.offMin, z.offMax = min(z.offMin, seg.off), max(z.offMax, seg.off)
		s = max(seg.end, s+1)
	}
	return z
}

// segmentAt returns the segment that contains instant s.
func (z *zoneTable) segmentAt(s int64) segment {
	if len(z.trans) == 0 {
		if z.loc == time.UTC {
			return segment{start: farPast, end: farFuture}
		}
		if s >= tableStart && s < tableEnd {
			// A fixed zone, at least between 1800 and 2200.
			return segment{start: tableStart, end: tableEnd, off: z.offs[0], prevOff: z.offs[0]}
		}
	}
	if s < tableStart || s >= tableEnd {
		return liveSegment(z.loc, s)
	}
	// Find the first transition after s.
	lo, hi := 0, len(z.trans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if z.trans[m] <= s {
			lo = m + 1
		} else {
			hi = m
		}
	}
	seg := segment{start: tableStart, end: tableEnd, off: z.offs[lo], prevOff: z.offs[lo]}
	if lo > 0 {
		seg.start, seg.prevOff = z.trans[lo-1], z.offs[lo-1]
	}
	if lo < len(z.trans) {
		seg.end = z.trans[lo]
	}
	return seg
}

// offsetBounds returns bounds of the UTC offsets of the zone at all times.
func (z *zoneTable) offsetBounds() (lo, hi int64) { return z.offMin, z.offMax }

// liveSegment returns the segment of loc that contains instant s, from
// time.Time.ZoneBounds.
func liveSegment(loc *time.Location, s int64) segment {
	if loc == time.UTC {
		return segment{start: farPast, end: farFuture}
	}
	t := time.Unix(s, 0).In(loc)
	_, o := t.Zone()
	off := int64(o)
	seg := segment{start: farPast, end: farFuture, off: off, prevOff: off}
	start, end := t.ZoneBounds()
	if !start.IsZero() {
		seg.start = start.Unix()
		seg.prevOff = int64(offsetAt(loc, seg.start-1))
	}
	if !end.IsZero() {
		seg.end = end.Unix()
	}
	if seg.start > s {
		seg.start, seg.prevOff = s, int64(offsetAt(loc, s-1))
	}
	if seg.end <= s {
		// ZoneBounds of a zone past its last listed transition is only
		// accurate near a transition, and otherwise the UTC year, which
		// it takes to be 365 days long; on December 31 of a leap year it
		// ends before s. Take the end of the UTC year and check it.
		y, _, _ := civilFromDays(floorDiv(s, secondsPerDay))
		seg.end = daysFromCivil(y+1, 1, 1) * secondsPerDay
		if int64(offsetAt(loc, seg.end-1)) != off {
			lo, hi := s, seg.end-1 // offset at lo is off, at hi is not
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if int64(offsetAt(loc, mid)) == off {
					lo = mid
				} else {
					hi = mid
				}
			}
			seg.end = hi
		}
	}
	return seg
}

func offsetAt(loc *time.Location, s int64) int {
	_, off := time.Unix(s, 0).In(loc).Zone()
	return off
}

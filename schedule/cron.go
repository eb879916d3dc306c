package schedule

import (
	"math"
	"time"
)

// cronSchedule is a parsed cron expression or calendar descriptor. Each
// field is a bit set of the values it matches.
type cronSchedule struct {
	spec string
	loc  *time.Location
	zone *zoneTable

	sec, min, hour uint64 // bits 0-59, 0-59, 0-23
	dom            uint64 // bits 1-31
	month          uint64 // bits 1-12
	dow            uint64 // bits 0-6, 0 is Sunday
	years          [3]uint64
	hasYears       bool
	firstYear      int
	lastYear       int

	lastOff     uint64    // bit n: day-of-month L-n (L is L-0)
	wdays       uint64    // bit n: day-of-month nW
	lastWeekday bool      // day-of-month LW
	dowLast     uint64    // bit w: day-of-week wL
	dowNth      [6]uint64 // dowNth[k] bit w: day-of-week w#k
	domExtra    bool      // any of lastOff, wdays, lastWeekday
	dowExtra    bool      // any of dowLast, dowNth

	domStar, dowStar bool // the field starts with * or ?
	fixed            bool // no * in second, minute and hour
	dst              DST  // a fixed-time schedule's choice in gaps and overlaps
}

// String returns the spec the schedule was parsed from.
func (c *cronSchedule) String() string { return c.spec }

// Bounds of the instants Next and Prev work on: years 1 to 9999.
const (
	minSec int64 = -62135596800
	maxSec int64 = 253402300799
)

// maxOffset bounds the UTC offset of any zone, in seconds.
const maxOffset = secondsPerDay

func (c *cronSchedule) yearOK(y int) bool {
	if !c.hasYears {
		return true
	}
	i := y - minYear
	return i >= 0 && i <= maxYear-minYear && c.years[i/64]&(1<<uint(i%64)) != 0
}

// dayOK reports whether the date y-m-d, day number z, matches the
// day-of-month and day-of-week fields (not the month and year fields).
func (c *cronSchedule) dayOK(y, m, d int, z int64) bool {
	wd := weekday(z)
	domHit := has(c.dom, d)
	if !domHit && c.domExtra {
		last := daysIn(y, m)
		if c.lastOff != 0 && has(c.lastOff, last-d) {
			domHit = true
		} else if c.lastWeekday && d == lastWeekdayOf(last, wd+last-d) {
			domHit = true
		} else if c.wdays != 0 {
			for n := nextBit(c.wdays, 1); n >= 0; n = nextBit(c.wdays, n+1) {
				if n <= last && d == nearestWeekday(n, last, (wd+n-d+35)%7) {
					domHit = true
					break
				}
			}
		}
	}
	if c.domStar || c.dowStar {
		if !domHit {
			return false
		}
	} else if domHit {
		return true
	}
	if has(c.dow, wd) {
		return true
	}
	if c.dowExtra {
		if has(c.dowLast, wd) && d+7 > daysIn(y, m) {
			return true
		}
		if k := (d-1)/7 + 1; k <= 5 && has(c.dowNth[k], wd) {
			return true
		}
	}
	return false
}

// lastWeekdayOf returns the last Monday-to-Friday day of a month of last
// days whose last day falls on weekday lastWD (which may exceed 6).
func lastWeekdayOf(last, lastWD int) int {
	switch lastWD % 7 {
	case 6:
		return last - 1
	case 0:
		return last - 2
	}
	return last
}

// nearestWeekday returns the Monday-to-Friday day nearest to day n, which
// falls on weekday wd, without leaving the month.
func nearestWeekday(n, last, wd int) int {
	switch wd {
	case 6: // Saturday: Friday before, or Monday after on the 1st
		if n == 1 {
			return 3
		}
		return n - 1
	case 0: // Sunday: Monday after, or Friday before on the last day
		if n == last {
			return n - 2
		}
		return n + 1
	}
	return n
}

// nextDay returns the first day number in [z, to) whose date matches the
// year, month and day fields.
func (c *cronSchedule) nextDay(z, to int64) (int64, bool) {
	y, m, d := civilFromDays(z)
	for z < to {
		if y > 9999 || (c.hasYears && y > c.lastYear) {
			return 0, false
		}
		if !c.yearOK(y) {
			y, m, d = y+1, 1, 1
			z = daysFromCivil(y, m, d)
			continue
		}
		if !has(c.month, m) {
			nm := nextBit(c.month, m+1)
			if nm < 0 || nm > 12 {
				y, m, d = y+1, 1, 1
			} else {
				m, d = nm, 1
			}
			z = daysFromCivil(y, m, d)
			continue
		}
		if c.dayOK(y, m, d, z) {
			return z, true
		}
		z++
		if d++; d > daysIn(y, m) {
			if d, m = 1, m+1; m > 12 {
				y, m = y+1, 1
			}
		}
	}
	return 0, false
}

// prevDay returns the last day number in (to, z] whose date matches the
// year, month and day fields.
func (c *cronSchedule) prevDay(z, to int64) (int64, bool) {
	y, m, d := civilFromDays(z)
	for z > to {
		if y < 0 || (c.hasYears && y < c.firstYear) {
			return 0, false
		}
		if !c.yearOK(y) {
			y, m = y-1, 12
			d = 31
			z = daysFromCivil(y, m, d)
			continue
		}
		if !has(c.month, m) {
			pm := prevBit(c.month, m-1)
			if pm < 1 {
				y, m = y-1, 12
			} else {
				m = pm
			}
			d = daysIn(y, m)
			z = daysFromCivil(y, m, d)
			continue
		}
		if c.dayOK(y, m, d, z) {
			return z, true
		}
		z--
		if d--; d < 1 {
			if m--; m < 1 {
				y, m = y-1, 12
			}
			d = daysIn(y, m)
		}
	}
	return 0, false
}

// nextTime returns the first second of the day at or after sod that matches
// the hour, minute and second fields.
func (c *cronSchedule) nextTime(sod int) (int, bool) {
	h, mi, s := sod/3600, sod/60%60, sod%60
	for {
		nh := nextBit(c.hour, h)
		if nh < 0 || nh > 23 {
			return 0, false
		}
		if nh != h {
			h, mi, s = nh, 0, 0
		}
		nm := nextBit(c.min, mi)
		if nm < 0 || nm > 59 {
			h, mi, s = h+1, 0, 0
			continue
		}
		if nm != mi {
			mi, s = nm, 0
		}
		ns := nextBit(c.sec, s)
		if ns < 0 || ns > 59 {
			mi, s = mi+1, 0
			continue
		}
		return h*3600 + mi*60 + ns, true
	}
}

// prevTime returns the last second of the day at or before sod that matches
// the hour, minute and second fields.
func (c *cronSchedule) prevTime(sod int) (int, bool) {
	h, mi, s := sod/3600, sod/60%60, sod%60
	for {
		ph := prevBit(c.hour, h)
		if ph < 0 {
			return 0, false
		}
		if ph != h {
			h, mi, s = ph, 59, 59
		}
		pm := prevBit(c.min, mi)
		if pm < 0 {
			h, mi, s = h-1, 59, 59
			continue
		}
		if pm != mi {
			mi, s = pm, 59
		}
		ps := prevBit(c.sec, s)
		if ps < 0 {
			mi, s = mi-1, 59
			if mi < 0 {
				h, mi = h-1, 59
			}
			continue
		}
		return h*3600 + mi*60 + ps, true
	}
}

// nextWall returns the first matching wall time in [from, to).
func (c *cronSchedule) nextWall(from, to int64) (int64, bool) {
	if from >= to {
		return 0, false
	}
	z := floorDiv(from, secondsPerDay)
	sod := int(from - z*secondsPerDay)
	endDay := floorDiv(to-1, secondsPerDay) + 1
	for {
		dz, ok := c.nextDay(z, endDay)
		if !ok {
			return 0, false
		}
		if dz != z {
			sod = 0
		}
		if t, ok := c.nextTime(sod); ok {
			w := dz*secondsPerDay + int64(t)
			if w >= to {
				return 0, false
			}
			return w, true
		}
		z, sod = dz+1, 0
	}
}

// prevWall returns the last matching wall time in [to, from].
func (c *cronSchedule) prevWall(from, to int64) (int64, bool) {
	if from < to {
		return 0, false
	}
	z := floorDiv(from, secondsPerDay)
	sod := int(from - z*secondsPerDay)
	endDay := floorDiv(to, secondsPerDay) - 1
	for {
		dz, ok := c.prevDay(z, endDay)
		if !ok {
			return 0, false
		}
		if dz != z {
			sod = secondsPerDay - 1
		}
		if t, ok := c.prevTime(sod); ok {
			w := dz*secondsPerDay + int64(t)
			if w < to {
				return 0, false
			}
			return w, true
		}
		z, sod = dz-1, secondsPerDay-1
	}
}

// A segment is a span [start, end) of instants (Unix seconds) over which the
// zone's UTC offset is constant; prevOff is the offset just before start.
type segment struct {
	start, end   int64
	off, prevOff int64
}

const (
	farPast   = math.MinInt64 / 4
	farFuture = math.MaxInt64 / 4
)

// Next returns the first fire instant strictly after after, or the zero
// Time if there is none.
func (c *cronSchedule) Next(after time.Time) time.Time {
	if after.Unix() >= maxSec {
		return time.Time{}
	}
	t0 := max(after.Unix()+1, minSec) // fires are on whole seconds
	for {
		// Skip ahead: every instant from t0 on has a wall time at or after
		// t0+offMin; none from t0+offMin up to w matches, and no instant
		// before w-offMax has a wall time at or after w (nor a shifted
		// fire of a gap's wall time, which comes at wall time - prevOff).
		offMin, offMax := c.zone.offsetBounds()
		w, ok := c.nextWall(t0+offMin, (maxSec+1)+maxOffset)
		if !ok {
			return time.Time{}
		}
		t0 = max(t0, w-offMax)
		seg := c.zone.segmentAt(t0)
		// A gap's wall times moved forward by its length (DSTShift) fire
		// at wall time - prevOff, in [start, start + off - prevOff).
		shifted, hasShifted := int64(0), false
		if c.fixed && seg.prevOff < seg.off {
			switch c.dst.gap() {
			case gapAfter:
				// Spring forward at t0: the wall times of the gap fire at t0.
				if seg.start == t0 {
					if _, ok := c.nextWall(seg.start+seg.prevOff, seg.start+seg.off); ok {
						return c.instant(t0)
					}
				}
			case gapShift:
				if ws, ok := c.nextWall(t0+seg.prevOff, seg.start+seg.off); ok {
					shifted, hasShifted = ws-seg.prevOff, true
				}
			}
		}
		lo := t0 + seg.off
		if c.fixed && seg.prevOff > seg.off && !c.dst.bothInOverlap() {
			// Fall back: the repeated wall times fired before start.
			lo = max(lo, seg.start+seg.prevOff)
		}
		hi := seg.end + seg.off
		reg, hasReg := int64(0), false
		if w >= lo { // w is also the first match at or after lo
			if w < hi {
				reg, hasReg = w-seg.off, true
			}
		} else if w, ok := c.nextWall(lo, hi); ok {
			reg, hasReg = w-seg.off, true
		}
		if hasShifted && (!hasReg || shifted < reg) {
			return c.instant(shifted)
		}
		if hasReg {
			return c.instant(reg)
		}
		if seg.end >= farFuture || seg.end > maxSec {
			return time.Time{}
		}
		t0 = seg.end
	}
}

// Prev returns the last fire instant strictly before before, or the zero
// Time if there is none.
func (c *cronSchedule) Prev(before time.Time) time.Time {
	t1 := before.Unix() // last candidate instant
	if before.Nanosecond() == 0 {
		t1--
	}
	if t1 < minSec {
		return time.Time{}
	}
	t1 = min(t1, maxSec)
	for {
		// Skip back, as Next skips ahead.
		offMin, offMax := c.zone.offsetBounds()
		w, ok := c.prevWall(t1+offMax, minSec-maxOffset)
		if !ok {
			return time.Time{}
		}
		t1 = min(t1, w-offMin)
		seg := c.zone.segmentAt(t1)
		lo := seg.start + seg.off
		if c.fixed && seg.prevOff > seg.off && !c.dst.bothInOverlap() {
			lo = seg.start + seg.prevOff
		}
		if seg.start <= farPast {
			lo = minSec - maxOffset
		}
		hi := t1 + seg.off
		reg, hasReg := int64(0), false
		if w <= hi { // w is also the last match at or before hi
			if w >= lo {
				reg, hasReg = w-seg.off, true
			}
		} else if w, ok := c.prevWall(hi, lo); ok {
			reg, hasReg = w-seg.off, true
		}
		gap := c.fixed && seg.prevOff < seg.off && seg.start > farPast
		if gap && c.dst.gap() == gapShift {
			// The last shifted fire of the gap's wall times at or before t1.
			if ws, ok := c.prevWall(min(seg.start+seg.off-1, t1+seg.prevOff), seg.start+seg.prevOff); ok {
				if s := ws - seg.prevOff; !hasReg || s > reg {
					reg, hasReg = s, true
				}
			}
		}
		if hasReg {
			return c.instant(reg)
		}
		if seg.start <= farPast || seg.start <= minSec {
			return time.Time{}
		}
		if gap && c.dst.gap() == gapAfter {
			if _, ok := c.nextWall(seg.start+seg.prevOff, seg.start+seg.off); ok {
				return c.instant(seg.start)
			}
		}
		t1 = seg.start - 1
	}
}

func (c *cronSchedule) instant(s int64) time.Time { return time.Unix(s, 0).In(c.loc) }

package schedule

import "math/bits"

// Civil calendar arithmetic on the proleptic Gregorian calendar. Days are
// counted from 1970-01-01; a wall time is a count of seconds since
// 1970-01-01T00:00:00 read on a wall clock, with no zone attached.

const secondsPerDay = 86400

// floorDiv returns a/b rounded towards negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// daysFromCivil returns the day number of y-m-d (after H. Hinnant).
func daysFromCivil(y, m, d int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	m = int(mp + 3)
	if m > 12 {
		m -= 12
	}
	yy := yoe + era*400
	if m <= 2 {
		yy++
	}
	return int(yy), m, d
}

// weekday returns the day of the week of day number z, 0 for Sunday.
func weekday(z int64) int {
	w := (z + 4) % 7 // 1970-01-01 was a Thursday
	if w < 0 {
		w += 7
	}
	return int(w)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

var monthDays = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// daysIn returns the number of days in month m of year y.
func daysIn(y, m int) int {
	if m == 2 && isLeap(y) {
		return 29
	}
	return monthDays[m]
}

// nextBit returns the lowest set bit of mask at or above i, or -1.
func nextBit(mask uint64, i int) int {
	if i < 0 {
		i = 0
	}
	if i > 63 {
		return -1
	}
	m := mask & (^uint64(0) << uint(i))
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// prevBit returns the highest set bit of mask at or below i, or -1.
func prevBit(mask uint64, i int) int {
	if i < 0 {
		return -1
	}
	if i > 63 {
		i = 63
	}
	m := mask & ((uint64(2) << uint(i)) - 1)
	if m == 0 {
		return -1
	}
	return 63 - bits.LeadingZeros64(m)
}

func has(mask uint64, i int) bool { return i >= 0 && i < 64 && mask&(1<<uint(i)) != 0 }

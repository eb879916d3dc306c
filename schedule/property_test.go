package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// refCron is a cron spec built by the random generator together with the
// sets it stands for, so that the reference matcher does not depend on the
// parser.
type refCron struct {
	spec                   string
	sec, min, hour         []int
	dom, month, dow        [32]bool
	years                  map[int]bool // nil: any year
	lastOffs, wdays        []int
	lw                     bool
	dowLast                []int
	dowNth                 [][2]int // weekday, k
	domStar, dowStar, fixd bool
	dst                    DST // the daylight-saving choice the spec is checked with
}

var monthNames = []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
var dayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", ""}

// genField returns a random field over [lo, hi] and the values it matches.
// maxStepCount limits how many values a wildcard may produce; names, if not
// nil, are used for some values.
func genField(r *rand.Rand, lo, hi int, names []string, allowStar bool) (string, []int) {
	val := func() (string, int) {
		v := lo + r.IntN(hi-lo+1)
		if names != nil && names[v] != "" && r.IntN(3) == 0 {
			n := names[v]
			if r.IntN(2) == 0 {
				n = strings.ToLower(n)
			}
			return n, v
		}
		return strconv.Itoa(v), v
	}
	span := func(a, b, step int) []int {
		var out []int
		for v := a; v <= b; v += step {
			out = append(out, v)
		}
		return out
	}
	for {
		switch r.IntN(7) {
		case 0:
			if allowStar {
				return "*", span(lo, hi, 1)
			}
		case 1:
			s, v := val()
			return s, []int{v}
		case 2:
			var toks []string
			var vals []int
			for range 2 + r.IntN(2) {
				s, v := val()
				toks = append(toks, s)
				vals = append(vals, v)
			}
			return strings.Join(toks, ","), vals
		case 3:
			s1, a := val()
			s2, b := val()
			if a > b {
				s1, s2, a, b = s2, s1, b, a
			}
			return s1 + "-" + s2, span(a, b, 1)
		case 4:
			if allowStar {
				k := 1 + r.IntN(max(1, (hi-lo)/2))
				return "*/" + strconv.Itoa(k), span(lo, hi, k)
			}
		case 5:
			a, b := lo+r.IntN(hi-lo+1), lo+r.IntN(hi-lo+1)
			a, b = min(a, b), max(a, b)
			k := 1 + r.IntN(hi-lo)
			return fmt.Sprintf("%d-%d/%d", a, b, k), span(a, b, k)
		case 6:
			a := lo + r.IntN(hi-lo+1)
			k := 1 + r.IntN(hi-lo)
			return fmt.Sprintf("%d/%d", a, k), span(a, hi, k)
		}
	}
}

func genCron(r *rand.Rand) *refCron {
	rc := &refCron{}
	var f [7]string
	for {
		var sec, mn, hr []int
		f[0], sec = genField(r, 0, 59, nil, r.IntN(8) == 0)
		f[1], mn = genField(r, 0, 59, nil, true)
		f[2], hr = genField(r, 0, 23, nil, true)
		if len(sec)*len(mn)*len(hr) <= 2000 {
			rc.sec, rc.min, rc.hour = sortUniq(sec), sortUniq(mn), sortUniq(hr)
			break
		}
	}
	// day-of-month
	switch r.IntN(10) {
	case 0:
		f[3] = "?"
		for d := 1; d <= 31; d++ {
			rc.dom[d] = true
		}
	case 1:
		f[3] = "L"
		rc.lastOffs = []int{0}
	case 2:
		n := r.IntN(10)
		f[3] = fmt.Sprintf("L-%d", n)
		rc.lastOffs = []int{n}
	case 3:
		n := 1 + r.IntN(31)
		f[3] = fmt.Sprintf("%dW", n)
		rc.wdays = []int{n}
	case 4:
		f[3] = "LW"
		rc.lw = true
	case 5:
		d := 1 + r.IntN(28)
		f[3] = fmt.Sprintf("%d,L", d)
		rc.dom[d] = true
		rc.lastOffs = []int{0}
	default:
		var vals []int
		f[3], vals = genField(r, 1, 31, nil, true)
		for _, v := range vals {
			rc.dom[v] = true
		}
	}
	var vals []int
	f[4], vals = genField(r, 1, 12, monthNames, true)
	if r.IntN(2) == 0 {
		f[4], vals = "*", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	}
	for _, v := range vals {
		rc.month[v] = true
	}
	// day-of-week
	switch r.IntN(10) {
	case 0:
		f[5] = "?"
		for d := range 7 {
			rc.dow[d] = true
		}
	case 1:
		w := r.IntN(8)
		f[5] = strconv.Itoa(w) + "L"
		if r.IntN(2) == 0 {
			f[5] = dayNames[w%7] + "L"
		}
		rc.dowLast = []int{w % 7}
	case 2:
		w, k := r.IntN(8), 1+r.IntN(5)
		f[5] = fmt.Sprintf("%s#%d", dayNames[w%7], k)
		rc.dowNth = [][2]int{{w % 7, k}}
	case 3, 4:
		f[5] = "*"
		for d := range 7 {
			rc.dow[d] = true
		}
	default:
		f[5], vals = genField(r, 0, 7, dayNames, true)
		for _, v := range vals {
			rc.dow[v%7] = true
		}
	}
	n := 6
	if r.IntN(5) == 0 {
		n = 7
		a := 1975 + r.IntN(65)
		b := a + r.IntN(6)
		f[6] = fmt.Sprintf("%d-%d", a, b)
		rc.years = map[int]bool{}
		for y := a; y <= b; y++ {
			rc.years[y] = true
		}
	}
	fields := f[:n]
	if f[0] == "0" && n == 6 && r.IntN(2) == 0 {
		fields = f[1:6] // 5-field form
	}
	rc.spec = strings.Join(fields, " ")
	rc.domStar = f[3][0] == '*' || f[3][0] == '?'
	rc.dowStar = f[5][0] == '*' || f[5][0] == '?'
	rc.fixd = f[0][0] != '*' && f[1][0] != '*' && f[2][0] != '*'
	return rc
}

func sortUniq(v []int) []int {
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}

// dayOK is the reference day matcher, on time.Date in UTC.
func (rc *refCron) dayOK(y int, m time.Month, d int) bool {
	if !rc.month[m] || (rc.years != nil && !rc.years[y]) {
		return false
	}
	wdOf := func(day int) time.Weekday { return time.Date(y, m, day, 12, 0, 0, 0, time.UTC).Weekday() }
	last := time.Date(y, m+1, 0, 12, 0, 0, 0, time.UTC).Day()
	wd := int(wdOf(d))
	domHit := rc.dom[d]
	for _, n := range rc.lastOffs {
		domHit = domHit || d == last-n
	}
	for _, n := range rc.wdays {
		if n > last {
			continue
		}
		target := n
		switch wdOf(n) {
		case time.Saturday:
			if n == 1 {
				target = 3
			} else {
				target = n - 1
			}
		case time.Sunday:
			if n == last {
				target = n - 2
			} else {
				target = n + 1
			}
		}
		domHit = domHit || d == target
	}
	if rc.lw {
		target := last
		switch wdOf(last) {
		case time.Saturday:
			target = last - 1
		case time.Sunday:
			target = last - 2
		}
		domHit = domHit || d == target
	}
	dowHit := rc.dow[wd]
	for _, w := range rc.dowLast {
		dowHit = dowHit || (wd == w && d > last-7)
	}
	for _, wk := range rc.dowNth {
		dowHit = dowHit || (wd == wk[0] && (d-1)/7+1 == wk[1])
	}
	if rc.domStar || rc.dowStar {
		return domHit && dowHit
	}
	return domHit || dowHit
}

func refOffset(loc *time.Location, s int64) int64 {
	_, off := time.Unix(s, 0).In(loc).Zone()
	return int64(off)
}

// fires returns the instants at which wall time w fires under the contract:
// every instant whose wall time is w for a wildcard spec; for a fixed-time
// spec the earliest (both with DSTBoth and DSTWall), and when w does not
// exist the end of the gap (DSTDefault, DSTBoth), w read with the offset
// before the gap (DSTShift) or none (DSTSkipGap, DSTWall).
func (rc *refCron) fires(loc *time.Location, w int64) []int64 {
	var out []int64
	for _, probe := range []int64{w - 86400, w, w + 86400} {
		o := refOffset(loc, probe)
		if t := w - o; refOffset(loc, t) == o && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	if len(out) > 0 && rc.fixd && rc.dst != DSTBoth && rc.dst != DSTWall {
		out = out[:1]
	}
	if len(out) == 0 && rc.fixd {
		oBefore := refOffset(loc, w-86400)
		switch rc.dst {
		case DSTDefault, DSTBoth:
			start, _ := time.Unix(w-oBefore, 0).In(loc).ZoneBounds()
			out = append(out, start.Unix())
		case DSTShift:
			out = append(out, w-oBefore)
		}
	}
	return out
}

// refNext is the reference Next: it walks wall-clock days from a day before
// after, and the matching wall times of each matching day, and maps them to
// instants. It reports false if nothing fires within maxDays.
func (rc *refCron) refNext(loc *time.Location, after time.Time, maxDays int) (int64, bool) {
	a := after.Unix() // fires are whole seconds: f > after iff f > a
	startWall := a + refOffset(loc, a) - 2*86400
	sd := time.Unix(startWall, 0).UTC()
	best, found := int64(0), false
	var oMax int64
	for i := range maxDays {
		day := time.Date(sd.Year(), sd.Month(), sd.Day()+i, 0, 0, 0, 0, time.UTC)
		dw := day.Unix()
		if found && dw-oMax > best {
			break
		}
		if !rc.dayOK(day.Year(), day.Month(), day.Day()) {
			continue
		}
	walls:
		for _, h := range rc.hour {
			for _, m := range rc.min {
				for _, s := range rc.sec {
					w := dw + int64(h*3600+m*60+s)
					if found && w-oMax > best {
						break walls
					}
					for _, f := range rc.fires(loc, w) {
						if f > a && (!found || f < best) {
							best, found = f, true
							oMax = max(refOffset(loc, f-86400), refOffset(loc, f), refOffset(loc, f+86400))
						}
					}
				}
			}
		}
	}
	return best, found
}

var propertyZones = []string{
	"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe",
	"America/Sao_Paulo", "Pacific/Chatham", "Antarctica/Troll", "Asia/Kolkata",
	"America/St_Johns", "Europe/Moscow", "Pacific/Apia", "Australia/Adelaide",
	"America/Santiago", "Asia/Tehran", "Africa/Casablanca",
}

// randomStart returns a random instant between 1980 and 2035, half of the
// time within hours of a change of the zone's offset.
func randomStart(r *rand.Rand, loc *time.Location) time.Time {
	lo := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2035, 12, 31, 0, 0, 0, 0, time.UTC).Unix()
	t := time.Unix(lo+r.Int64N(hi-lo), 0).In(loc)
	if r.IntN(2) == 0 {
		if _, end := t.ZoneBounds(); !end.IsZero() {
			t = end.Add(time.Duration(r.IntN(6*3600)-3*3600) * time.Second)
		}
	}
	if r.IntN(4) == 0 {
		t = t.Add(time.Duration(r.IntN(1e9)))
	}
	return t
}

func TestNextMatchesReference(t *testing.T) {
	t.Parallel()
	specs := 3000
	if testing.Short() {
		specs = 500
	}
	const maxDays = 3000
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	seed := r.Uint64()
	t.Logf("seed %d", seed)
	r = rand.New(rand.NewPCG(2, seed))
	locs := make([]*time.Location, len(propertyZones))
	for i, z := range propertyZones {
		locs[i] = mustLoc(t, z)
	}
	checked, never := 0, 0
	for range specs {
		rc := genCron(r)
		rc.dst = DST(r.IntN(len(dstNames)))
		loc := locs[r.IntN(len(locs))]
		var s Schedule
		var err error
		if r.IntN(2) == 0 {
			s, err = ParseInLocation(rc.spec, loc)
		} else {
			s, err = Parse("CRON_TZ=" + loc.String() + " " + rc.spec)
		}
		if err == nil {
			s = WithDST(s, rc.dst)
		}
		if err != nil {
			if pe, ok := err.(*ParseError); ok && pe.Field == "spec" && strings.Contains(pe.Reason, "never fires") {
				never++
				continue
			}
			t.Fatalf("Parse(%q): %v", rc.spec, err)
		}
		if IsFixedTime(s) != rc.fixd {
			t.Fatalf("%q: IsFixedTime = %v", rc.spec, IsFixedTime(s))
		}
		for range 2 {
			after := randomStart(r, loc)
			for step := range 3 {
				want, ok := rc.refNext(loc, after, maxDays)
				got := s.Next(after)
				checked++
				if ok {
					if got.Unix() != want || got.Nanosecond() != 0 || got.Location().String() != loc.String() {
						t.Fatalf("%s %q dst %s: Next(%s) = %s, reference %s (step %d)", loc, rc.spec, rc.dst,
							after.Format(time.RFC3339Nano), got.Format(time.RFC3339), time.Unix(want, 0).In(loc).Format(time.RFC3339), step)
					}
				} else if !got.IsZero() && got.Unix() < after.Unix()+(maxDays-4)*86400 {
					t.Fatalf("%s %q dst %s: Next(%s) = %s, reference finds nothing within %d days", loc, rc.spec, rc.dst,
						after.Format(time.RFC3339Nano), got.Format(time.RFC3339), maxDays)
				}
				if got.IsZero() {
					break
				}
				// Prev is the inverse of Next.
				if p := s.Prev(got); !p.IsZero() {
					if p.After(after) {
						t.Fatalf("%s %q dst %s: Prev(%s) = %s, after %s with no fire between", loc, rc.spec, rc.dst,
							got.Format(time.RFC3339), p.Format(time.RFC3339), after.Format(time.RFC3339Nano))
					}
					if n := s.Next(p); !n.Equal(got) {
						t.Fatalf("%s %q dst %s: Next(Prev(%s)) = %s", loc, rc.spec, rc.dst, got.Format(time.RFC3339), n.Format(time.RFC3339))
					}
				}
				after = got
			}
		}
	}
	t.Logf("checked %d Next calls; %d specs never fire", checked, never)
}

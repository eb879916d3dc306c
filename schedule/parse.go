package schedule

import (
	"strconv"
	"strings"
	"time"
)

const (
	minYear = 1970
	maxYear = 2099
)

type fieldKind int

const (
	fSecond fieldKind = iota
	fMinute
	fHour
	fDom
	fMonth
	fDow
	fYear
)

type fieldDef struct {
	name     string
	min, max int
	names    []string // names[i] is the name of value i, if any
}

var fieldDefs = [...]fieldDef{
	fSecond: {"second", 0, 59, nil},
	fMinute: {"minute", 0, 59, nil},
	fHour:   {"hour", 0, 23, nil},
	fDom:    {"day-of-month", 1, 31, nil},
	fMonth:  {"month", 1, 12, []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	fDow:    {"day-of-week", 0, 7, []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
	fYear:   {"year", minYear, maxYear, nil},
}

// descriptors maps the calendar descriptors to 6-field specs.
var descriptors = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
	"@minutely": "0 * * * * *",
}

func parse(spec string, loc *time.Location) (Schedule, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, errorf("spec", spec, "empty spec")
	}
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			rest := s[len(p):]
			name, after, _ := strings.Cut(rest, " ")
			if i := strings.IndexAny(name, "\t\n\r\v\f"); i >= 0 {
				name, after = name[:i], name[i:]+" "+after
			}
			l, err := LoadLocation(name)
			if err != nil {
				return nil, err
			}
			loc = l
			s = strings.TrimSpace(after)
			if s == "" {
				return nil, errorf("spec", spec, "no schedule after %s%s", p, name)
			}
			break
		}
	}
	if s[0] == '@' {
		return parseDescriptor(spec, s, loc)
	}
	return parseCron(spec, strings.Fields(s), loc)
}

func parseDescriptor(spec, s string, loc *time.Location) (Schedule, error) {
	f := strings.Fields(s)
	name := strings.ToLower(f[0])
	switch name {
	case "@every":
		if len(f) != 2 {
			return nil, errorf("every", s, "%q: want @every followed by one Go duration such as 90s or 1h30m", s)
		}
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return nil, errorf("every", f[1], "%q is not a Go duration such as 90s or 1h30m", f[1])
		}
		if d < time.Second {
			return nil, errorf("every", f[1], "%s is shorter than the minimum of 1s", f[1])
		}
		return &everySchedule{spec: spec, d: d, loc: loc}, nil
	case "@at":
		if len(f) != 2 {
			return nil, errorf("at", s, "%q: want @at followed by one RFC 3339 time such as 2030-01-02T15:04:05Z", s)
		}
		t, err := time.Parse(time.RFC3339Nano, f[1])
		if err != nil {
			return nil, errorf("at", f[1], "%q is not an RFC 3339 time such as 2030-01-02T15:04:05Z", f[1])
		}
		return &atSchedule{spec: spec, at: t.In(loc), loc: loc}, nil
	}
	expr, ok := descriptors[name]
	if !ok {
		return nil, errorf("spec", f[0], "unknown descriptor %q", f[0])
	}
	if len(f) != 1 {
		return nil, errorf("spec", f[1], "unexpected %q after %s", f[1], f[0])
	}
	c, err := parseCron(spec, strings.Fields(expr), loc)
	return c, err
}

func parseCron(spec string, f []string, loc *time.Location) (*cronSchedule, error) {
	if len(f) < 5 || len(f) > 7 {
		return nil, errorf("spec", spec, "%q has %d fields, want 5 (minute hour day-of-month month day-of-week), 6 (with second first) or 7 (with year last)", strings.Join(f, " "), len(f))
	}
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	c := &cronSchedule{spec: spec, loc: loc}
	var masks [7][3]uint64
	for i, text := range f {
		k := fieldKind(i)
		m, err := c.parseField(k, text)
		if err != nil {
			return nil, err
		}
		masks[i] = m
	}
	if len(f) == 6 {
		masks[fYear] = fullYears()
	} else {
		c.hasYears = true
	}
	c.sec = masks[fSecond][0]
	c.min = masks[fMinute][0]
	c.hour = masks[fHour][0]
	c.dom = masks[fDom][0]
	c.month = masks[fMonth][0]
	c.dow = masks[fDow][0]
	if has(c.dow, 7) {
		c.dow = c.dow&^(1<<7) | 1
	}
	c.years = masks[fYear]
	c.domStar = f[fDom][0] == '*' || f[fDom][0] == '?'
	c.dowStar = f[fDow][0] == '*' || f[fDow][0] == '?'
	c.fixed = f[fSecond][0] != '*' && f[fMinute][0] != '*' && f[fHour][0] != '*'
	c.domExtra = c.lastOff != 0 || c.wdays != 0 || c.lastWeekday
	c.dowExtra = c.dowLast != 0
	for _, m := range c.dowNth {
		c.dowExtra = c.dowExtra || m != 0
	}
	c.firstYear, c.lastYear = -1, -1
	for y := minYear; y <= maxYear; y++ {
		if c.yearOK(y) {
			if c.firstYear < 0 {
				c.firstYear = y
			}
			c.lastYear = y
		}
	}
	// Reject a schedule that can never fire. Without a year field the
	// calendar repeats every 400 years.
	from, to := daysFromCivil(2000, 1, 1), daysFromCivil(2400, 1, 1)
	if c.hasYears {
		from, to = daysFromCivil(c.firstYear, 1, 1), daysFromCivil(c.lastYear+1, 1, 1)
	}
	if _, ok := c.nextDay(from, to); !ok {
		what := "day-of-month " + strconv.Quote(f[fDom]) + ", month " + strconv.Quote(f[fMonth]) + " and day-of-week " + strconv.Quote(f[fDow])
		if c.hasYears {
			what = "day-of-month " + strconv.Quote(f[fDom]) + ", month " + strconv.Quote(f[fMonth]) + ", day-of-week " + strconv.Quote(f[fDow]) + " and year " + strconv.Quote(f[fYear])
		}
		return nil, errorf("spec", spec, "%q never fires: no date matches %s", strings.TrimSpace(spec), what)
	}
	c.zone = tableFor(loc)
	return c, nil
}

func fullYears() [3]uint64 {
	var m [3]uint64
	for y := minYear; y <= maxYear; y++ {
		i := y - minYear
		m[i/64] |= 1 << uint(i%64)
	}
	return m
}

// parseField parses one field into a bit set of its values, offset by the
// field's minimum for the year field and by zero for the others. Quartz
// extensions are recorded on c.
func (c *cronSchedule) parseField(k fieldKind, text string) ([3]uint64, error) {
	var mask [3]uint64
	def := &fieldDefs[k]
	for _, e := range strings.Split(text, ",") {
		if err := c.parseElem(k, def, text, e, &mask); err != nil {
			return mask, err
		}
	}
	return mask, nil
}

func (c *cronSchedule) parseElem(k fieldKind, def *fieldDef, text, e string, mask *[3]uint64) error {
	if e == "" {
		return errorf(def.name, text, "%q has an empty list element", text)
	}
	up := strings.ToUpper(e)
	switch k {
	case fDom:
		switch {
		case up == "L":
			c.lastOff |= 1
			return nil
		case up == "LW":
			c.lastWeekday = true
			return nil
		case strings.HasPrefix(up, "L-"):
			n, err := number(def.name, e, e[2:], 0, 30, "offset from the last day")
			if err != nil {
				return err
			}
			c.lastOff |= 1 << uint(n)
			return nil
		case len(up) > 1 && up[len(up)-1] == 'W':
			n, err := number(def.name, e, e[:len(e)-1], 1, 31, "day")
			if err != nil {
				return err
			}
			c.wdays |= 1 << uint(n)
			return nil
		case strings.ContainsAny(up, "LW#"):
			return errorf(def.name, e, "%q is not a valid day-of-month (want a number 1-31, L, L-n, nW or LW)", e)
		}
	case fDow:
		if i := strings.IndexByte(e, '#'); i >= 0 {
			wd, err := c.value(def, e, e[:i])
			if err != nil {
				return err
			}
			n, err := number(def.name, e, e[i+1:], 1, 5, "week of the month")
			if err != nil {
				return err
			}
			c.dowNth[n] |= 1 << uint(wd%7)
			return nil
		}
		if up == "L" {
			return errorf(def.name, e, "%q needs a weekday before it, as in 5L or FRIL", e)
		}
		if len(up) > 1 && up[len(up)-1] == 'L' && !strings.ContainsAny(e, "-/*?,") {
			wd, err := c.value(def, e, e[:len(e)-1])
			if err != nil {
				return err
			}
			c.dowLast |= 1 << uint(wd%7)
			return nil
		}
	}
	base, step, hasStep := strings.Cut(e, "/")
	lo, hi := def.min, def.max
	switch {
	case base == "*":
	case base == "?":
		if k != fDom && k != fDow {
			return errorf(def.name, e, "%q: ? is only allowed in day-of-month and day-of-week", e)
		}
	case strings.Contains(base, "-"):
		a, b, _ := strings.Cut(base, "-")
		var err error
		if lo, err = c.value(def, e, a); err != nil {
			return err
		}
		if hi, err = c.value(def, e, b); err != nil {
			return err
		}
		if k == fDow && hi == 0 && lo > 0 {
			hi = 7 // FRI-SUN
		}
		if lo > hi {
			return errorf(def.name, e, "range %q starts after it ends", e)
		}
	default:
		v, err := c.value(def, e, base)
		if err != nil {
			return err
		}
		lo = v
		if !hasStep {
			hi = v
		}
	}
	n := 1
	if hasStep {
		var err error
		if n, err = number(def.name, e, step, 1, def.max-def.min+1, "step"); err != nil {
			return err
		}
	}
	for v := lo; v <= hi; v += n {
		i := v
		if k == fYear {
			i -= minYear
		}
		mask[i/64] |= 1 << uint(i%64)
	}
	return nil
}

// value parses a single value of a field: a number or, for months and days
// of the week, a three-letter English name.
func (c *cronSchedule) value(def *fieldDef, elem, tok string) (int, error) {
	if tok == "" {
		return 0, errorf(def.name, elem, "%q is missing a value", elem)
	}
	if isDigits(tok) {
		return number(def.name, elem, tok, def.min, def.max, "")
	}
	if def.names != nil && isLetters(tok) {
		up := strings.ToUpper(tok)
		for i, n := range def.names {
			if n != "" && n == up {
				return i, nil
			}
		}
		return 0, errorf(def.name, tok, "unknown name %q", tok)
	}
	return 0, errorf(def.name, tok, "%q is not a number", tok)
}

// number parses a decimal number in [lo, hi]; what names it in errors.
func number(field, elem, tok string, lo, hi int, what string) (int, error) {
	if tok == "" {
		return 0, errorf(field, elem, "%q is missing a number", elem)
	}
	if !isDigits(tok) {
		return 0, errorf(field, tok, "%q is not a number", tok)
	}
	prefix := ""
	if what != "" {
		prefix = what + " "
	}
	v, err := strconv.Atoi(tok)
	if err != nil || v < lo || v > hi {
		return 0, errorf(field, tok, "%s%s is out of range %d-%d", prefix, tok, lo, hi)
	}
	return v, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i] | 0x20; b < 'a' || b > 'z' {
			return false
		}
	}
	return s != ""
}

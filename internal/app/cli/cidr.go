package cli

import (
	"strings"

	"github.com/chimehq/chime/internal/base/egress"
)

// cidrList is a repeatable, comma-separated flag of CIDR prefixes (or
// single addresses), checked as it is set so that a bad entry is reported
// with the flag's name, whether it came from the command line, the
// environment or the config file. The first Set replaces the default; the
// next ones add to it.
type cidrList struct {
	p   *[]string
	set bool
}

func newCIDRList(p *[]string) *cidrList { return &cidrList{p: p} }

func (c *cidrList) String() string {
	if c.p == nil {
		return ""
	}
	return strings.Join(*c.p, ",")
}

func (c *cidrList) Set(v string) error {
	if _, err := egress.ParsePrefixes([]string{v}); err != nil {
		return err
	}
	var add []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			add = append(add, s)
		}
	}
	if !c.set {
		*c.p, c.set = nil, true
	}
	*c.p = append(*c.p, add...)
	return nil
}

func (c *cidrList) Type() string { return "cidrs" }

// GetSlice, Append and Replace make cidrList a pflag.SliceValue, so that
// the daemon's re-exec passes each entry as given.
func (c *cidrList) GetSlice() []string { return append([]string(nil), *c.p...) }

func (c *cidrList) Append(v string) error {
	if _, err := egress.ParsePrefixes([]string{v}); err != nil {
		return err
	}
	*c.p, c.set = append(*c.p, strings.TrimSpace(v)), true
	return nil
}

func (c *cidrList) Replace(vs []string) error {
	if _, err := egress.ParsePrefixes(vs); err != nil {
		return err
	}
	*c.p, c.set = append([]string(nil), vs...), true
	return nil
}

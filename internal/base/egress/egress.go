// Package egress decides which addresses chime's HTTP callbacks may
// connect to, so that a timer cannot make chime call the cloud metadata
// service (169.254.169.254) or other addresses that only the host running
// chime can reach.
//
// A Policy holds two lists of address prefixes: an address in Deny and not
// in Allow is refused. The check is made on the address actually dialled,
// after chime resolved the name itself (see Dialer), for the first request
// and for every redirect, so that DNS names, redirects and DNS rebinding do
// not get around it. IPv4-mapped IPv6 addresses (::ffff:169.254.169.254)
// are unmapped before they are checked.
//
// Loopback (127.0.0.0/8, ::1) and the private ranges (10.0.0.0/8,
// 172.16.0.0/12, 192.168.0.0/16, fc00::/7) are allowed by default, since
// callbacks to services beside chime are common; deny them when timers are
// defined by people who must not reach them:
//
//	chime serve --callback-deny 127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7
//
// The built-in DefaultDeny list always applies; --callback-deny adds to it
// and --callback-allow makes exceptions to both.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
)

// DefaultDeny is the deny list of Default and the base of every policy
// made by NewPolicy: link-local (where the cloud metadata services live,
// 169.254.169.254 and fd00:ec2::254 on AWS), Alibaba Cloud's metadata
// service (100.100.100.200), Azure's WireServer (168.63.129.16), NAT64
// (64:ff9b::/96, which reaches any IPv4 address through a translator),
// "this network", the unspecified address, multicast and broadcast.
//
// An IPv6 address that embeds an IPv4 address is checked as that address
// too (Policy.Denied): IPv4-mapped (::ffff:a.b.c.d), 6to4 (2002:AABB:CCDD::/48)
// and Teredo (2001::/32, the client address inverted in the last 32 bits).
var DefaultDeny = []string{
	"169.254.0.0/16",
	"fe80::/10",
	"0.0.0.0/8",
	"::/128",
	"224.0.0.0/4",
	"ff00::/8",
	"255.255.255.255/32",
	"fd00:ec2::254/128",
	"100.100.100.200/32",
	"168.63.129.16/32",
	"64:ff9b::/96",
}

// Policy says which addresses callbacks may connect to: an address in Deny
// and not in Allow is refused. The zero Policy (and a nil *Policy) allows
// everything. A Policy must not be changed once in use.
type Policy struct {
	Deny  []netip.Prefix
	Allow []netip.Prefix
}

// Default returns the policy of a server started without --callback-deny
// and --callback-allow: DefaultDeny, no exceptions.
func Default() *Policy {
	p, err := NewPolicy(nil, nil)
	if err != nil {
		panic("egress: bad DefaultDeny: " + err.Error())
	}
	return p
}

// NewPolicy returns the policy that denies DefaultDeny and deny, except
// allow. Each entry is a CIDR prefix ("10.0.0.0/8") or a single address
// ("192.0.2.7"); an entry may itself be a comma-separated list.
func NewPolicy(deny, allow []string) (*Policy, error) {
	d, err := ParsePrefixes(append(slices.Clone(DefaultDeny), deny...))
	if err != nil {
		return nil, fmt.Errorf("callback deny list: %w", err)
	}
	a, err := ParsePrefixes(allow)
	if err != nil {
		return nil, fmt.Errorf("callback allow list: %w", err)
	}
	return &Policy{Deny: d, Allow: a}, nil
}

// ParsePrefixes parses CIDR prefixes or single addresses (taken as /32 or
// /128). Entries may be comma-separated lists; blank ones are skipped.
// IPv4-mapped IPv6 prefixes are unmapped (::ffff:10.0.0.0/104 is
// 10.0.0.0/8), since addresses are unmapped before they are checked.
func ParsePrefixes(entries []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range entries {
		for s := range strings.SplitSeq(e, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p, err := parsePrefix(s)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR prefix nor an address", s)
		}
		a = a.Unmap().WithZone("")
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix: %w", s, err)
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// DeniedError is the error of a refused address. Its message starts with
// "egress policy:" and names the address and the deny prefix it is in.
type DeniedError struct {
	// Addr is the refused address and port (port 0 when unknown).
	Addr netip.AddrPort
	// Host is the name that resolved to Addr, if it was a name.
	Host string
	// Prefix is the deny entry Addr is in.
	Prefix netip.Prefix
}

func (e *DeniedError) Error() string {
	addr := e.Addr.Addr().String()
	if e.Addr.Port() != 0 {
		addr = e.Addr.String()
	}
	if e.Host != "" {
		return fmt.Sprintf("egress policy: %s (%s) is denied (in %s)", addr, e.Host, e.Prefix)
	}
	return fmt.Sprintf("egress policy: %s is denied (in %s)", addr, e.Prefix)
}

// Denied reports whether p refuses a, and the deny prefix a is in. a is
// unmapped first (::ffff:169.254.169.254 is 169.254.169.254) and its zone
// dropped. A 6to4 or Teredo address is refused too when the IPv4 address
// it embeds is (reporting that address's deny prefix), unless Allow holds
// the IPv6 address itself. An invalid address is refused by any policy
// with a deny list.
func (p *Policy) Denied(a netip.Addr) (netip.Prefix, bool) {
	if p == nil || len(p.Deny) == 0 {
		return netip.Prefix{}, false
	}
	if !a.IsValid() {
		return netip.Prefix{}, true
	}
	a = a.Unmap().WithZone("")
	if d, denied := p.denied(a); denied {
		return d, true
	}
	if v4, ok := embeddedIPv4(a); ok && !p.allowed(a) {
		return p.denied(v4)
	}
	return netip.Prefix{}, false
}

// Tunnel prefixes whose addresses embed an IPv4 address.
var (
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
)

// embeddedIPv4 returns the IPv4 address a 6to4 address (2002:AABB:CCDD::
// is AA.BB.CC.DD) or a Teredo address (the client's address, inverted, in
// the last 32 bits) leads to.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// allowed reports whether Allow holds a.
func (p *Policy) allowed(a netip.Addr) bool {
	for _, ok := range p.Allow {
		if ok.Contains(a) {
			return true
		}
	}
	return false
}

// denied is Denied for an address already unmapped, without the embedded
// IPv4 check.
func (p *Policy) denied(a netip.Addr) (netip.Prefix, bool) {
	for _, d := range p.Deny {
		if !d.Contains(a) {
			continue
		}
		if p.allowed(a) {
			return netip.Prefix{}, false
		}
		return d, true
	}
	return netip.Prefix{}, false
}

// Check returns a *DeniedError when p refuses ap, else nil.
func (p *Policy) Check(ap netip.AddrPort) error {
	if d, denied := p.Denied(ap.Addr()); denied {
		return &DeniedError{Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Prefix: d}
	}
	return nil
}

// CheckHost checks a URL host (without port; IPv6 with or without
// brackets) that is a literal address, for validation at creation. A name
// passes: it is checked when it is resolved, at each connection.
func (p *Policy) CheckHost(host string) error {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if err != nil {
		return nil
	}
	return p.Check(netip.AddrPortFrom(a, 0))
}

// Control is a net.Dialer.Control function that refuses a connection to
// an address p denies: the check on the socket's own address, a second
// line behind Dialer's check of the resolved addresses.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress policy: cannot check address %q: %w", address, err)
	}
	return p.Check(ap)
}

// Resolver resolves host names; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer dials TCP connections for HTTP callbacks under a Policy. It
// resolves the host itself, refuses the connection when any address of
// the host is denied, and dials the addresses (not the name), so that the
// address checked is the address connected to: a name cannot resolve to an
// allowed address for the check and to a denied one for the connection.
// Each dial resolves again; a TLS connection still verifies the
// certificate against the URL's host, which the HTTP transport keeps.
type Dialer struct {
	// Policy is checked; nil allows everything.
	Policy *Policy
	// Resolver resolves names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dialer dials; nil means a net.Dialer with a 10 s timeout and 30 s
	// keep-alive. Its Control, if any, is replaced by one that checks the
	// Policy and then calls it; its ControlContext must be nil (it would
	// make the dialer skip Control).
	Dialer *net.Dialer
}

// ErrNoAddress is returned when a host resolves to no address.
var ErrNoAddress = errors.New("host has no address")

// DialContext resolves the host of address, checks every address it has,
// and connects to them in turn until one answers (one after the other,
// each with the dialer's whole timeout: no Happy Eyeballs racing). A host with any denied
// address is refused as a whole (with a *DeniedError), so that which
// address gets dialled never decides whether the policy holds.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	pn, err := net.LookupPort(network, port)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	var addrs []netip.Addr
	name := ""
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		name = host
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ipnet := "ip"
		switch network {
		case "tcp4":
			ipnet = "ip4"
		case "tcp6":
			ipnet = "ip6"
		}
		addrs, err = r.LookupNetIP(ctx, ipnet, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: %w", host, ErrNoAddress)
		}
	}
	for _, a := range addrs {
		if err := d.Policy.Check(netip.AddrPortFrom(a, uint16(pn))); err != nil {
			var de *DeniedError
			if errors.As(err, &de) {
				de.Host = name
			}
			return nil, err
		}
	}
	nd := d.netDialer()
	var errs []error
	for _, a := range addrs {
		c, err := nd.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(pn)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func (d *Dialer) netDialer() *net.Dialer {
	var nd net.Dialer
	if d.Dialer != nil {
		nd = *d.Dialer
	} else {
		nd = net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	}
	next := nd.Control
	p := d.Policy
	nd.Control = func(network, address string, c syscall.RawConn) error {
		if err := p.Control(network, address, c); err != nil {
			return err
		}
		if next != nil {
			return next(network, address, c)
		}
		return nil
	}
	return &nd
}

package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/base/egress"
)

func TestPolicy(t *testing.T) {
	t.Parallel()
	def := egress.Default()
	strict, err := egress.NewPolicy([]string{"127.0.0.0/8,::1/128", "10.0.0.0/8", "192.168.0.0/16"}, []string{"10.1.2.0/24", "169.254.10.10"})
	if err != nil {
		t.Fatal(err)
	}
	allowMeta, err := egress.NewPolicy(nil, []string{"169.254.169.254/32"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		p      *egress.Policy
		addr   string
		denied bool
		prefix string
	}{
		{"metadata", def, "169.254.169.254", true, "169.254.0.0/16"},
		{"metadata mapped", def, "::ffff:169.254.169.254", true, "169.254.0.0/16"},
		{"aws ipv6 metadata", def, "fd00:ec2::254", true, "fd00:ec2::254/128"},
		{"link-local v6", def, "fe80::1", true, "fe80::/10"},
		{"link-local v6 zone", def, "fe80::1%eth0", true, "fe80::/10"},
		{"this network", def, "0.0.0.0", true, "0.0.0.0/8"},
		{"unspecified v6", def, "::", true, "::/128"},
		{"multicast", def, "239.1.2.3", true, "224.0.0.0/4"},
		{"multicast v6", def, "ff02::1", true, "ff00::/8"},
		{"broadcast", def, "255.255.255.255", true, "255.255.255.255/32"},
		{"loopback allowed by default", def, "127.0.0.1", false, ""},
		{"loopback v6 allowed by default", def, "::1", false, ""},
		{"private allowed by default", def, "10.0.0.1", false, ""},
		{"public", def, "93.184.215.14", false, ""},
		{"public v6", def, "2606:2800:21f:cb07:6820:80da:af6b:8b2c", false, ""},
		{"strict loopback", strict, "127.0.0.1", true, "127.0.0.0/8"},
		{"strict loopback mapped", strict, "::ffff:127.0.0.1", true, "127.0.0.0/8"},
		{"strict loopback v6", strict, "::1", true, "::1/128"},
		{"strict private", strict, "10.9.9.9", true, "10.0.0.0/8"},
		{"strict allow wins", strict, "10.1.2.3", false, ""},
		{"strict single allowed address", strict, "169.254.10.10", false, ""},
		{"strict keeps defaults", strict, "169.254.169.254", true, "169.254.0.0/16"},
		{"strict public", strict, "8.8.8.8", false, ""},
		{"allow metadata", allowMeta, "169.254.169.254", false, ""},
		{"allow metadata, not its range", allowMeta, "169.254.169.253", true, "169.254.0.0/16"},
		{"zero policy", &egress.Policy{}, "169.254.169.254", false, ""},
		{"nil policy", nil, "169.254.169.254", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			prefix, denied := tc.p.Denied(a)
			if denied != tc.denied {
				t.Fatalf("Denied(%s) = %v, want %v", a, denied, tc.denied)
			}
			if denied && prefix.String() != tc.prefix {
				t.Fatalf("Denied(%s) prefix %s, want %s", a, prefix, tc.prefix)
			}
			err := tc.p.Check(netip.AddrPortFrom(a, 80))
			if (err != nil) != tc.denied {
				t.Fatalf("Check: %v", err)
			}
			if err != nil {
				var de *egress.DeniedError
				if !errors.As(err, &de) || !strings.HasPrefix(err.Error(), "egress policy: ") || !strings.Contains(err.Error(), tc.prefix) {
					t.Fatalf("Check error %q", err)
				}
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	err := egress.Default().Check(netip.MustParseAddrPort("[::ffff:169.254.169.254]:80"))
	if want := "egress policy: 169.254.169.254:80 is denied (in 169.254.0.0/16)"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := egress.ParsePrefixes([]string{" 10.0.0.0/8 , 192.0.2.7", "", "::ffff:10.0.0.0/104", "10.1.2.3/8", "2001:db8::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "10.0.0.0/8", "10.0.0.0/8", "2001:db8::1/128"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0/8"} {
		if _, err := egress.ParsePrefixes([]string{bad}); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := egress.NewPolicy([]string{"nope"}, nil); err == nil || !strings.Contains(err.Error(), "deny") {
		t.Errorf("NewPolicy bad deny: %v", err)
	}
	if _, err := egress.NewPolicy(nil, []string{"nope"}); err == nil || !strings.Contains(err.Error(), "allow") {
		t.Errorf("NewPolicy bad allow: %v", err)
	}
}

func TestCheckHost(t *testing.T) {
	t.Parallel()
	p := egress.Default()
	for host, denied := range map[string]bool{
		"169.254.169.254":          true,
		"[::ffff:169.254.169.254]": true,
		"::ffff:a9fe:a9fe":         true,
		"[fe80::1]":                true,
		"metadata.google.internal": false, // a name: checked when it is resolved
		"127.0.0.1":                false,
	} {
		if err := p.CheckHost(host); (err != nil) != denied {
			t.Errorf("CheckHost(%s) = %v, want denied %v", host, err, denied)
		}
	}
}

// mapResolver resolves names from a map.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestDialer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	r := mapResolver{
		"ok.test":    {netip.MustParseAddr("127.0.0.1")},
		"meta.test":  {netip.MustParseAddr("169.254.169.254")},
		"mixed.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:169.254.169.254")},
	}
	strict, _ := egress.NewPolicy([]string{"127.0.0.0/8"}, nil)
	for _, tc := range []struct {
		name, addr string
		p          *egress.Policy
		want       string // error substring; "" connects
	}{
		{"name allowed", "ok.test:" + port, egress.Default(), ""},
		{"literal allowed", "127.0.0.1:" + port, egress.Default(), ""},
		{"name to metadata", "meta.test:80", egress.Default(), "egress policy: 169.254.169.254:80 (meta.test) is denied (in 169.254.0.0/16)"},
		{"literal metadata", "169.254.169.254:80", egress.Default(), "egress policy: 169.254.169.254:80 is denied"},
		{"mapped literal", "[::ffff:169.254.169.254]:80", egress.Default(), "egress policy: 169.254.169.254:80 is denied"},
		{"any denied address refuses the host", "mixed.test:" + port, egress.Default(), "egress policy: 169.254.169.254"},
		{"strict loopback", "ok.test:" + port, strict, "egress policy: 127.0.0.1:" + port + " (ok.test) is denied (in 127.0.0.0/8)"},
		{"unknown name", "nope.test:80", egress.Default(), "no such host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &egress.Dialer{Policy: tc.p, Resolver: r}
			c, err := d.DialContext(t.Context(), "tcp", tc.addr)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("dial %s connected, want %q", tc.addr, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial %s: %v, want %q", tc.addr, err, tc.want)
			}
		})
	}
}

// TestControl checks the second line: a net.Dialer whose Control is the
// policy's refuses a denied address even without Dialer's own check.
func TestControl(t *testing.T) {
	t.Parallel()
	p, _ := egress.NewPolicy([]string{"127.0.0.0/8"}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &net.Dialer{Control: p.Control}
	_, err = d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "egress policy: "+ln.Addr().String()) {
		t.Fatalf("dial: %v", err)
	}
	if err := egress.Default().Control("tcp", ln.Addr().String(), nil); err != nil {
		t.Fatalf("default policy refused loopback: %v", err)
	}
}

// TestDefaultDenyCloudAndTunnels: the default policy refuses Alibaba's
// metadata service, Azure's WireServer, NAT64, and the 6to4 and Teredo
// forms of denied IPv4 addresses, and still allows public addresses in
// those forms; an allow entry for the IPv6 address itself makes an
// exception.
func TestDefaultDenyCloudAndTunnels(t *testing.T) {
	t.Parallel()
	p := egress.Default()
	for _, tc := range []struct {
		addr   string
		denied bool
	}{
		{"100.100.100.200", true},
		{"168.63.129.16", true},
		{"::ffff:100.100.100.200", true},
		{"64:ff9b::a9fe:a9fe", true},                    // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", true},                      // NAT64 of anything
		{"2002:a9fe:a9fe::1", true},                     // 6to4 of 169.254.169.254
		{"2002:6464:64c8:1::", true},                    // 6to4 of 100.100.100.200
		{"2002:a83f:8110::", true},                      // 6to4 of 168.63.129.16
		{"2002:808:808::1", false},                      // 6to4 of 8.8.8.8
		{"2001:0:4136:e378:8000:63bf:5601:5601", true},  // Teredo, client 169.254.169.254
		{"2001:0:4136:e378:8000:63bf:57c0:7eef", true},  // Teredo, client 168.63.129.16
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", false}, // Teredo, client 8.8.8.8
		{"2001:db8::1", false},
		{"100.100.100.201", false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if _, denied := p.Denied(a); denied != tc.denied {
			t.Errorf("Denied(%s) = %v, want %v", tc.addr, denied, tc.denied)
		}
		if err := p.CheckHost(tc.addr); (err != nil) != tc.denied {
			t.Errorf("CheckHost(%s) = %v", tc.addr, err)
		}
	}
	// A user deny entry applies to the embedded address too.
	q, err := egress.NewPolicy([]string{"10.0.0.0/8"}, []string{"2002:a00:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	if _, denied := q.Denied(netip.MustParseAddr("2002:a00:2::1")); !denied {
		t.Error("6to4 of 10.0.0.2 allowed under --callback-deny 10.0.0.0/8")
	}
	if _, denied := q.Denied(netip.MustParseAddr("2002:a00:1::1")); denied {
		t.Error("6to4 of 10.0.0.1 denied despite an allow entry for its IPv6 prefix")
	}
}

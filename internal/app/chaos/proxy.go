package chaos

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
)

// proxy is a TCP proxy on loopback between one node and one server (its
// database or Redis), for the partition fault. While it forwards, every
// connection accepted is joined to a new connection to the server. A cut
// makes it stop forwarding without closing anything, as a network
// partition does: bytes already read from either side are held, nothing
// more is read (the peers' sends fill the TCP buffers and then block),
// and a connection accepted meanwhile reaches no server (its client waits
// for a greeting that does not come). Healing lets the held bytes and
// what queued behind them flow again on the same connections, as TCP does
// when a partition shorter than its retransmission timeout heals; a
// client that gave up meanwhile has closed its connection, and the proxy
// then closes the other side.
type proxy struct {
	ln     net.Listener
	target string // host:port of the server

	mu     sync.Mutex
	cut    bool
	healed chan struct{} // closed when the current cut heals
	closed bool
	done   chan struct{} // closed by close
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// startProxy listens on a free loopback port and forwards to target.
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy to %s: listen: %w", target, err)
	}
	p := &proxy{ln: ln, target: target, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// addr is the proxy's host:port.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// partition stops forwarding; heal resumes it. Both are idempotent.
func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut, p.healed = true, make(chan struct{})
	}
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.healed)
	}
}

// gate blocks while the proxy is cut; false once it is closed.
func (p *proxy) gate() bool {
	for {
		p.mu.Lock()
		closed, cut, healed := p.closed, p.cut, p.healed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !cut {
			return true
		}
		select {
		case <-healed:
		case <-p.done:
			return false
		}
	}
}

// track registers c to be closed by close; false if the proxy is closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve joins the client connection c to a new server connection, once
// the proxy forwards.
func (p *proxy) serve(c net.Conn) {
	defer p.untrack(c)
	if !p.gate() {
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the client sees its connection closed, as when the server is down
	}
	if !p.track(s) {
		s.Close()
		return
	}
	defer p.untrack(s)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(s, c) })
	wg.Go(func() { p.pipe(c, s) })
	wg.Wait()
}

// pipe copies from src to dst, holding each chunk read while the proxy is
// cut. When either side ends, both are closed.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or an error: the connection is over
		}
	}
}

// close stops listening and closes every connection.
func (p *proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// defaultPorts are the servers' ports when a URL names none.
var defaultPorts = map[string]string{BackendMySQL: "3306", BackendPostgres: "5432", "redis": "6379"}

// serverAddr returns the host:port of the one server of rawURL (kind:
// mysql, postgres or redis), which a proxy can stand in for.
func serverAddr(rawURL, kind string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%q: %w", redact(rawURL), err)
	}
	if kind == "redis" && u.Scheme != "redis" && u.Scheme != "rediss" {
		return "", fmt.Errorf("%q: want redis:// or rediss:// (one server) for a partition, not %s://", redact(rawURL), u.Scheme)
	}
	if u.Host == "" || strings.Contains(u.Host, ",") {
		return "", fmt.Errorf("%q: want one host:port for a partition", redact(rawURL))
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), defaultPorts[kind]), nil
	}
	return u.Host, nil
}

// viaProxy returns rawURL with its host replaced by addr.
func viaProxy(rawURL, addr string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%q: %w", redact(rawURL), err)
	}
	u.Host = addr
	return u.String(), nil
}

// startProxies starts the node's proxies to the database of dsn and to the
// Redis of redisURL, and returns the URLs that reach them through them.
func (n *node) startProxies(dsn, redisURL, backend string) (string, string, error) {
	out := [2]string{}
	for i, s := range []struct{ target, rawURL, kind string }{
		{PartitionDB, dsn, backend}, {PartitionRedis, redisURL, "redis"},
	} {
		if s.rawURL == "" {
			continue // no Redis: --coordination db
		}
		addr, err := serverAddr(s.rawURL, s.kind)
		if err != nil {
			return "", "", fmt.Errorf("chaos: node %s: %w", n.name, err)
		}
		p, err := startProxy(addr)
		if err != nil {
			return "", "", err
		}
		n.mu.Lock()
		if n.proxies == nil {
			n.proxies = map[string]*proxy{}
		}
		n.proxies[s.target] = p
		n.mu.Unlock()
		if out[i], err = viaProxy(s.rawURL, p.addr()); err != nil {
			return "", "", fmt.Errorf("chaos: node %s: %w", n.name, err)
		}
	}
	return out[0], out[1], nil
}

// proxiesOf returns the node's proxies for a partition target (db, redis,
// both).
func (n *node) proxiesOf(target string) []*proxy {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch target {
	case PartitionDB, PartitionRedis:
		if p := n.proxies[target]; p != nil {
			return []*proxy{p}
		}
		return nil
	case PartitionBoth:
		var ps []*proxy
		for _, t := range []string{PartitionDB, PartitionRedis} {
			if p := n.proxies[t]; p != nil {
				ps = append(ps, p)
			}
		}
		return ps
	}
	return nil
}

// healAll lets every proxy forward again.
func (c *cluster) healAll() {
	for _, n := range c.nodes {
		for _, p := range n.proxiesOf(PartitionBoth) {
			p.heal()
		}
	}
}

// closeProxies closes every node's proxies.
func (c *cluster) closeProxies() {
	for _, n := range c.nodes {
		for _, p := range n.proxiesOf(PartitionBoth) {
			p.close()
		}
	}
}

package chaos

import (
	"fmt"
	"net"
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

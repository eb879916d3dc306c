package chaos

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes line to c and reads it back within d; ok false when no
// answer came in time.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string, d time.Duration) (string, bool) {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return "", false
		}
		t.Fatalf("read %q: %v", line, err)
	}
	return got[:len(got)-1], true
}

func TestProxyPartition(t *testing.T) {
	t.Parallel()
	p, err := startProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()

	old, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldR := bufio.NewReader(old)
	if got, ok := roundTrip(t, old, oldR, "before", 5*time.Second); !ok || got != "before" {
		t.Fatalf("forwarding: got %q, %v; want \"before\"", got, ok)
	}

	p.partition()
	// An existing connection passes nothing: the write is accepted, no
	// answer comes, and the connection is not closed.
	if got, ok := roundTrip(t, old, oldR, "during", 300*time.Millisecond); ok {
		t.Fatalf("existing connection during a partition: got %q, want no answer", got)
	}
	// A new connection is accepted (not refused) and hangs.
	fresh, err := net.DialTimeout("tcp", p.addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("new connection during a partition: %v, want it accepted", err)
	}
	defer fresh.Close()
	freshR := bufio.NewReader(fresh)
	if got, ok := roundTrip(t, fresh, freshR, "new", 300*time.Millisecond); ok {
		t.Fatalf("new connection during a partition: got %q, want no answer", got)
	}

	p.heal()
	// The bytes held during the partition flow on the same connections.
	if got, ok := roundTrip(t, old, oldR, "after", 5*time.Second); !ok || got != "during" {
		t.Fatalf("existing connection after healing: got %q, %v; want the held \"during\"", got, ok)
	}
	if got, err := oldR.ReadString('\n'); err != nil || got != "after\n" {
		t.Fatalf("existing connection after healing: got %q, %v; want \"after\"", got, err)
	}
	if got, ok := roundTrip(t, fresh, freshR, "again", 5*time.Second); !ok || got != "new" {
		t.Fatalf("connection made during the partition, after healing: got %q, %v; want the held \"new\"", got, ok)
	}
	if got, err := freshR.ReadString('\n'); err != nil || got != "again\n" {
		t.Fatalf("connection made during the partition, after healing: got %q, %v; want \"again\"", got, err)
	}

	// close ends every connection, held or not.
	p.partition()
	p.close()
	if err := old.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := oldR.ReadString('\n'); err == nil {
		t.Fatal("connection after close: read succeeded, want it closed")
	}
}

func TestViaProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, kind, server, via string }{
		{"mysql://root:pw@db.example:3307/chime_x", BackendMySQL, "db.example:3307", "mysql://root:pw@127.0.0.1:9/chime_x"},
		{"postgres://u@localhost/db?sslmode=disable", BackendPostgres, "localhost:5432", "postgres://u@127.0.0.1:9/db?sslmode=disable"},
		{"redis://127.0.0.1/6", "redis", "127.0.0.1:6379", "redis://127.0.0.1:9/6"},
	} {
		server, err := serverAddr(tc.url, tc.kind)
		if err != nil || server != tc.server {
			t.Errorf("serverAddr(%q) = %q, %v; want %q", tc.url, server, err, tc.server)
		}
		via, err := viaProxy(tc.url, "127.0.0.1:9")
		if err != nil || via != tc.via {
			t.Errorf("viaProxy(%q) = %q, %v; want %q", tc.url, via, err, tc.via)
		}
	}
}

package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPServerBounds: the API server has read, write and idle timeouts
// and a header size limit, with defaults, a negative value setting none;
// a slow body, an idle connection and an oversized header are cut off.
func TestHTTPServerBounds(t *testing.T) {
	t.Parallel()
	var def Config
	def.defaults()
	d := newHTTPServer(def, nil, nil)
	if d.ReadTimeout != DefaultHTTPReadTimeout || d.WriteTimeout != DefaultHTTPWriteTimeout ||
		d.IdleTimeout != DefaultHTTPIdleTimeout || d.MaxHeaderBytes != DefaultHTTPMaxHeaderBytes || d.ReadHeaderTimeout != 10*time.Second {
		t.Errorf("default server: read %v write %v idle %v header bytes %d header timeout %v", d.ReadTimeout, d.WriteTimeout,
			d.IdleTimeout, d.MaxHeaderBytes, d.ReadHeaderTimeout)
	}
	none := Config{HTTPReadTimeout: -1, HTTPWriteTimeout: -1, HTTPIdleTimeout: -1}
	none.defaults()
	if n := newHTTPServer(none, nil, nil); n.ReadTimeout != 0 || n.WriteTimeout != 0 || n.IdleTimeout != 0 {
		t.Errorf("negative timeouts: read %v write %v idle %v, want none", n.ReadTimeout, n.WriteTimeout, n.IdleTimeout)
	}

	cfg := Config{HTTPReadTimeout: 300 * time.Millisecond, HTTPWriteTimeout: 300 * time.Millisecond,
		HTTPIdleTimeout: 300 * time.Millisecond, HTTPMaxHeaderBytes: 4096}
	cfg.defaults()
	srv := newHTTPServer(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/slow" {
			time.Sleep(time.Second) // past the write timeout: the answer is lost
		}
		_, _ = io.WriteString(w, "ok")
	}), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // the test's own bound
		return c
	}
	// closed reports whether the server closed c (after answering what it
	// answers, if anything).
	closed := func(c net.Conn) bool {
		_, err := io.ReadAll(c)
		var ne net.Error
		return err == nil || !(errors.As(err, &ne) && ne.Timeout())
	}

	t.Run("slow body", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
		start := time.Now()
		if !closed(c) {
			t.Fatal("connection with a body never sent stayed open")
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("closed after %v, want about the read timeout", took)
		}
	})
	t.Run("idle", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		start := time.Now()
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("idle connection: %v, want closed by the server", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("idle connection closed after %v, want about the idle timeout", took)
		}
	})
	t.Run("slow answer", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		b, _ := io.ReadAll(c)
		if strings.Contains(string(b), "ok") {
			t.Errorf("an answer past the write timeout was sent: %q", b)
		}
	})
	t.Run("header too large", func(t *testing.T) {
		c := dial(t)
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("16 KiB header: %d, want 431", resp.StatusCode)
		}
	})
}

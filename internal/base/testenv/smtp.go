package testenv

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"net"
	"strings"
	"sync"
	"testing"
)

// SMTPServer is a minimal SMTP server for tests, on a loopback port:
// EHLO, STARTTLS (when it has a TLS config), AUTH PLAIN, MAIL, RCPT, DATA,
// QUIT. It records the messages it receives and accepts every one.
type SMTPServer struct {
	ln   net.Listener
	tls  *tls.Config
	mu   sync.Mutex
	msgs []SMTPMessage
}

// SMTPMessage is one message an SMTPServer received: the MAIL and RCPT
// command lines as sent, the decoded AUTH PLAIN credentials, the DATA
// (headers and body, dot-terminated line excluded) and whether the
// session had switched to TLS.
type SMTPMessage struct {
	From, Auth string
	To         []string
	Data       string
	TLS        bool
}

// NewSMTPServer starts an SMTPServer, offering STARTTLS with tlsCfg when
// it is not nil, and stops it when the test ends.
func NewSMTPServer(t testing.TB, tlsCfg *tls.Config) *SMTPServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SMTPServer{ln: ln, tls: tlsCfg}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

// Port is the server's port on 127.0.0.1.
func (s *SMTPServer) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *SMTPServer) serve(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), c
	reply := func(line string) { w.Write([]byte(line + "\r\n")) }
	reply("220 test ESMTP")
	var m SMTPMessage
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		cmd := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch cmd {
		case "EHLO", "HELO":
			ext := "250-test\r\n250-AUTH PLAIN\r\n"
			if s.tls != nil && !m.TLS {
				ext += "250-STARTTLS\r\n"
			}
			w.Write([]byte(ext + "250 8BITMIME\r\n"))
		case "STARTTLS":
			reply("220 go ahead")
			tc := tls.Server(c, s.tls)
			if err := tc.Handshake(); err != nil {
				return
			}
			c, r, w = tc, bufio.NewReader(tc), tc
			m.TLS = true
		case "AUTH":
			f := strings.Fields(line)
			b, _ := base64.StdEncoding.DecodeString(f[len(f)-1])
			m.Auth = string(b)
			reply("235 ok")
		case "MAIL":
			m.From = line
			reply("250 ok")
		case "RCPT":
			m.To = append(m.To, line)
			reply("250 ok")
		case "DATA":
			reply("354 go")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(l)
			}
			m.Data = data.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, m)
			s.mu.Unlock()
			reply("250 queued")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 unknown")
		}
	}
}

// Messages returns the messages received so far.
func (s *SMTPServer) Messages() []SMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMTPMessage(nil), s.msgs...)
}

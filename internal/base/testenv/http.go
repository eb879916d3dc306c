package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// Call sends one API request and returns the status, the answer's headers
// and its body. body is sent as is when it is a string or []byte, encoded
// as JSON otherwise, and not at all when nil; a body goes with
// Content-Type: application/json. A non-empty token goes as
// Authorization: Bearer. header holds more headers as name, value pairs,
// set last (so they may replace the content type); "Host" sets the
// request's Host. A nil client means http.DefaultClient.
func Call(t testing.TB, c *http.Client, method, url, token string, body any, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewReader([]byte(b))
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encode request: %v", err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatalf("new request %s %s: %v", method, url, err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if http.CanonicalHeaderKey(header[i]) == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	if c == nil {
		c = http.DefaultClient
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	return res.StatusCode, res.Header, b
}

package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

const e2eAdmin = "e2e-admin-token-0123456789abcdef"

// authCall sends a request with a bearer token and returns the status and
// the answer.
func authCall(t testing.TB, method, url, token string, body any) (int, []byte) {
	t.Helper()
	code, _, b := testenv.Call(t, apiClient, method, url, token, body)
	return code, b
}

// TestClusterTokenRevocation: a token created through one node works on
// the other at once; revoked through the first, the second refuses it
// within 5 s (the contract), and both show the same audit log.
func TestClusterTokenRevocation(t *testing.T) {
	t.Parallel()
	dsn := testenv.MySQLDatabase(t)
	redisURL := testenv.RedisDB(t)
	env := []string{"CHIME_ADMIN_TOKEN=" + e2eAdmin}
	n1 := startNode(t, "n1", nodeConfig{DB: dsn, Redis: redisURL, NodeID: "n1", Env: env})
	n2 := startNode(t, "n2", nodeConfig{DB: dsn, Redis: redisURL, NodeID: "n2", Env: env})

	if code, b := authCall(t, "GET", n2.url("/api/v1/timers"), "", nil); code != http.StatusUnauthorized {
		t.Fatalf("no token on n2: %d %s", code, b)
	}
	code, b := authCall(t, "POST", n1.url("/api/v1/tokens"), e2eAdmin, map[string]any{"name": "ci", "role": "read"})
	if code != http.StatusCreated {
		t.Fatalf("create token on n1: %d %s", code, b)
	}
	var tok struct{ ID, Token string }
	json.Unmarshal(b, &tok)
	if code, b := authCall(t, "GET", n2.url("/api/v1/timers"), tok.Token, nil); code != http.StatusOK {
		t.Fatalf("the new token on n2: %d %s", code, b)
	}
	if code, b := authCall(t, "DELETE", n1.url("/api/v1/tokens/"+tok.ID), e2eAdmin, nil); code != http.StatusNoContent {
		t.Fatalf("revoke on n1: %d %s", code, b)
	}
	revoked := time.Now()
	if code, _ := authCall(t, "GET", n1.url("/api/v1/timers"), tok.Token, nil); code != http.StatusUnauthorized {
		t.Errorf("n1 accepts the token it revoked: %d", code)
	}
	waitUntil(t, 5*time.Second, "n2 refuses the revoked token", func() (bool, string) {
		code, _ := authCall(t, "GET", n2.url("/api/v1/timers"), tok.Token, nil)
		return code == http.StatusUnauthorized, http.StatusText(code)
	})
	t.Logf("n2 refused the revoked token %v after the revocation", time.Since(revoked).Round(time.Millisecond))

	code, b = authCall(t, "GET", n2.url("/api/v1/audit?target="+tok.ID), e2eAdmin, nil)
	var audit struct {
		Entries []struct {
			Action    string `json:"action"`
			TokenName string `json:"token_name"`
		} `json:"entries"`
	}
	json.Unmarshal(b, &audit)
	if code != http.StatusOK || len(audit.Entries) != 2 || audit.Entries[0].Action != "token.revoke" || audit.Entries[1].Action != "token.create" || audit.Entries[0].TokenName != "admin" {
		t.Errorf("audit on n2: %d %s", code, b)
	}
}

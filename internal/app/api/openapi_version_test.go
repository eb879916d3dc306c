package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
)

// TestOpenAPIVersion: GET /api/v1/openapi.json carries the server's build
// version as info.version, and is otherwise the document as written.
func TestOpenAPIVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ version, want string }{
		{"v1.2.3", "v1.2.3"},
		{"v0.0.0-20261201170000-6538665a0b1c+dirty", "v0.0.0-20261201170000-6538665a0b1c+dirty"},
		{"", "1"},
	} {
		e := newEnv(t, func(c *api.Config) { c.Version = tc.version })
		resp, err := http.Get(e.srv.URL + "/api/v1/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		var doc map[string]any
		if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatalf("version %q: %v", tc.version, err)
		}
		info, _ := doc["info"].(map[string]any)
		if got := info["version"]; got != tc.want {
			t.Errorf("version %q: info.version = %v, want %q", tc.version, got, tc.want)
		}
		var orig map[string]any
		if err := json.Unmarshal(api.OpenAPIDocument(), &orig); err != nil {
			t.Fatal(err)
		}
		orig["info"].(map[string]any)["version"] = tc.want
		a, _ := json.Marshal(orig)
		b, _ := json.Marshal(doc)
		if !bytes.Equal(a, b) {
			t.Errorf("version %q: the document differs beyond info.version", tc.version)
		}
	}
}

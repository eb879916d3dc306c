package server

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCallbackPolicyConfig: the server's egress policy reaches the API's
// validation; a bad prefix is a configuration error.
func TestCallbackPolicyConfig(t *testing.T) {
	base := startServer(t, Config{CallbackDeny: []string{"127.0.0.0/8"}, CallbackAllow: []string{"127.0.0.2"}})
	timer := func(url string) string {
		return `{"app":"a","name":"` + strings.ReplaceAll(url, "/", "_") + `","schedule":"@every 1h","action":{"type":"http","http":{"url":"` + url + `"}}}`
	}
	for url, want := range map[string]int{
		"http://127.0.0.1:9/":       400,
		"http://169.254.169.254/":   400,
		"http://127.0.0.2:9/":       201,
		"http://192.168.1.1:9/hook": 201,
	} {
		code, out := post(t, base+"/api/v1/timers", timer(url))
		if code != want {
			t.Errorf("%s: %d %v, want %d", url, code, out, want)
		}
		if want == 400 {
			if e, _ := out["error"].(map[string]any); e["field"] != "action.http.url" {
				t.Errorf("%s: %v", url, out)
			}
		}
	}
	err := Run(context.Background(), Config{CallbackAllow: []string{"10.0.0.0/33"}})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "callback allow list") {
		t.Fatalf("bad allow list: %v", err)
	}
}

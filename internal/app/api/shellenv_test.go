package api_test

import (
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
)

// TestShellEnvForbiddenNames: a shell action whose env names a variable
// that runs code (or is not a variable name) is refused with 400 on
// action.shell.env, at creation and by a PUT that adds it to a stored
// timer.
func TestShellEnvForbiddenNames(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.AllowShell = true })
	body := func(name, env string) map[string]any {
		return map[string]any{
			"app": "billing", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "shell", "shell": map[string]any{
				"command": "backup", "env": map[string]any{"MODE": "full", env: "x"},
			}},
		}
	}
	id := e.createTimer(t, body("stored", "OK_NAME")).ID
	for i, env := range []string{"LD_PRELOAD", "BASH_FUNC_echo%%", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS",
		"PERL5OPT", "PYTHONSTARTUP", "NODE_OPTIONS", "GIT_CONFIG_COUNT", "RUBYOPT", "JAVA_TOOL_OPTIONS", "1BAD", "A B"} {
		t.Run(env, func(t *testing.T) {
			for _, req := range []struct{ method, path string }{{"POST", "/api/v1/timers"}, {"PUT", "/api/v1/timers/" + id}} {
				name := "n" + string(rune('a'+i))
				if req.method == "PUT" {
					name = "stored"
				}
				code, b := e.do(t, req.method, req.path, body(name, env))
				if code != 400 || !strings.Contains(string(b), `"field":"action.shell.env"`) {
					t.Errorf("%s %s with env %q: %d %s, want 400 on action.shell.env", req.method, req.path, env, code, b)
				}
			}
		})
	}
}

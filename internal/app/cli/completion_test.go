package cli

import (
	"strings"
	"testing"
)

// TestCompletion: chime completion bash|zsh|fish prints a completion
// script (cobra's built-in command, neither disabled nor hidden), and
// chime --help lists it.
func TestCompletion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		shell string
		want  string
	}{
		{"bash", "__start_chime"},
		{"zsh", "#compdef chime"},
		{"fish", "complete -c chime"},
	}
	for _, tc := range tests {
		t.Run(tc.shell, func(t *testing.T) {
			t.Parallel()
			out, code := runCLI(t, "completion", tc.shell)
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d; output lacks %q:\n%.300s", code, tc.want, out)
			}
		})
	}
	out, code := runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "\n  completion ") {
		t.Errorf("chime --help (exit %d) does not list completion:\n%s", code, out)
	}
}

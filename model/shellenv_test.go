package model

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckShellEnvName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"GREETING", true},
		{"_X1", true},
		{"API_TOKEN", true},
		{"LANG", true},
		{"PYTHONISH", false},
		{"ld_preload", true}, // names are case sensitive: the loader reads LD_PRELOAD only
		{"CHIME_EXTRA", true},
		{"ENVIRONMENT", true},
		{"GITHUB_TOKEN", true},
		{"1X", false},
		{"", false},
		{"A-B", false},
		{"A=B", false},
		{"BASH_FUNC_x%%", false},
		{"LD_PRELOAD", false},
		{"LD_LIBRARY_PATH", false},
		{"LD_AUDIT", false},
		{"BASH_FUNC_ls", false},
		{"BASH_ENV", false},
		{"ENV", false},
		{"SHELLOPTS", false},
		{"BASHOPTS", false},
		{"PS4", false},
		{"IFS", false},
		{"PERL5OPT", false},
		{"PERL5LIB", false},
		{"PYTHONPATH", false},
		{"PYTHONSTARTUP", false},
		{"NODE_OPTIONS", false},
		{"GIT_CONFIG_COUNT", false},
		{"GIT_SSH_COMMAND", false},
		{"RUBYOPT", false},
		{"JAVA_TOOL_OPTIONS", false},
	} {
		err := CheckShellEnvName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckShellEnvName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		fe := CheckShellEnv(map[string]string{"FINE": "1", tc.name: "x"})
		if (fe == nil) != tc.ok {
			t.Errorf("CheckShellEnv(%q) = %v, want ok %v", tc.name, fe, tc.ok)
		}
		var ferr *FieldError
		if fe != nil && (!errors.As(fe, &ferr) || ferr.Field != "action.shell.env" || !strings.Contains(ferr.Message, tc.name)) {
			t.Errorf("CheckShellEnv(%q) = %#v, want a field error on action.shell.env naming it", tc.name, fe)
		}
	}
}

package model

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// shellEnvNameRE is the form of a shell action's environment variable
// names: a POSIX shell identifier.
var shellEnvNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// forbiddenShellEnv are the environment variables a shell action may not
// set, because a dynamic loader, a shell or an interpreter reads them to
// load or run code, or to print what it runs (LD_PRELOAD, BASH_ENV,
// SHELLOPTS=xtrace, PERL5OPT, GIT_CONFIG_*…): with them, whoever defines a
// timer runs code beyond its command, around --shell-allow. Names ending
// in "*" are prefixes. Names are compared as written: environment
// variable names are case sensitive.
var forbiddenShellEnv = []string{
	"LD_*", "BASH_FUNC_*", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS",
	"PERL5*", "PYTHON*", "NODE_OPTIONS", "GIT_*", "RUBYOPT", "JAVA_TOOL_OPTIONS",
}

// ForbiddenShellEnv returns the names and prefixes (ending in "*") of the
// environment variables shell actions may not set.
func ForbiddenShellEnv() []string { return append([]string(nil), forbiddenShellEnv...) }

// CheckShellEnvName returns an error saying why a shell action may not set
// the environment variable name, or nil when it may.
func CheckShellEnvName(name string) error {
	if !shellEnvNameRE.MatchString(name) {
		return fmt.Errorf("%q is not a valid variable name (letters, digits and _, not starting with a digit)", name)
	}
	for _, f := range forbiddenShellEnv {
		if p, ok := strings.CutSuffix(f, "*"); ok && strings.HasPrefix(name, p) || name == f {
			return fmt.Errorf("%s may not be set: the loader, a shell or an interpreter reads %s to run code (forbidden: %s)",
				name, f, strings.Join(forbiddenShellEnv, ", "))
		}
	}
	return nil
}

// CheckShellEnv returns a *FieldError on action.shell.env naming the first
// variable of env (in name order) that a shell action may not set, or nil.
func CheckShellEnv(env map[string]string) error {
	var bad []string
	for k := range env {
		if CheckShellEnvName(k) != nil {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	first := bad[0]
	for _, k := range bad[1:] {
		if k < first {
			first = k
		}
	}
	return Errorf("action.shell.env", "%v", CheckShellEnvName(first))
}

// NodeSecretEnv are the environment variables that hold a node's own
// secrets (--admin-token, --secret-key, --smtp-password, and the CLI's
// token): no child process a node starts gets them.
var NodeSecretEnv = []string{"CHIME_ADMIN_TOKEN", "CHIME_SECRET_KEY", "CHIME_SMTP_PASSWORD", "CHIME_TOKEN"}

// WithoutNodeSecrets returns env (NAME=value entries) without the
// variables of NodeSecretEnv.
func WithoutNodeSecrets(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(NodeSecretEnv, k) {
			out = append(out, kv)
		}
	}
	return out
}

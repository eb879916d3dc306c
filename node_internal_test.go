package chime

import "testing"

func TestDefaultDB(t *testing.T) {
	t.Parallel()
	for dir, want := range map[string]string{
		"chime-data":     "sqlite://./chime-data/chime.db",
		"/var/lib/chime": "sqlite:///var/lib/chime/chime.db",
		"./data/../x":    "sqlite://./x/chime.db",
	} {
		if got := DefaultDB(dir); got != want {
			t.Errorf("DefaultDB(%q) = %q, want %q", dir, got, want)
		}
	}
}

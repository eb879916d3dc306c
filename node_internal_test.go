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

func TestNodeIDChecked(t *testing.T) {
	t.Parallel()
	long := make([]byte, MaxNodeID+1)
	for i := range long {
		long[i] = 'n'
	}
	tests := []struct {
		id string
		ok bool
	}{
		{"node-1", true},
		{"nœud-ü", true},
		{string(long[:MaxNodeID]), true},
		{string(long), false},
		{"bad\x00id", false},
		{"bad\nid", false},
		{"bad\xffid", false},
	}
	for _, tc := range tests {
		got, err := NodeID(tc.id, t.TempDir())
		if (err == nil) != tc.ok || (tc.ok && got != tc.id) {
			t.Errorf("NodeID(%q) = %q, %v; want ok %v", tc.id, got, err, tc.ok)
		}
	}
	// A generated id is valid.
	dir := t.TempDir()
	id, err := NodeID("", dir)
	if err != nil || checkNodeID(id) != nil {
		t.Errorf("generated id %q: %v", id, err)
	}
	if again, err := NodeID("", dir); err != nil || again != id {
		t.Errorf("kept id = %q, %v; want %q", again, err, id)
	}
}

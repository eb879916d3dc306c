package cli

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTestClockOffset: CHIME_TEST_CLOCK_OFFSET shifts the clock the
// command line gives the node; unset or zero gives none (the machine's
// clock), and a value that is not a duration is a usage error.
func TestTestClockOffset(t *testing.T) {
	for _, tc := range []struct {
		env     string
		shifted time.Duration // 0: no clock given
		wantErr bool
	}{
		{env: ""},
		{env: "0s"},
		{env: "-5s", shifted: -5 * time.Second},
		{env: "1h", shifted: time.Hour},
		{env: "soon", wantErr: true},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(EnvTestClockOffset, tc.env)
			cfg, err := serveConfig(t, nil, "")
			if tc.wantErr {
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != 2 || !strings.Contains(err.Error(), EnvTestClockOffset) {
					t.Fatalf("err %v, want exit 2 naming %s", err, EnvTestClockOffset)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.shifted == 0 {
				if cfg.Clock != nil {
					t.Errorf("clock %v, want none", cfg.Clock)
				}
				return
			}
			if cfg.Clock == nil {
				t.Fatal("no clock")
			}
			if d := time.Until(cfg.Clock.Now()) - tc.shifted; d < -time.Second || d > time.Second {
				t.Errorf("clock off by %v from the offset %v", d, tc.shifted)
			}
		})
	}
}

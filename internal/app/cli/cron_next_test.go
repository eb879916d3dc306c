package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCronNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		code    int
		out     string
		errPart string
	}{
		{
			name: "quoted spec",
			args: []string{"cron", "next", "-n", "3", "--from", "2026-11-27T18:00:00Z", "0 0 9 * * MON-FRI"},
			out:  "2026-11-30T09:00:00Z\n2026-12-01T09:00:00Z\n2026-12-02T09:00:00Z\n",
		},
		{
			name: "spec in several args",
			args: []string{"cron", "next", "-n", "2", "--from", "2026-11-27T18:00:00Z", "0", "0", "9", "*", "*", "MON"},
			out:  "2026-11-30T09:00:00Z\n2026-12-07T09:00:00Z\n",
		},
		{
			name: "default count is five",
			args: []string{"cron", "next", "--from", "2026-01-01T00:00:00Z", "@daily"},
			out:  "2026-01-02T00:00:00Z\n2026-01-03T00:00:00Z\n2026-01-04T00:00:00Z\n2026-01-05T00:00:00Z\n2026-01-06T00:00:00Z\n",
		},
		{
			name: "tz flag and spring forward",
			args: []string{"cron", "next", "-n", "2", "--tz", "America/New_York", "--from", "2026-03-07T12:00:00Z", "30 2 * * *"},
			out:  "2026-03-08T03:00:00-04:00\n2026-03-09T02:30:00-04:00\n",
		},
		{
			name: "dst shift in a spring-forward gap",
			args: []string{"cron", "next", "-n", "2", "--tz", "America/New_York", "--dst", "shift", "--from", "2026-03-07T12:00:00Z", "30 2 * * *"},
			out:  "2026-03-08T03:30:00-04:00\n2026-03-09T02:30:00-04:00\n",
		},
		{
			name: "dst skip_gap",
			args: []string{"cron", "next", "-n", "1", "--tz", "America/New_York", "--dst", "skip_gap", "--from", "2026-03-07T12:00:00Z", "30 2 * * *"},
			out:  "2026-03-09T02:30:00-04:00\n",
		},
		{
			name: "dst both in a fall-back overlap",
			args: []string{"cron", "next", "-n", "2", "--tz", "America/New_York", "--dst", "both", "--from", "2026-10-31T12:00:00Z", "30 1 * * *"},
			out:  "2026-11-01T01:30:00-04:00\n2026-11-01T01:30:00-05:00\n",
		},
		{
			name:    "bad dst",
			args:    []string{"cron", "next", "--dst", "twice", "@daily"},
			code:    2,
			errPart: `--dst: must be one of default, shift, skip_gap, both, wall, got "twice"`,
		},
		{
			name: "CRON_TZ prefix wins over tz flag",
			args: []string{"cron", "next", "-n", "1", "--tz", "America/New_York", "--from", "2026-07-01T00:00:00Z", "CRON_TZ=Europe/London 0 0 12 * * *"},
			out:  "2026-07-01T12:00:00+01:00\n",
		},
		{
			name: "every anchored at from, sub-second",
			args: []string{"cron", "next", "-n", "2", "--from", "2026-01-01T00:00:00.5Z", "@every", "90m"},
			out:  "2026-01-01T01:30:00.5Z\n2026-01-01T03:00:00.5Z\n",
		},
		{
			name: "at in the past prints nothing",
			args: []string{"cron", "next", "--from", "2026-01-01T00:00:00Z", "@at 2020-01-01T00:00:00Z"},
			out:  "",
		},
		{
			name:    "bad spec",
			args:    []string{"cron", "next", "0 24 * * *"},
			code:    2,
			errPart: "hour: 24 is out of range 0-23",
		},
		{
			name:    "never fires",
			args:    []string{"cron", "next", "0 0 30 2 *"},
			code:    2,
			errPart: "never fires",
		},
		{
			name:    "bad tz",
			args:    []string{"cron", "next", "--tz", "Mars/Olympus", "@daily"},
			code:    2,
			errPart: `unknown time zone "Mars/Olympus"`,
		},
		{
			name:    "local tz refused",
			args:    []string{"cron", "next", "--tz", "Local", "@daily"},
			code:    2,
			errPart: `unknown time zone "Local"`,
		},
		{
			name:    "bad from",
			args:    []string{"cron", "next", "--from", "yesterday", "@daily"},
			code:    2,
			errPart: "--from",
		},
		{
			name:    "missing spec",
			args:    []string{"cron", "next"},
			code:    2,
			errPart: "missing SPEC",
		},
		{
			name:    "bad count",
			args:    []string{"cron", "next", "-n", "0", "@daily"},
			code:    2,
			errPart: "-n must be between 1 and",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := Main(context.Background(), tt.args, &out, &errOut)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d; stderr %q", code, tt.code, errOut.String())
			}
			if tt.code == 0 && out.String() != tt.out {
				t.Errorf("stdout\n%s\nwant\n%s", out.String(), tt.out)
			}
			if !strings.Contains(errOut.String(), tt.errPart) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tt.errPart)
			}
		})
	}
}

func TestCronNextDefaultFromIsNow(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"cron", "next", "-n", "3", "*/5 * * * * *"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d; stderr %q", code, errOut.String())
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 {
		t.Fatalf("got %d lines, want 3: %q", len(lines), out.String())
	}
}

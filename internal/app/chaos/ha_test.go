package chaos

import (
	"slices"
	"strings"
	"testing"
)

// TestCoordinationConfig: --coordination, --redis-ha, --db-ha and the
// partition fault are checked against the backend and each other, and
// they pick the default faults.
func TestCoordinationConfig(t *testing.T) {
	t.Parallel()
	const my, pg, rd = "mysql://root@127.0.0.1:3306/", "postgres://u@127.0.0.1:5432/db", "redis://127.0.0.1:6379/5"
	tests := []struct {
		name       string
		cfg        Config
		wantErr    string   // "" for none
		wantFaults []string // with wantErr "": among the default faults
		notFaults  []string // with wantErr "": not among them
	}{
		{name: "db without redis", cfg: Config{Backend: BackendMySQL, DB: my, Coordination: CoordinationDB},
			wantFaults: []string{FaultPartition}, notFaults: []string{FaultRedis, FaultRedisFailover, FaultDBFailover}},
		{name: "db with redis", cfg: Config{Backend: BackendMySQL, DB: my, Redis: rd, Coordination: CoordinationDB},
			wantErr: "--coordination db"},
		{name: "redis without redis", cfg: Config{Backend: BackendPostgres, DB: pg}, wantErr: "--redis"},
		{name: "bad mode", cfg: Config{Backend: BackendPostgres, DB: pg, Coordination: "raft"}, wantErr: "--coordination"},
		{name: "sqlite db mode", cfg: Config{Backend: BackendSQLite, Coordination: CoordinationDB}, wantErr: "server backend"},
		{name: "sentinel", cfg: Config{Backend: BackendPostgres, DB: pg, RedisHA: RedisHASentinel},
			wantFaults: []string{FaultRedisFailover}, notFaults: []string{FaultPartition, FaultRedis}},
		{name: "ha and redis", cfg: Config{Backend: BackendPostgres, DB: pg, Redis: rd, RedisHA: RedisHACluster}, wantErr: "--redis-ha"},
		{name: "bad ha", cfg: Config{Backend: BackendPostgres, DB: pg, RedisHA: "raft"}, wantErr: "--redis-ha"},
		{name: "db ha", cfg: Config{Backend: BackendPostgres, DBHA: true, Coordination: CoordinationDB},
			wantFaults: []string{FaultDBFailover}, notFaults: []string{FaultPartition, FaultStall, FaultDB}},
		{name: "db ha on mysql", cfg: Config{Backend: BackendMySQL, DBHA: true, Coordination: CoordinationDB}, wantErr: "--db-ha"},
		{name: "db-failover without db ha", cfg: Config{Backend: BackendPostgres, DB: pg, Coordination: CoordinationDB,
			Faults: []string{FaultDBFailover}}, wantErr: "db-failover needs --db-ha"},
		{name: "redis-failover without redis ha", cfg: Config{Backend: BackendPostgres, DB: pg, Redis: rd,
			FaultsFirst: []string{FaultRedisFailover}}, wantErr: "redis-failover needs --redis-ha"},
		{name: "partition with ha", cfg: Config{Backend: BackendPostgres, DBHA: true, Coordination: CoordinationDB,
			Faults: []string{FaultPartition}}, wantErr: "one-server URLs"},
		{name: "sqlite refuses partition", cfg: Config{Backend: BackendSQLite, Faults: []string{FaultPartition}},
			wantErr: "SQLite has no network to cut"},
		{name: "sqlite refuses partition first", cfg: Config{Backend: BackendSQLite, FaultsFirst: []string{FaultPartition}},
			wantErr: "SQLite has no network to cut"},
		{name: "sqlite defaults", cfg: Config{Backend: BackendSQLite}, notFaults: []string{FaultPartition}},
		{name: "mysql partition", cfg: Config{Backend: BackendMySQL, DB: my, Redis: rd, Faults: []string{FaultPartition}}},
		{name: "mysql defaults", cfg: Config{Backend: BackendMySQL, DB: my, Redis: rd}, wantFaults: []string{FaultPartition}},
		{name: "postgres partition without ports", cfg: Config{Backend: BackendPostgres, DB: "postgres://u@localhost/db?sslmode=disable",
			Redis: "redis://localhost/5", Faults: []string{FaultPartition}}},
		{name: "partition behind sentinel", cfg: Config{Backend: BackendMySQL, DB: my,
			Redis: "redis-sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster", Faults: []string{FaultPartition}},
			wantErr: "--redis"},
		{name: "partition of one node", cfg: Config{Backend: BackendMySQL, DB: my, Redis: rd,
			Nodes: 1, Faults: []string{FaultPartition}}, wantErr: "at least 2 nodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Defaults()
			err := cfg.validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("validate: %v, want an error containing %q", err, tc.wantErr)
			}
			for _, k := range tc.wantFaults {
				if !slices.Contains(cfg.Faults, k) {
					t.Errorf("default faults %v: want %s among them", cfg.Faults, k)
				}
			}
			for _, k := range tc.notFaults {
				if slices.Contains(cfg.Faults, k) {
					t.Errorf("default faults %v: want no %s", cfg.Faults, k)
				}
			}
		})
	}
}

// TestHarness: Fatal and Skip end the function under run with an error;
// Cleanup runs last first.
func TestHarness(t *testing.T) {
	t.Parallel()
	h := newHarness(t.TempDir())
	var order []int
	err := h.run(func() {
		h.Cleanup(func() { order = append(order, 1) })
		h.Cleanup(func() { order = append(order, 2) })
		h.Fatalf("no %s", "server")
		order = append(order, 99) // not reached
	})
	if err == nil || err.Error() != "chaos: no server" {
		t.Fatalf("run: %v, want chaos: no server", err)
	}
	if err := h.run(func() { h.Skip("redis-server not installed") }); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("run with Skip: %v", err)
	}
	if err := h.run(func() {}); err != nil {
		t.Fatalf("run: %v", err)
	}
	h.cleanup()
	if !slices.Equal(order, []int{2, 1}) {
		t.Fatalf("cleanups ran %v, want [2 1]", order)
	}
	if dir := h.TempDir(); dir == "" {
		t.Fatal("TempDir: empty")
	}
}

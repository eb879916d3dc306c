package redisurl

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		kind    string
		addrs   []string
		master  string
		db      int
		user    string
		pass    string
		wantErr string // a part of the error; empty: no error
	}{
		{url: "redis://127.0.0.1:6379/2", kind: Single, addrs: []string{"127.0.0.1:6379"}, db: 2},
		{url: "rediss://u:p%40ss@redis.example:6380/0", kind: Single, addrs: []string{"redis.example:6380"}, user: "u", pass: "p@ss"},
		{url: "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster", kind: Sentinel,
			addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}, master: "mymaster"},
		{url: "redis-sentinel://app:s3cret@[::1]:26379,h2:26380/prod?db=3", kind: Sentinel,
			addrs: []string{"[::1]:26379", "h2:26380"}, master: "prod", db: 3, user: "app", pass: "s3cret"},
		{url: "redis-cluster://h1:7000,h2:7001,h3:7002", kind: Cluster, addrs: []string{"h1:7000", "h2:7001", "h3:7002"}},
		{url: "redis-cluster://:pw@h1:7000,h2:7001", kind: Cluster, addrs: []string{"h1:7000", "h2:7001"}, pass: "pw"},
		{url: "redis-sentinel://h1:26379,h2:26379", wantErr: "master name"},
		{url: "redis-sentinel://h1:26379/", wantErr: "master name"},
		{url: "redis-sentinel://h1:26379/m?db=x", wantErr: "db="},
		{url: "redis-sentinel://h1:26379/m?master=x", wantErr: `unknown parameter "master"`},
		{url: "redis-cluster://h1:7000", wantErr: "at least two"},
		{url: "redis-cluster://h1:7000,h2:7001/0", wantErr: "no path"},
		{url: "redis-cluster://h1:7000,h2", wantErr: `host "h2"`},
		{url: "redis-cluster://h1:7000,h2:99999", wantErr: "bad port"},
		{url: "memcached://h:1", wantErr: "unknown scheme"},
		{url: "h1:6379", wantErr: "want redis://"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			c, err := Parse(tt.url)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrURL) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want ErrURL naming %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), ":pw@") {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Kind != tt.kind {
				t.Fatalf("Kind = %q, want %q", c.Kind, tt.kind)
			}
			var addrs []string
			var master, user, pass string
			var db int
			switch c.Kind {
			case Single:
				addrs, db, user, pass = []string{c.single.Addr}, c.single.DB, c.single.Username, c.single.Password
			case Sentinel:
				addrs, master, db, user, pass = c.failover.SentinelAddrs, c.failover.MasterName, c.failover.DB, c.failover.Username, c.failover.Password
			case Cluster:
				addrs, user, pass = c.cluster.Addrs, c.cluster.Username, c.cluster.Password
			}
			if !slices.Equal(addrs, tt.addrs) || master != tt.master || db != tt.db || user != tt.user || pass != tt.pass {
				t.Errorf("parsed addrs %v master %q db %d user %q pass %q; want %v %q %d %q %q",
					addrs, master, db, user, pass, tt.addrs, tt.master, tt.db, tt.user, tt.pass)
			}
			cl := c.New(Timeouts{})
			defer cl.Close()
			switch c.Kind {
			case Sentinel:
				if _, ok := cl.(*redis.Client); !ok { // a failover client is a *redis.Client
					t.Errorf("New = %T", cl)
				}
			case Cluster:
				if _, ok := cl.(*redis.ClusterClient); !ok {
					t.Errorf("New = %T, want *redis.ClusterClient", cl)
				}
			}
		})
	}
}

// FuzzParse: Parse never panics, and what it accepts makes a client.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"redis://h:1/0", "redis-sentinel://a:1,b:2/m?db=1", "redis-cluster://a:1,b:2", "redis-cluster://u:p@a:1,b:2?tls=true"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrURL) {
				t.Fatalf("error %v does not wrap ErrURL", err)
			}
			return
		}
		c.New(Timeouts{}).Close()
	})
}

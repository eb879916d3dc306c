package servers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The highly available Redis deployments of the failover tests: a Sentinel
// group and a Redis Cluster, each of processes of its own that the test
// starts from the redis-server binary (Debian's redis-server package, which
// scripts/services.sh installs) on free loopback ports in a temp dir, and
// kills when it ends. Without the binary the test is skipped, or fails
// under CHIME_TEST_REQUIRE_SERVERS=1.

// RedisProc is one redis-server process of a deployment.
type RedisProc struct {
	Port int
	cmd  *exec.Cmd
	bin  string
	args []string
	log  string
}

// Addr is the process's host:port.
func (p *RedisProc) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) }

// Kill sends SIGKILL to the process and waits for it to exit.
func (p *RedisProc) Kill() {
	kill(p.cmd)
}

// Restart starts a killed process again with the same arguments (its log
// appended to): a former Sentinel primary comes back and the Sentinels
// make it a replica of the new one; a Redis Cluster node rejoins from its
// nodes file, as a replica of the one promoted in its place.
func (p *RedisProc) Restart(t TB) {
	t.Helper()
	p.start(t)
}

// start starts the process and waits until its port answers PING.
func (p *RedisProc) start(t TB) {
	t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	startLogged(t, p.cmd, p.log, p.log)
	Eventually(t, 10*time.Second, p.Addr()+" to answer PING", func() (bool, string) {
		out, err := redisCmd(p.Addr(), "PING")
		if err != nil {
			return false, err.Error()
		}
		return len(out) == 1 && out[0] == "PONG", strings.Join(out, " ")
	})
}

// SentinelGroup is a primary, its replica and three Sentinels watching it
// as Master, with a 1 s down-after and quorum 2.
type SentinelGroup struct {
	Master    string
	Primary   *RedisProc
	Replica   *RedisProc
	Sentinels []*RedisProc
}

// URL is the group's chime URL: redis-sentinel://s1,s2,s3/Master.
func (g *SentinelGroup) URL() string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr()
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + g.Master
}

// PrimaryAddr asks the first Sentinel that answers where the primary is.
func (g *SentinelGroup) PrimaryAddr() (string, error) {
	var last error
	for _, s := range g.Sentinels {
		out, err := redisCmd(s.Addr(), "SENTINEL", "get-master-addr-by-name", g.Master)
		if err == nil && len(out) == 2 {
			return net.JoinHostPort(out[0], out[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel names the primary: %v", last)
}

// RedisSentinel starts a SentinelGroup and waits until every Sentinel
// knows the replica and the other Sentinels.
func RedisSentinel(t TB) *SentinelGroup {
	t.Helper()
	bin := redisBinary(t)
	dir := t.TempDir()
	g := &SentinelGroup{Master: "chimetest"}
	g.Primary = startRedis(t, bin, dir, "primary")
	g.Replica = startRedis(t, bin, dir, "replica", "--replicaof", "127.0.0.1", strconv.Itoa(g.Primary.Port))
	for i := range 3 {
		port := freePort(t, false)
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[3]s 1000\nsentinel failover-timeout %[3]s 5000\nsentinel parallel-syncs %[3]s 1\n",
			port, dir, g.Master, g.Primary.Port)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		g.Sentinels = append(g.Sentinels, startRedisAt(t, bin, dir, fmt.Sprintf("sentinel-%d", i), port, []string{conf, "--sentinel"}))
	}
	Eventually(t, 30*time.Second, "the Sentinels to see the replica and each other", func() (bool, string) {
		for _, s := range g.Sentinels {
			out, err := redisCmd(s.Addr(), "SENTINEL", "master", g.Master)
			if err != nil {
				return false, err.Error()
			}
			fields := map[string]string{}
			for i := 0; i+1 < len(out); i += 2 {
				fields[out[i]] = out[i+1]
			}
			if fields["num-slaves"] != "1" || fields["num-other-sentinels"] != "2" {
				return false, fmt.Sprintf("sentinel %s: %s replicas, %s other sentinels", s.Addr(), fields["num-slaves"], fields["num-other-sentinels"])
			}
		}
		return true, ""
	})
	return g
}

// RedisClusterDeployment is a Redis Cluster of three primaries, each with
// one replica, and a 2 s node timeout.
type RedisClusterDeployment struct {
	Nodes []*RedisProc // the first three were created as primaries
}

// URL is the cluster's chime URL, naming every node as a seed.
func (c *RedisClusterDeployment) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// Primaries returns the nodes that are primaries now, by CLUSTER NODES as
// the first live node answers it.
func (c *RedisClusterDeployment) Primaries() ([]*RedisProc, error) {
	for _, n := range c.Nodes {
		out, err := redisCmd(n.Addr(), "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		var ps []*RedisProc
		for _, line := range strings.Split(strings.Join(out, "\n"), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, m := range c.Nodes {
				if strings.HasPrefix(f[1], m.Addr()+"@") {
					ps = append(ps, m)
				}
			}
		}
		return ps, nil
	}
	return nil, fmt.Errorf("no cluster node answers")
}

// RedisCluster starts a RedisClusterDeployment and waits until every node
// reports the cluster ok.
func RedisCluster(t TB) *RedisClusterDeployment {
	t.Helper()
	bin := redisBinary(t)
	dir := t.TempDir()
	c := &RedisClusterDeployment{}
	for i := range 6 {
		port := freePort(t, true)
		c.Nodes = append(c.Nodes, startRedisAt(t, bin, dir, fmt.Sprintf("cluster-%d", i), port, []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port), "--cluster-node-timeout", "2000",
		}))
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	Eventually(t, 30*time.Second, "the cluster to be ok on every node", func() (bool, string) {
		for _, n := range c.Nodes {
			out, err := redisCmd(n.Addr(), "CLUSTER", "INFO")
			if err != nil {
				return false, err.Error()
			}
			if !strings.Contains(strings.Join(out, "\n"), "cluster_state:ok") {
				return false, n.Addr() + " not ok"
			}
		}
		return true, ""
	})
	return c
}

// redisBinary returns the path of redis-server, or skips t without it.
func redisBinary(t TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("redis-server not found but %s=1: install Debian's redis-server", EnvRequire)
		}
		t.Skip("redis-server not installed")
	}
	return bin
}

// startRedis starts a plain redis-server named name on a free port.
func startRedis(t TB, bin, dir, name string, extra ...string) *RedisProc {
	t.Helper()
	port := freePort(t, false)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, extra...)
	return startRedisAt(t, bin, dir, name, port, args)
}

// startRedisAt starts bin with args, logging to dir/name.log, waits until
// port answers PING, and kills it when t ends.
func startRedisAt(t TB, bin, dir, name string, port int, args []string) *RedisProc {
	t.Helper()
	p := &RedisProc{Port: port, bin: bin, args: args, log: filepath.Join(dir, name+".log")}
	p.start(t)
	return p
}

// freePort returns a loopback port nothing listens on, from 20000–30000
// (below the ephemeral range); with bus, port+10000 is free too (Redis
// Cluster's bus port).
func freePort(t TB, bus bool) int {
	t.Helper()
	free := func(p int) bool {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		l.Close()
		return true
	}
	for range 500 {
		p := 20000 + rand.IntN(10000)
		if free(p) && (!bus || free(p+10000)) {
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// redisCmd sends one command to addr and returns its reply as strings: a
// status or bulk string split into lines, an array's elements. An error
// reply is an error.
func redisCmd(addr string, args ...string) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	v, err := c.Do(ctx, cmd...).Result()
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case string:
		return strings.Split(strings.TrimRight(v, "\r\n"), "\n"), nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = fmt.Sprint(e)
		}
		return out, nil
	}
	return []string{fmt.Sprint(v)}, nil
}

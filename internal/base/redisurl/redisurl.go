// Package redisurl turns the Redis URLs that chime accepts into clients:
//
//	redis://[user:pass@]host:port[/db]       one server (rediss:// with TLS)
//	redis-sentinel://[user:pass@]host:port,host:port/MASTER[?db=N]
//	                                          a primary found through Sentinel,
//	                                          followed across its failovers
//	redis-cluster://[user:pass@]host:port,host:port
//	                                          Redis Cluster, from its seed nodes
//
// The forms with several hosts are chime's own: go-redis parses one host
// per URL (more as addr= parameters), while operators write a list of hosts
// as Sentinel and Cluster deployments name them. A user and password
// authenticate to the data servers; Sentinels that require a password of
// their own take ?sentinel_password= (and ?sentinel_username=). Query
// parameters of the sentinel and cluster forms are limited to db (sentinel
// only), sentinel_username, sentinel_password and tls=true; anything else is
// an error, so that a typo is not silently ignored.
package redisurl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrURL is wrapped by every error of Parse.
var ErrURL = errors.New("bad redis URL")

// Kinds of deployment a URL names.
const (
	Single   = "single"
	Sentinel = "sentinel"
	Cluster  = "cluster"
)

// ClusterReload is how often a cluster client reloads the map of hash
// slots to nodes while it is in use.
const ClusterReload = time.Second

// Timeouts are applied to every connection of a client.
type Timeouts struct {
	Dial, Read, Write time.Duration
}

// Config is a parsed URL: New makes clients of it.
type Config struct {
	Kind     string
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
}

// Parse parses u (see the package documentation). Its errors do not
// repeat u, which may hold a password.
func Parse(u string) (*Config, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return nil, fmt.Errorf("%w: want redis://, rediss://, redis-sentinel:// or redis-cluster://", ErrURL)
	}
	switch scheme {
	case "redis", "rediss", "unix":
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrURL, err)
		}
		return &Config{Kind: Single, single: o}, nil
	case "redis-sentinel", "redis-cluster":
	default:
		return nil, fmt.Errorf("%w: unknown scheme %q: want redis, rediss, redis-sentinel or redis-cluster", ErrURL, scheme)
	}
	var user, pass string
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		info := rest[:at]
		rest = rest[at+1:]
		if i := strings.IndexByte(info, ':'); i >= 0 {
			user, pass = info[:i], info[i+1:]
		} else {
			user = info
		}
		var err error
		if user, err = url.PathUnescape(user); err != nil {
			return nil, fmt.Errorf("%w: user: %v", ErrURL, err)
		}
		if pass, err = url.PathUnescape(pass); err != nil {
			return nil, fmt.Errorf("%w: password: %v", ErrURL, err)
		}
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	hostList, path, _ := strings.Cut(rest, "/")
	var addrs []string
	for _, h := range strings.Split(hostList, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(h))
		if err != nil || host == "" {
			return nil, fmt.Errorf("%w: host %q: want host:port", ErrURL, h)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%w: host %q: bad port", ErrURL, h)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", ErrURL, err)
	}
	var tlsConfig *tls.Config
	if v := q.Get("tls"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: tls=%q: want true or false", ErrURL, v)
		}
		if on {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	allowed := map[string]bool{"tls": true}
	if scheme == "redis-cluster" {
		for k := range q {
			if !allowed[k] {
				return nil, fmt.Errorf("%w: unknown parameter %q (redis-cluster takes tls)", ErrURL, k)
			}
		}
		if path != "" {
			return nil, fmt.Errorf("%w: a cluster URL has no path (Redis Cluster has one database)", ErrURL)
		}
		if len(addrs) < 2 {
			return nil, fmt.Errorf("%w: a cluster URL names at least two of its nodes, so that chime reaches the cluster while one is down", ErrURL)
		}
		return &Config{Kind: Cluster, cluster: &redis.ClusterOptions{Addrs: addrs, Username: user, Password: pass, TLSConfig: tlsConfig}}, nil
	}
	for _, k := range []string{"db", "sentinel_username", "sentinel_password"} {
		allowed[k] = true
	}
	for k := range q {
		if !allowed[k] {
			return nil, fmt.Errorf("%w: unknown parameter %q (redis-sentinel takes db, sentinel_username, sentinel_password, tls)", ErrURL, k)
		}
	}
	master := strings.Trim(path, "/")
	if master == "" || strings.Contains(master, "/") {
		return nil, fmt.Errorf("%w: name the primary's master name as the path: redis-sentinel://host:port,host:port/MASTER", ErrURL)
	}
	db := 0
	if v := q.Get("db"); v != "" {
		if db, err = strconv.Atoi(v); err != nil || db < 0 {
			return nil, fmt.Errorf("%w: db=%q: want a database number", ErrURL, v)
		}
	}
	return &Config{Kind: Sentinel, failover: &redis.FailoverOptions{
		MasterName: master, SentinelAddrs: addrs, DB: db,
		Username: user, Password: pass,
		SentinelUsername: q.Get("sentinel_username"), SentinelPassword: q.Get("sentinel_password"),
		TLSConfig: tlsConfig,
	}}, nil
}

// New returns a new client of c with the timeouts t (zero: go-redis's).
func (c *Config) New(t Timeouts) redis.UniversalClient {
	switch c.Kind {
	case Sentinel:
		o := *c.failover
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = t.Dial, t.Read, t.Write
		return redis.NewFailoverClient(&o)
	case Cluster:
		o := *c.cluster
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = t.Dial, t.Read, t.Write
		// The client learns which node serves a hash slot from MOVED
		// replies and from a reload of the cluster's slots when its map is
		// older than this. A primary that died answers nothing, so after
		// its replica is promoted only the reload moves the client on:
		// every second, one CLUSTER SLOTS, rather than go-redis's minute.
		o.ClusterStateReloadInterval = ClusterReload
		return redis.NewClusterClient(&o)
	}
	o := *c.single
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = t.Dial, t.Read, t.Write
	return redis.NewClient(&o)
}

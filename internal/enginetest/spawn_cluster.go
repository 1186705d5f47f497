package enginetest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterTimeout bounds creating a cluster and waiting for it to agree.
const clusterTimeout = 60 * time.Second

// RedisCluster is a Redis Cluster run by one test: masters and their
// replicas, each a [Process] on a spare loopback port, joined with
// redis-cli --cluster create. Nodes lists the masters first, then the
// replicas, in the order redis-cli was given them; after a failover a
// listed master may have become a replica.
type RedisCluster struct {
	t       testing.TB
	Nodes   []*Process
	masters int
	// announced[i] is the address node i announces to clients, when an
	// Announce option set one.
	announced []string
}

// RedisClusterOption adjusts StartRedisCluster.
type RedisClusterOption func(*redisClusterConfig)

type redisClusterConfig struct {
	announce func(node int, addr string) string
}

// Announce makes every node announce to clients (in CLUSTER SLOTS, SHARDS
// and NODES, MOVED and ASK redirections, and to its replicas) the address
// f returns for it instead of its own: f is called with the node's index
// and real "127.0.0.1:port" each time the node's port is picked, before
// the node starts, and returns a "127.0.0.1:port" that forwards to it (a
// TCP proxy, such as Toxiproxy, that the caller runs). Clients that follow
// the cluster's topology then reach each node through its proxy, so a
// fault on one proxy affects every client's link to that node; the
// cluster bus between the nodes stays direct, so failure detection and
// failover are not affected. [RedisCluster.URL] names the announced
// addresses.
func Announce(f func(node int, addr string) string) RedisClusterOption {
	return func(c *redisClusterConfig) { c.announce = f }
}

// StartRedisCluster runs masters cluster-enabled redis-servers plus
// replicas replicas of each, joins them into one cluster covering every
// slot, and returns once every node reports cluster_state:ok and every
// replica has synced with its master. Nodes time
// out peers after 2 s (cluster-node-timeout 2000), so a replica takes over
// a killed master within a few seconds. It skips the test (fails it when
// CI=true) if redis-server or redis-cli is missing; the nodes are stopped
// when the test ends.
func StartRedisCluster(t testing.TB, masters, replicas int, opts ...RedisClusterOption) *RedisCluster {
	t.Helper()
	var cfg redisClusterConfig
	for _, o := range opts {
		o(&cfg)
	}
	cli := findBinary(t, "redis-cli")
	n := masters * (1 + replicas)
	c := &RedisCluster{t: t, masters: masters, announced: make([]string, n)}
	ports := make([]int, n) // the real port each announced address forwards to
	for i := range n {
		c.Nodes = append(c.Nodes, startProcess(t, spec{
			name: "redis-server (cluster)",
			path: "redis-server",
			url:  func(addr string) string { return "redis://" + addr },
			args: func(port int, dir, _ string) []string {
				// A replica takes over however long its master was gone
				// (validity factor 0), and syncs without the diskless
				// delay, so a test may kill a master soon after start.
				args := append(redisArgs(port, dir), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
					"--cluster-node-timeout", "2000", "--cluster-replica-validity-factor", "0",
					"--repl-diskless-sync-delay", "0")
				if cfg.announce == nil {
					return args
				}
				// A restart keeps the port, and so the announced address;
				// a first start retried on another port asks again.
				if c.announced[i] == "" || ports[i] != port {
					c.announced[i] = cfg.announce(i, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
					ports[i] = port
				}
				host, aport, _ := net.SplitHostPort(c.announced[i])
				return append(args, "--cluster-announce-ip", host, "--cluster-announce-port", aport,
					"--cluster-announce-bus-port", strconv.Itoa(port+10000))
			},
			ready: redisReady,
		}, t.TempDir()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		c.waitOK(ctx, cli, n)
	}
	for _, n := range c.Nodes[masters:] {
		c.waitSynced(ctx, cli, n)
	}
	return c
}

// waitSynced polls replica n until its link to its master is up: before
// that, killing the master leaves the replica with no data to take over.
func (c *RedisCluster) waitSynced(ctx context.Context, cli string, n *Process) {
	c.t.Helper()
	host, port, _ := strings.Cut(n.Addr(), ":")
	var last string
	for {
		out, err := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "info", "replication").CombinedOutput()
		last = string(out)
		if err == nil && strings.Contains(last, "master_link_status:up") {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("redis cluster replica %s never synced with its master:\n%s", n.Addr(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitOK polls n until it reports cluster_state:ok with every slot served.
func (c *RedisCluster) waitOK(ctx context.Context, cli string, n *Process) {
	c.t.Helper()
	host, port, _ := strings.Cut(n.Addr(), ":")
	var last string
	for {
		out, err := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "cluster", "info").CombinedOutput()
		last = string(out)
		if err == nil && strings.Contains(last, "cluster_state:ok") && strings.Contains(last, "cluster_slots_ok:16384") {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("redis cluster node %s never reported cluster_state:ok:\n%s", n.Addr(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// URL names the cluster as rueidis.ParseURL reads it: the first master as
// the seed and every other node as a repeated addr= parameter; with
// [Announce], the announced addresses.
func (c *RedisCluster) URL() string {
	var b strings.Builder
	b.WriteString("redis://" + c.ClientAddr(0))
	for i := range c.Nodes[1:] {
		b.WriteString(map[bool]string{true: "?", false: "&"}[i == 0])
		b.WriteString("addr=" + c.ClientAddr(i+1))
	}
	return b.String()
}

// ClientAddr returns the address node i announces to clients: its own, or
// the one an [Announce] option gave it.
func (c *RedisCluster) ClientAddr(i int) string {
	if c.announced[i] != "" {
		return c.announced[i]
	}
	return c.Nodes[i].Addr()
}

// Masters returns the nodes started as masters.
func (c *RedisCluster) Masters() []*Process { return c.Nodes[:c.masters] }

// String lists the nodes' addresses, for messages.
func (c *RedisCluster) String() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return fmt.Sprintf("redis cluster %s", strings.Join(addrs, ","))
}

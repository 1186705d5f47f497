package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// RedisSentinel is a Redis master watched by Sentinel processes, each a
// [Process] on a spare loopback port, run by one test.
type RedisSentinel struct {
	Master    *Process
	Sentinels []*Process
	// MasterSet is the name the sentinels know the master by.
	MasterSet string
}

// StartRedisSentinel runs a redis-server master and sentinels
// `redis-server sentinel.conf --sentinel` processes monitoring it (quorum
// 1, the master judged down after 2s), each with a generated sentinel.conf
// in a directory of its own. It returns once all answer, and stops them
// when the test ends. It skips the test (fails it when CI=true) if
// redis-server is not installed.
func StartRedisSentinel(t testing.TB, sentinels int) *RedisSentinel {
	t.Helper()
	s := &RedisSentinel{Master: StartRedis(t), MasterSet: "sluicetest"}
	host, port, _ := strings.Cut(s.Master.Addr(), ":")
	for range sentinels {
		s.Sentinels = append(s.Sentinels, startProcess(t, spec{
			name: "redis-server (sentinel)",
			path: "redis-server",
			url:  func(addr string) string { return "redis://" + addr },
			args: func(p int, dir, _ string) []string {
				// Written afresh at each start: sentinel rewrites its file
				// with what it learnt, and the port may differ on a retry.
				conf := filepath.Join(dir, "sentinel.conf")
				body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\nlogfile \"\"\ndir %s\n"+
					"sentinel monitor %[3]s %s %s 1\nsentinel down-after-milliseconds %[3]s 2000\n"+
					"sentinel failover-timeout %[3]s 10000\n", p, dir, s.MasterSet, host, port)
				if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
					t.Errorf("write %s: %v", conf, err)
				}
				return []string{conf, "--sentinel"}
			},
			ready: redisReady,
		}, t.TempDir()))
	}
	return s
}

// URL names the group as rueidis.ParseURL and go-redis read it: the first
// sentinel, every other as a repeated addr= parameter, and master_set=.
func (s *RedisSentinel) URL() string {
	var b strings.Builder
	b.WriteString("redis://" + s.Sentinels[0].Addr() + "?")
	for _, p := range s.Sentinels[1:] {
		b.WriteString("addr=" + p.Addr() + "&")
	}
	b.WriteString("master_set=" + s.MasterSet)
	return b.String()
}

// String lists the master and the sentinels, for messages.
func (s *RedisSentinel) String() string {
	addrs := make([]string, len(s.Sentinels))
	for i, p := range s.Sentinels {
		addrs[i] = p.Addr()
	}
	return "redis master " + s.Master.Addr() + " watched by sentinels " + strings.Join(addrs, ",") +
		" as " + strconv.Quote(s.MasterSet)
}

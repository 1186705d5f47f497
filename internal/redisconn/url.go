package redisconn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/rueidis"
)

// sentinelRefresh is how often a Sentinel client asks the sentinels which
// server is master, besides following their +switch-master events: one
// missed event would otherwise bind it to a demoted master (see
// rueidis.SentinelOption.TopologyRefreshInterval).
const sentinelRefresh = 5 * time.Second

// ClientOption reads a Redis or Valkey URL, as rueidis.ParseURL (and
// go-redis) do, into the options Open connects with:
//
//	redis://[user:password@]host:port[/db]           one server
//	redis://host1:port?addr=host2:port&addr=...      a Cluster: any one
//	                                                 node is enough, each
//	                                                 addr= is another seed
//	redis://sentinel1:26379?addr=sentinel2:26379&master_set=mymaster
//	                                                 a Sentinel group: the
//	                                                 addresses are sentinels
//	rediss://...                                     any of these over TLS
//	unix:///run/redis.sock[?db=N]                    a local socket
//
// valkey:// and valkeys:// are the same as redis:// and rediss://. Whether
// the server is one node or a Cluster is learnt when connecting. The user
// and password are the data server's; sentinels are asked without them.
// With rediss://, the connection to the sentinels is TLS too, and the
// server's certificate is checked against caFile's authorities when
// caFile is set, the system's otherwise, and must name the
// URL's first host (every node is checked against that name).
func ClientOption(url, caFile string) (rueidis.ClientOption, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return opt, err
	}
	// Sluice's Redis calls are scripts and writes: the client-side cache
	// would only cost memory and invalidation traffic.
	opt.DisableCache = true
	if caFile != "" {
		if opt.TLSConfig == nil {
			return opt, errors.New("a CA file needs a rediss:// (or valkeys://) URL")
		}
		if opt.TLSConfig.RootCAs, err = ReadCAFile(caFile); err != nil {
			return opt, err
		}
	}
	if opt.Sentinel.MasterSet != "" {
		opt.Sentinel.Dialer = opt.Dialer
		if opt.TLSConfig != nil {
			opt.Sentinel.TLSConfig = opt.TLSConfig.Clone()
		}
		opt.Sentinel.TopologyRefreshInterval = sentinelRefresh
	}
	return opt, nil
}

// ReadCAFile reads a PEM file of certificate authorities. It fails when
// the file holds no certificate it can parse.
func ReadCAFile(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

package redisstore

import "github.com/sluicehq/sluice/ratelimit"

// KeyNameForTest returns the Redis key of key under p.
func KeyNameForTest(s *Store, p *ratelimit.Policy, key string) string {
	name, _ := s.keyName(p, key)
	return name
}

// ForgetScriptForTest makes the next EVALSHA miss, as after a restart.
func ForgetScriptForTest(s *Store) { s.sha = "0000000000000000000000000000000000000000" }

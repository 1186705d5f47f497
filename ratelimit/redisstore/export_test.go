package redisstore

import "github.com/sluicehq/sluice/ratelimit"

// KeyNameForTest returns the Redis key of key under p.
func KeyNameForTest(s *Store, p *ratelimit.Policy, key string) string {
	return s.keyName(p, key)
}

// ForgetScriptForTest makes the next EVALSHA miss, as after a restart.
func ForgetScriptForTest(s *Store) { s.sha = "0000000000000000000000000000000000000000" }

// ScriptForBench returns the script's SHA1 and the arguments of one
// allowed token bucket check (1,000,000 per second).
func ScriptForBench() (sha string, args []string) {
	return scriptSHA(), []string{"", "1", "b", "1000000", "1000000", "0", "0", "1", "a", "1", "1", "1", ""}
}

// SlotForTest returns the Cluster slot of key under p.
func SlotForTest(p *ratelimit.Policy, key string, s *Store) int {
	return int(slotOf(s.keyName(p, key)))
}

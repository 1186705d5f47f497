package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

// unavailableReplies are the Redis error replies of a server that cannot
// serve any request now, whatever it is: still loading its data, busy
// running a script, cut off from its master or from the cluster, or
// migrating the slot.
var unavailableReplies = []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"}

// classify wraps err, the failure of one script call, for callers. A
// Redis error reply is about the request (a script error, WRONGTYPE,
// CROSSSLOT, a MOVED the client did not follow) unless it is one of
// unavailableReplies; those and every failure to get a reply at all (a
// connection refused or lost, a timeout, no node serving the slot) wrap
// ratelimit.ErrUnavailable. A cancelled context is the caller's doing.
func classify(err error) error {
	if rerr, ok := rueidis.IsRedisErr(err); ok {
		code, _, _ := strings.Cut(rerr.Error(), " ")
		for _, u := range unavailableReplies {
			if code == u {
				return fmt.Errorf("redisstore: %w: %w", ratelimit.ErrUnavailable, err)
			}
		}
		return fmt.Errorf("redisstore: %w", err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("redisstore: %w", err)
	}
	return fmt.Errorf("redisstore: %w: %w", ratelimit.ErrUnavailable, err)
}

package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"

	"github.com/redis/rueidis"
)

// do runs c, coalesced with whatever other operations are waiting.
//
// Up to maxInflight script calls run at once. A caller that finds a free
// one leads: it runs a batch (the queued operations and its own) and, when
// the batch is done, hands the next batch to the first queued caller,
// which leads in turn. Nobody runs a background goroutine, and a caller
// never runs more than one batch. A caller whose ctx ends while its
// operation is still queued leaves the queue; once its operation has been
// taken into a batch it waits for the result (bounded by Options.Timeout),
// since the operation may take effect.
func (s *Store) do(ctx context.Context, c *call) error {
	s.mu.Lock()
	if s.inflight < s.maxInflight {
		s.inflight++
		n := min(len(s.pending), s.maxBatch-1)
		batch := append(s.pending[:n:n], c)
		s.takePending(n)
		s.mu.Unlock()
		s.lead(ctx, c, batch)
		return c.err
	}
	c.wake = make(chan struct{}, 1)
	c.queue = true
	s.pending = append(s.pending, c)
	s.mu.Unlock()

	select {
	case <-c.wake:
	case <-ctx.Done():
		s.mu.Lock()
		if c.queue {
			if i := slices.Index(s.pending, c); i >= 0 {
				s.pending = slices.Delete(s.pending, i, i+1)
			}
			s.mu.Unlock()
			return ctx.Err()
		}
		s.mu.Unlock()
		<-c.wake
	}
	if c.lead != nil {
		s.lead(ctx, c, c.lead)
	}
	return c.err
}

// takePending removes the first n queued operations; the caller holds mu.
func (s *Store) takePending(n int) {
	for _, p := range s.pending[:n] {
		p.queue = false
	}
	rest := copy(s.pending, s.pending[n:])
	clear(s.pending[rest:])
	s.pending = s.pending[:rest]
}

// lead runs batch, wakes its callers, and passes the lead on.
func (s *Store) lead(ctx context.Context, self *call, batch []*call) {
	s.exec(ctx, batch)
	for _, c := range batch {
		if c != self {
			c.wake <- struct{}{}
		}
	}
	s.mu.Lock()
	if len(s.pending) == 0 {
		s.inflight--
		s.mu.Unlock()
		return
	}
	n := min(len(s.pending), s.maxBatch)
	next := slices.Clone(s.pending[:n])
	s.takePending(n)
	s.mu.Unlock()
	next[0].lead = next
	next[0].wake <- struct{}{}
}

// exec runs a batch: one script call on a standalone server, one per slot
// on a Cluster, all sent at once.
func (s *Store) exec(ctx context.Context, batch []*call) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	groups := [][]*call{batch}
	if s.cluster && len(batch) > 1 {
		groups = groupBySlot(batch)
	}
	nowArg := ""
	if s.now != nil {
		nowArg = strconv.FormatInt(max(0, s.now().UnixMicro()), 10)
	}
	cmds := make(rueidis.Commands, len(groups))
	for i, g := range groups {
		cmds[i], groups[i] = s.command(g, nowArg, true)
	}
	results := s.client.DoMulti(ctx, cmds...)
	for i, g := range groups {
		res := results[i]
		if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
			var cmd rueidis.Completed
			cmd, g = s.command(g, nowArg, false)
			res = s.client.Do(ctx, cmd)
		}
		distribute(g, res)
	}
}

// policyArgs identifies a policy's parameters in a batch.
type policyArgs struct {
	alg                  ratelimit.Algorithm
	limit, period, burst int64
}

// fastGroup is the fast checks of one policy and cost in a batch.
type fastGroup struct {
	policy, cost string
	calls        []*call
}

// command builds the EVALSHA (or EVAL) of one batch, and returns the
// batch's calls in the order the script answers them: the fast checks
// first, grouped by policy and cost, then the others. Each distinct policy
// is sent once, and checks refer to it by index.
func (s *Store) command(g []*call, nowArg string, sha bool) (rueidis.Completed, []*call) {
	nkeys := 0
	for _, c := range g {
		nkeys += len(c.keys)
	}
	keys := make([]string, 0, nkeys)
	order := make([]*call, 0, len(g))
	args := make([]string, 2, 8+3*nkeys+2*len(g))
	args[0] = nowArg
	index := make(map[policyArgs]string, 2)
	policy := func(p *ratelimit.Policy) string {
		pa := policyArgs{p.Algorithm, p.Limit, int64(p.Period / time.Microsecond), p.Burst}
		i, ok := index[pa]
		if !ok {
			i = strconv.Itoa(len(index) + 1)
			index[pa] = i
			args = append(args, algCode(pa.alg), strconv.FormatInt(pa.limit, 10), strconv.FormatInt(pa.period, 10), strconv.FormatInt(pa.burst, 10))
		}
		return i
	}
	var groups []fastGroup
	slow := 0
	for _, c := range g {
		c.inFast = c.fast()
		if !c.inFast {
			for _, ch := range c.checks {
				policy(ch.policy)
			}
			slow++
			continue
		}
		ch := c.checks[0]
		pi := policy(ch.policy)
		j := slices.IndexFunc(groups, func(fg fastGroup) bool { return fg.policy == pi && fg.cost == ch.cost })
		if j < 0 {
			j = len(groups)
			groups = append(groups, fastGroup{policy: pi, cost: ch.cost})
		}
		groups[j].calls = append(groups[j].calls, c)
	}
	args[1] = strconv.Itoa(len(index))
	args = append(args, strconv.Itoa(len(groups)))
	for _, fg := range groups {
		args = append(args, fg.policy, fg.cost, strconv.Itoa(len(fg.calls)))
		for _, c := range fg.calls {
			keys = append(keys, c.keys[0])
			order = append(order, c)
		}
	}
	args = append(args, strconv.Itoa(slow))
	for _, c := range g {
		if c.inFast {
			continue
		}
		keys = append(keys, c.keys...)
		order = append(order, c)
		args = append(args, c.code, strconv.Itoa(len(c.checks)))
		for _, ch := range c.checks {
			args = append(args, policy(ch.policy), ch.cost, ch.extra)
		}
	}
	if sha {
		return s.client.B().Evalsha().Sha1(s.sha).Numkeys(int64(nkeys)).Key(keys...).Arg(args...).Build(), order
	}
	return s.client.B().Eval().Script(scriptSource).Numkeys(int64(nkeys)).Key(keys...).Arg(args...).Build(), order
}

// distribute hands each call of g, in the script's order, its part of res.
// A fast check's one number becomes the reply of the general form (status,
// then allowed, remaining, retry, reset and delay), so that the rest of
// the store reads every reply alike.
func distribute(g []*call, res rueidis.RedisResult) {
	if err := res.Error(); err != nil {
		err = classify(err)
		for _, c := range g {
			c.err = err
		}
		return
	}
	vals, err := res.AsIntSlice()
	if err == nil {
		want := 1
		for _, c := range g {
			if c.inFast {
				want += fastWidth(c.checks[0].policy)
			} else {
				want += 1 + 5*len(c.checks)
			}
		}
		if len(vals) != want {
			err = fmt.Errorf("redisstore: script replied %d numbers, want %d", len(vals), want)
		}
	}
	if err != nil {
		for _, c := range g {
			c.err = fmt.Errorf("redisstore: %w", err)
		}
		return
	}
	off := 1
	for _, c := range g {
		c.now = vals[0]
		if c.inFast {
			ch := c.checks[0]
			cost, _ := strconv.ParseInt(ch.cost, 10, 64)
			var d ratelimit.Decision
			if ch.policy.Algorithm == ratelimit.FixedWindow {
				d = windowDecision(ch.policy, cost, vals[off], vals[off+1])
			} else {
				d = fastDecision(ch.policy, cost, vals[off])
			}
			off += fastWidth(ch.policy)
			allowed := int64(0)
			if d.Allowed {
				allowed = 1
			}
			c.reply = []int64{allowed, allowed, d.Remaining, int64(d.RetryAfter / time.Microsecond), int64(d.ResetAfter / time.Microsecond), 0}
			continue
		}
		n := 1 + 5*len(c.checks)
		c.reply = vals[off : off+n : off+n]
		off += n
	}
}

func groupBySlot(batch []*call) [][]*call {
	var groups [][]*call
	index := map[int]int{}
	for _, c := range batch {
		i, ok := index[c.slot]
		if !ok {
			i = len(groups)
			index[c.slot] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// slotOf returns the Cluster slot of a key name, by Redis's rule: the
// hash tag between the first '{' and the next '}', when not empty, else the
// whole name.
func slotOf(name string) uint16 {
	if i := strings.IndexByte(name, '{'); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '}'); j > 0 {
			name = name[i+1 : i+1+j]
		}
	}
	return crc16(name) % 16384
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster uses for slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

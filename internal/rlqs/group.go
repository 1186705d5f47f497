package rlqs

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// One client's streams on one bucket count as one client when the
// bucket's limit is divided: on this node they write one row of the
// demand table (their demands summed, the latest expiry), get one share,
// and split it between them, each its part of the floor and the rest by
// its demand. So a client opening more streams on a bucket does not take
// more of it. (A client whose streams land on k nodes counts k times: one
// row per node.)

// group is one client's streams on one bucket of this node.
type group struct {
	members map[*stream]member
}

// member is one stream's demand in its group.
type member struct {
	rate    float64
	expires time.Time
}

// groupName is a client's name in the demand tables of its buckets on
// this node: unique across nodes, and not the client's address or key.
func groupName(node, client string) string {
	sum := sha256.Sum256([]byte(client))
	return node + "-" + hex.EncodeToString(sum[:8])
}

// groupDemand records st's demand for b in its client's group and
// returns the group's: the summed rate and latest expiry of its live
// members, how many they are, and whether st is one of them.
func (s *Server) groupDemand(st *stream, b *bucket, expires, now time.Time) (rate float64, exp time.Time, live int, self bool) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	g := s.group(b.key, st.clientID)
	g.members[st] = member{rate: b.rate, expires: expires}
	for p, m := range g.members {
		if m.expires.After(now) {
			rate += m.rate
			exp = later(exp, m.expires)
			live++
			self = self || p == st
		}
	}
	if live == 0 {
		exp = expires // every member expired: the row expires with them
	}
	return rate, exp, live, self
}

// group returns the group of client on bucket key, made if none; the
// caller holds peersMu.
func (s *Server) group(key, client string) *group {
	gs := s.groups[key]
	if gs == nil {
		gs = map[string]*group{}
		s.groups[key] = gs
	}
	g := gs[client]
	if g == nil {
		g = &group{members: map[*stream]member{}}
		gs[client] = g
	}
	return g
}

// leaveGroup drops st from its group on key and reports whether the
// group is now empty (its row can go).
func (s *Server) leaveGroup(st *stream, key string) (empty bool) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	gs := s.groups[key]
	g := gs[st.clientID]
	if g == nil {
		return true
	}
	delete(g.members, st)
	if len(g.members) > 0 {
		return false
	}
	delete(gs, st.clientID)
	if len(gs) == 0 {
		delete(s.groups, key)
	}
	return true
}

// splitShare is one member's part of its group's share: share alone,
// or with live members, each minFraction/live of it and the rest by
// demand (evenly when none has any). A member not live gets nothing.
func splitShare(share, mine, total float64, live int, self bool, minFraction float64) float64 {
	switch {
	case !self:
		return 0
	case live <= 1:
		return share
	case total <= 0:
		return share / float64(live)
	}
	return share * (minFraction/float64(live) + (1-minFraction)*mine/total)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

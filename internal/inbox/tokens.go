package inbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultTokenCacheTTL is how long a node trusts a user's inbox token
// generation before reading it again: the bound on how long a revocation
// made on one node takes to be honoured by every other.
const DefaultTokenCacheTTL = 10 * time.Second

// maxCachedGenerations bounds the generation cache; past it, expired
// entries go, and if none has expired the cache starts afresh.
const maxCachedGenerations = 100_000

// Token generations and the cache of them: see the package doc, "Tokens
// and their revocation".

// generations caches users' token generations. The zero value is empty
// and ready; it is safe for concurrent use.
type generations struct {
	mu sync.Mutex
	m  map[string]generation
}

type generation struct {
	gen  int64
	read time.Time // when the store said so
}

func (g *generations) get(user string, now time.Time, ttl time.Duration) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.m[user]
	if !ok || now.Sub(e.read) >= ttl || now.Before(e.read) {
		return 0, false
	}
	return e.gen, true
}

func (g *generations) put(user string, gen int64, now time.Time, ttl time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]generation{}
	}
	if e, ok := g.m[user]; ok && e.gen > gen {
		gen = e.gen // a revocation seen meanwhile stands
	}
	if _, ok := g.m[user]; !ok && len(g.m) >= maxCachedGenerations {
		for u, e := range g.m {
			if now.Sub(e.read) >= ttl {
				delete(g.m, u)
			}
		}
		if len(g.m) >= maxCachedGenerations {
			clear(g.m)
		}
	}
	g.m[user] = generation{gen: gen, read: now}
}

// TokenGeneration returns user's current inbox token generation, as this
// node last read it within Options.TokenCacheTTL; presented is the
// generation of the (signature-checked) token at hand: one newer than the
// cached generation makes it read the store again. A token is valid if
// its generation is the one returned.
func (s *Service) TokenGeneration(ctx context.Context, user string, presented int64) (int64, error) {
	now := s.opts.Now()
	if ttl := s.opts.TokenCacheTTL; ttl > 0 {
		if gen, ok := s.tokens.get(user, now, ttl); ok && presented <= gen {
			return gen, nil
		}
	}
	return s.readGeneration(ctx, user, now)
}

// MintGeneration returns the generation a token minted now for user
// carries: read from the store, never from the cache, so a token minted
// after a revocation on another node is of the new generation.
func (s *Service) MintGeneration(ctx context.Context, user string) (int64, error) {
	return s.readGeneration(ctx, user, s.opts.Now())
}

func (s *Service) readGeneration(ctx context.Context, user string, now time.Time) (int64, error) {
	gen, err := s.opts.Store.InboxTokenGeneration(ctx, user)
	if err != nil {
		return 0, fmt.Errorf("read inbox token generation: %w", err)
	}
	s.tokens.put(user, gen, now, s.opts.TokenCacheTTL)
	return gen, nil
}

// RevokeTokens revokes every inbox token of user minted so far and
// returns the new generation. This node refuses them at once; every
// other node within its TokenCacheTTL.
func (s *Service) RevokeTokens(ctx context.Context, user string) (int64, error) {
	now := s.opts.Now()
	gen, err := s.opts.Store.RevokeInboxTokens(ctx, user, now)
	if err != nil {
		return 0, fmt.Errorf("revoke inbox tokens: %w", err)
	}
	s.tokens.put(user, gen, now, s.opts.TokenCacheTTL)
	return gen, nil
}

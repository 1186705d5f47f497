package limits

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// RuleStore is where policies and blocks are kept (the record store).
type RuleStore interface {
	// ListPolicies returns every stored policy, by name.
	ListPolicies(ctx context.Context) ([]NamedPolicy, error)
	// PutPolicy creates or replaces p, reporting whether it was created.
	PutPolicy(ctx context.Context, p NamedPolicy) (created bool, err error)
	// DeletePolicy deletes the named policy; apperr NotFound if absent.
	DeletePolicy(ctx context.Context, name string) error
	// ListBlocks returns the blocks still active at now.
	ListBlocks(ctx context.Context, now time.Time) ([]Block, error)
	// PutBlock creates or replaces the block of (b.Key, b.Policy,
	// b.Domain).
	PutBlock(ctx context.Context, b Block) error
	// DeleteBlocks deletes key's blocks: every one when policy and domain
	// are nil, else those of *policy ("" is the every-policy block) and
	// of *domain ("" is the block without domain). It returns how many it
	// deleted.
	DeleteBlocks(ctx context.Context, key string, policy, domain *string) (int, error)
}

// DefaultRefresh is how often the retriever reloads rules when no change
// is announced.
const DefaultRefresh = 30 * time.Second

// RulesOptions configures NewRules.
type RulesOptions struct {
	// Store holds the rules. Required.
	Store RuleStore
	// Config are policies from the YAML configuration: they hide stored
	// policies of the same name and cannot be changed through the API.
	Config []NamedPolicy
	// Refresh is the periodic reload interval. If zero, DefaultRefresh.
	Refresh time.Duration
	// Logger receives reload failures. If nil, nothing is logged.
	Logger *slog.Logger
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// entry is one policy ready for checks.
type entry struct {
	NamedPolicy
	source Source
	eff    ratelimit.Policy // what the store applies; its address is stable per snapshot
}

// snapshot is one immutable version of the rules.
type snapshot struct {
	policies map[string]*entry
	blocks   map[string][]Block     // by key
	entries  map[blockEntry][]Block // Envoy's: by descriptor entry
	version  uint64
}

// blockEntry is the Envoy descriptor entry a block refuses.
type blockEntry struct{ key, value string }

// Rules is the in-memory cache of policies and blocks that every check
// reads, kept current by Run. It is safe for concurrent use; build it with
// NewRules.
type Rules struct {
	opts   RulesOptions
	log    *slog.Logger
	config map[string]*entry

	cur     atomic.Pointer[snapshot]
	kick    chan struct{}
	loadMu  sync.Mutex // one load at a time, so an older read never wins
	version atomic.Uint64
}

// NewRules validates the configured policies and returns a cache holding
// them alone until the first Load.
func NewRules(opts RulesOptions) (*Rules, error) {
	opts.Refresh = cmp.Or(opts.Refresh, DefaultRefresh)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Rules{opts: opts, log: opts.Logger, config: map[string]*entry{}, kick: make(chan struct{}, 1)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	for i, p := range opts.Config {
		if err := p.Validate(fmt.Sprintf("ratelimit.policies[%d].", i)); err != nil {
			return nil, fmt.Errorf("configured policy %q: %w", p.Name, describe(err))
		}
		if _, dup := r.config[p.Name]; dup {
			return nil, fmt.Errorf("configured policy %q is defined twice", p.Name)
		}
		r.config[p.Name] = newEntry(p, FromConfig)
	}
	r.install(nil, nil)
	return r, nil
}

func newEntry(p NamedPolicy, src Source) *entry {
	p = p.Normalize()
	return &entry{NamedPolicy: p, source: src, eff: p.Effective()}
}

// install makes a new snapshot of stored policies and blocks plus the
// configured policies current.
func (r *Rules) install(stored []NamedPolicy, blocks []Block) {
	s := &snapshot{policies: make(map[string]*entry, len(stored)+len(r.config)), blocks: map[string][]Block{},
		entries: map[blockEntry][]Block{}}
	for _, p := range stored {
		s.policies[p.Name] = newEntry(p, FromDatabase)
	}
	for name, e := range r.config {
		s.policies[name] = e
	}
	for _, b := range blocks {
		s.blocks[b.Key] = append(s.blocks[b.Key], b)
		if k, v, ok := b.Entry(); ok {
			s.entries[blockEntry{k, v}] = append(s.entries[blockEntry{k, v}], b)
		}
	}
	s.version = r.version.Add(1)
	r.cur.Store(s)
}

// Load reads the rules from the store now and installs them. On failure
// the previous rules stay in force.
func (r *Rules) Load(ctx context.Context) error {
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	ps, err := r.opts.Store.ListPolicies(ctx)
	if err != nil {
		return fmt.Errorf("load policies: %w", err)
	}
	bs, err := r.opts.Store.ListBlocks(ctx, r.opts.Now())
	if err != nil {
		return fmt.Errorf("load blocks: %w", err)
	}
	r.install(ps, bs)
	return nil
}

// Invalidate asks Run to reload soon (another node changed the rules). It
// never blocks.
func (r *Rules) Invalidate() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run reloads the rules every Refresh and whenever Invalidate is called,
// until ctx ends. A failed reload is logged and the previous rules stay.
func (r *Rules) Run(ctx context.Context) error {
	t := time.NewTicker(r.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.kick:
		}
		if err := r.Load(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("rate limit rules reload failed; previous rules stay in force", slog.Any("error", err))
		}
	}
}

// lookup returns the named policy's entry in the current rules.
func (r *Rules) lookup(name string) (*entry, bool) {
	e, ok := r.cur.Load().policies[name]
	return e, ok
}

// Policy returns the named policy and where it comes from.
func (r *Rules) Policy(name string) (NamedPolicy, Source, bool) {
	e, ok := r.lookup(name)
	if !ok {
		return NamedPolicy{}, "", false
	}
	return e.NamedPolicy, e.source, true
}

// Policies returns every policy in force, by name, with its source.
func (r *Rules) Policies() ([]NamedPolicy, []Source) {
	s := r.cur.Load()
	names := make([]string, 0, len(s.policies))
	for n := range s.policies {
		names = append(names, n)
	}
	slices.Sort(names)
	ps, srcs := make([]NamedPolicy, len(names)), make([]Source, len(names))
	for i, n := range names {
		ps[i], srcs[i] = s.policies[n].NamedPolicy, s.policies[n].source
	}
	return ps, srcs
}

// Blocks returns the blocks active at now, by key, policy then domain.
func (r *Rules) Blocks(now time.Time) []Block {
	var out []Block
	for _, bs := range r.cur.Load().blocks {
		for _, b := range bs {
			if b.Active(now) {
				out = append(out, b)
			}
		}
	}
	slices.SortFunc(out, func(a, b Block) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Domain, b.Domain))
	})
	return out
}

// block returns the active block of key under policy with the latest
// expiry, if any.
func (r *Rules) block(key, policy string, now time.Time) (Block, bool) {
	var found Block
	ok := false
	for _, b := range r.cur.Load().blocks[key] {
		if b.Applies(key, policy) && b.Active(now) && (!ok || b.ExpiresAt.After(found.ExpiresAt)) {
			found, ok = b, true
		}
	}
	return found, ok
}

// EntryBlocked reports whether an active block refuses Envoy requests in
// domain carrying the descriptor entry key=value, and until when (the
// latest expiry of those that do). It reads the in-memory rules and does
// not allocate, so the Envoy service asks it for every entry of every
// request.
func (r *Rules) EntryBlocked(domain, key, value string, now time.Time) (until time.Time, blocked bool) {
	s := r.cur.Load()
	if len(s.entries) == 0 {
		return time.Time{}, false
	}
	for _, b := range s.entries[blockEntry{key, value}] {
		if (b.Domain == "" || b.Domain == domain) && b.Active(now) && b.ExpiresAt.After(until) {
			until, blocked = b.ExpiresAt, true
		}
	}
	return until, blocked
}

// FailsClosed reports whether the named policy refuses while its store is
// down; Failover asks it.
func (r *Rules) FailsClosed(name string) bool {
	e, ok := r.lookup(name)
	return ok && e.OnStoreFailure == FailClosed
}

// SyncInterval returns the sync interval of the named policy when it says
// "sync": "local", else 0; LocalSync asks it.
func (r *Rules) SyncInterval(name string) time.Duration {
	e, ok := r.lookup(name)
	if !ok || e.Sync != SyncLocal {
		return 0
	}
	return time.Duration(e.SyncInterval)
}

// Version increases with every installed snapshot.
func (r *Rules) Version() uint64 { return r.cur.Load().version }

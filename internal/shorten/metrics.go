package shorten

// Metrics receives what the Service observes, for metrics (package
// internal/metrics binds it to Prometheus series). A nil *Metrics, or a nil
// field, records nothing. The functions are called concurrently, several on
// the redirect path of every lookup, so they must be cheap: an adapter
// resolves its label values once and binds each field to one series, so
// that a call costs an atomic add.
type Metrics struct {
	// Found, Expired, NotFound and Limited are told the result of each
	// redirect-path lookup: a live link, an expired one, an unknown code,
	// or an unknown-code lookup refused by the per-client limit.
	Found, Expired, NotFound, Limited func()
	// LocalHit and LocalMiss are told each lookup in the node's own cache.
	// SharedHit and SharedMiss are told each lookup in the shared cache,
	// and SharedError each failed get or set there.
	LocalHit, LocalMiss                func()
	SharedHit, SharedMiss, SharedError func()
	// StaleHit is told each lookup answered from an entry past its
	// CacheTTL (local or shared) because the store failed.
	StaleHit func()
	// Recorded is told each batch of hits written to the store: how many
	// were human clicks and how many bot hits.
	Recorded func(human, bots int)
	// BufferFull is told each hit dropped because the click buffer was
	// full (the redirect did not wait); StoreError how many hits a failed
	// store write dropped, those that did not fit back in the buffer for
	// the retry.
	BufferFull func()
	StoreError func(dropped int)
	// Created is told each link created, and Purged how many expired links
	// each purge transaction deleted.
	Created func()
	Purged  func(n int)
	// ClicksPurged is told how many raw clicks each click retention purge
	// transaction deleted.
	ClicksPurged func(n int)
	// ClickBuffer, if set, is called once by New with a function that
	// returns the hits waiting in the click buffer for the next flush, for
	// a gauge read at scrape time. That function is safe for concurrent
	// use.
	ClickBuffer func(pending func() int)
	// VisitSpent is told each visit a visit-limited link let through,
	// VisitRefused each human visit refused because none was left, and
	// Converted each conversion recorded (not its repeats).
	VisitSpent, VisitRefused, Converted func()
}

// bound returns a copy of m (which may be nil) whose nil event fields do
// nothing, so the redirect path calls them without a check.
func (m *Metrics) bound() Metrics {
	var b Metrics
	if m != nil {
		b = *m
	}
	nop, nopN := func() {}, func(int) {}
	for _, f := range []*func(){&b.Found, &b.Expired, &b.NotFound, &b.Limited, &b.LocalHit, &b.LocalMiss,
		&b.SharedHit, &b.SharedMiss, &b.SharedError, &b.StaleHit, &b.BufferFull, &b.Created} {
		if *f == nil {
			*f = nop
		}
	}
	for _, f := range []*func(){&b.VisitSpent, &b.VisitRefused, &b.Converted} {
		if *f == nil {
			*f = nop
		}
	}
	for _, f := range []*func(int){&b.StoreError, &b.Purged, &b.ClicksPurged} {
		if *f == nil {
			*f = nopN
		}
	}
	if b.Recorded == nil {
		b.Recorded = func(int, int) {}
	}
	return b
}

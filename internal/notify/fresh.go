package notify

import "sync"

// freshSet remembers the deliveries this node saved and published that no
// worker of this node has picked up yet. Their state is known without
// asking the store: queued, no attempt made, due now. A worker that takes
// a key from the set skips the state read for that job's first run here;
// every other run (a redelivery after a failed attempt or a crash, a
// retry, a republish by the recovery sweep, a job saved by another node)
// reads the delivery from the store as before, and so does a job the
// queue hands out a second time (Job.Redelivered: its first run may have
// sent it, on this node or another, without its acknowledgement arriving).
//
// Why this is safe: a delivery's state changes only through attempts on
// it, and an attempt needs a job. While the first job is in the queue,
// the only other job for the delivery is one the recovery sweep
// republishes, and the sweep republishes only deliveries older than the
// oldest job waiting in their queue (QueueHorizon), which this job is not.
// Take removes the key, so of two copies of a job on this node at most one
// skips the read.
//
// The set is bounded: past max keys it stops adding, and those jobs read
// the store. A key whose job never reaches this node's workers (another
// node took it) stays until it is evicted: at the bound, the set is
// cleared, which costs reads, never correctness.
type freshSet struct {
	mu   sync.Mutex
	keys map[DeliveryKey]struct{}
	max  int
}

func newFreshSet(max int) *freshSet {
	return &freshSet{keys: make(map[DeliveryKey]struct{}), max: max}
}

// add records keys of deliveries just saved as queued and published.
func (f *freshSet) add(keys ...DeliveryKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.keys)+len(keys) > f.max {
		// Keys of jobs other nodes took accumulate here; start over
		// rather than grow. The jobs of the dropped keys read the store.
		clear(f.keys)
	}
	for _, k := range keys {
		f.keys[k] = struct{}{}
	}
}

// take reports whether key was fresh, and forgets it.
func (f *freshSet) take(key DeliveryKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.keys[key]
	if ok {
		delete(f.keys, key)
	}
	return ok
}

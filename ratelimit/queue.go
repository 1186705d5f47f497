package ratelimit

// queue holds a sliding window log's or a concurrency limiter's entries,
// ordered by the instant each stops counting (oldest first), with their
// total cost.
type queue struct {
	e    []entry
	head int
	sum  int64
}

type entry struct {
	end int64 // Unix µs at which the entry stops counting
	n   int64 // cost
	id  string
}

func (q *queue) len() int { return len(q.e) - q.head }

// newest returns the latest end, or 0 for an empty queue.
func (q *queue) newest() int64 {
	if q.len() == 0 {
		return 0
	}
	return q.e[len(q.e)-1].end
}

// dropUntil removes the entries whose end is at or before now.
func (q *queue) dropUntil(now int64) {
	for q.head < len(q.e) && q.e[q.head].end <= now {
		q.sum -= q.e[q.head].n
		q.e[q.head] = entry{}
		q.head++
	}
	if q.head == len(q.e) {
		q.e, q.head = q.e[:0], 0
	} else if q.head > 32 && q.head > len(q.e)/2 {
		n := copy(q.e, q.e[q.head:])
		clear(q.e[n:])
		q.e, q.head = q.e[:n], 0
	}
}

// push appends an entry; entries of one instant and id are merged.
func (q *queue) push(end, n int64, id string) {
	if l := len(q.e); l > q.head && q.e[l-1].end == end && q.e[l-1].id == id {
		q.e[l-1].n += n
	} else {
		q.e = append(q.e, entry{end: end, n: n, id: id})
	}
	q.sum += n
}

// nth returns the end of the k-th unit of cost, counting from the oldest (k >= 1).
func (q *queue) nth(k int64) int64 {
	var cum int64
	for _, e := range q.e[q.head:] {
		cum += e.n
		if cum >= k {
			return e.end
		}
	}
	return q.newest()
}

// remove deletes the entries of lease id and reports the cost freed.
func (q *queue) remove(id string) int64 {
	var freed int64
	kept := q.e[:q.head]
	for _, e := range q.e[q.head:] {
		if e.id == id {
			freed += e.n
			continue
		}
		kept = append(kept, e)
	}
	clear(q.e[len(kept):])
	q.e = kept
	q.sum -= freed
	if q.head == len(q.e) {
		q.e, q.head = q.e[:0], 0
	}
	return freed
}

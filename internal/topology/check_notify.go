package topology

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Terminal statuses of a delivery, as docs/notifications.md lists them:
// nothing more will be sent. "queued" and "sending" are not; "canceled"
// (the API's spelling) follows a DELETE of the notification.
var terminal = map[string]bool{
	"sent": true, "delivered": true, "failed": true, "expired": true,
	"dead": true, "suppressed": true, "canceled": true,
}

// Terminal reports whether a delivery status read back from the API is
// final: sent, delivered, failed, expired, dead, suppressed or canceled.
func Terminal(status string) bool { return terminal[status] }

// notification is one accepted notification and what became of it.
type notification struct {
	key      string // ID, or user#seq when the API gave none
	accepted Op     // the first Notify op answered 202 or 200
	// final is the last Status op read per channel ("" for one without).
	final map[string]Op
	// deliveries are the Deliver ops per channel, in start order.
	deliveries map[string][]Op
}

// acceptedNotify reports whether a Notify op was accepted: 202, or 200 for a
// repeated request_id (the first notification's id).
func acceptedNotify(o Op) bool {
	return o.Err == "" && (o.Status == 202 || o.Status == 200)
}

// checkNotifications holds the notifications to docs/notifications.md.
//
// A notification is identified by the ID the API gave (Notify, Status and
// Deliver ops carry it), or, for ops without an ID, by User and Seq; a
// notification is accepted when one of its Notify ops answered 202 or 200,
// and it belongs to the rows of its first accepted Notify's Start.
//
//   - Lost: an accepted notification with no Status op answered (a read
//     that failed is ignored), or whose last Status op on some channel is
//     not [Terminal] (a 404 has no status: lost); and one whose Notify op
//     names a Channel (the channel a receiver watches for it) with no
//     Deliver op on that channel. Any loss is a violation.
//   - Duplicated: every Deliver op past the first for one (notification,
//     channel), accepted or not (a Notify that timed out may still have
//     been saved; a Deliver op without an ID is keyed by User and Seq).
//     The extra copies count in the rows of every fault that any
//     copy's Start falls in (the job in flight when the fault struck, or
//     its redelivery), or in the NoFault row when none does. More than
//     b.InFlight in a fault's row, or any outside faults, is a violation.
//   - OrderViolations: for each User, Channel and Category (one queue),
//     the pairs of accepted
//     notifications a, b where a's Notify ended before b's began
//     (sequential acceptance) but b's first delivery started before a's. A
//     pair counts in the rows of its two Notify and two first Deliver ops'
//     Starts. Any inversion is a violation: the harness runs on a NATS
//     server that keeps one user's order on one channel. A pair whose
//     earlier notification was retried on that channel (its last Status
//     op reads Attempts > 1) is not an inversion: later messages overtake
//     a retry on purpose (docs/notifications.md, "Ordering, and its
//     trade-off with retries"). A delivery handed to another node after
//     its node died is not a retry (no attempt failed) and stays judged.
//   - OTPp99 and OTPMax: the 99th percentile (nearest rank) and the
//     maximum of first Deliver Start minus accepted Notify End, over the
//     delivered notifications of Category "critical" accepted in the row.
//     A p99 over b.OTPp99, or a maximum over b.OTPMax (each when set), is
//     a violation; its sentence gives the slowest OTP's timeline: when it
//     was accepted and through which node, and when it was delivered.
func checkNotifications(r *run) {
	ns, find := r.notifications()
	for _, n := range ns {
		why := n.lost()
		if why == "" {
			continue
		}
		for _, i := range r.rowsAt(n.accepted.Start) {
			r.rows[i].Lost++
			r.violate("notification %s: %s %s (user %q seq %d, accepted at %s)",
				r.where(i), n.key, why, n.accepted.User, n.accepted.Seq, n.accepted.End.UTC().Format(time.RFC3339Nano))
		}
	}
	r.checkDuplicates(find)
	r.checkOrder(ns)
	r.otpLatency(ns)
}

// notifications gathers the accepted notifications, in acceptance order,
// with their statuses and deliveries.
// The function returned finds the notification of a Status or Deliver op
// (nil for one never accepted).
func (r *run) notifications() ([]*notification, func(Op) *notification) {
	var ns []*notification
	byKey := make(map[string]*notification)
	byUserSeq := make(map[string]*notification)
	for _, o := range r.ops[Notify] {
		if !acceptedNotify(o) {
			continue
		}
		k := notifyKey(o)
		if byKey[k] != nil {
			continue // a repeated request_id: the first answer stands
		}
		n := &notification{key: k, accepted: o, final: make(map[string]Op), deliveries: make(map[string][]Op)}
		ns = append(ns, n)
		byKey[k] = n
		byUserSeq[userSeq(o)] = n
	}
	find := func(o Op) *notification {
		if o.ID != "" {
			return byKey[o.ID]
		}
		return byUserSeq[userSeq(o)]
	}
	for _, o := range r.ops[Status] {
		if !o.OK() {
			continue // a failed read says nothing about the notification
		}
		if n := find(o); n != nil {
			n.final[o.Channel] = o // in start order: the last read wins
		}
	}
	for _, o := range r.ops[Deliver] {
		if n := find(o); n != nil {
			n.deliveries[o.Channel] = append(n.deliveries[o.Channel], o)
		}
	}
	return ns, find
}

func notifyKey(o Op) string {
	if o.ID != "" {
		return o.ID
	}
	return userSeq(o)
}

func userSeq(o Op) string { return fmt.Sprintf("%s#%d", o.User, o.Seq) }

// lost says why n is lost, or "" if it is not.
func (n *notification) lost() string {
	if len(n.final) == 0 {
		return "accepted but no status read back"
	}
	for _, ch := range sortedKeys(n.final) {
		if s := n.final[ch].Final; !Terminal(s) {
			return fmt.Sprintf("accepted but its %s status is %q, not terminal", channelName(ch), s)
		}
	}
	if ch := n.accepted.Channel; ch != "" && len(n.deliveries[ch]) == 0 {
		return fmt.Sprintf("accepted but never delivered on %s", ch)
	}
	return ""
}

func channelName(ch string) string {
	if ch == "" {
		return "final"
	}
	return ch
}

// firstDelivery is the first delivery of n on ch, if any.
func (n *notification) firstDelivery(ch string) (Op, bool) {
	if d := n.deliveries[ch]; len(d) > 0 {
		return d[0], true
	}
	return Op{}, false
}

// checkDuplicates counts every Deliver op, of an accepted notification or
// not (a Notify that timed out may still have been saved), past the first
// for one notification and channel.
func (r *run) checkDuplicates(find func(Op) *notification) {
	type copyKey struct{ notification, channel string }
	copies := make(map[copyKey][]Op)
	var order []copyKey
	for _, o := range r.ops[Deliver] {
		k := copyKey{notifyKey(o), o.Channel}
		if n := find(o); n != nil {
			k.notification = n.key
		}
		if copies[k] == nil {
			order = append(order, k)
		}
		copies[k] = append(copies[k], o)
	}
	perRow := make([]int, len(r.rows))
	for _, k := range order {
		c := copies[k]
		if len(c) < 2 {
			continue
		}
		starts := make([]time.Time, len(c))
		for i, o := range c {
			starts[i] = o.Start
		}
		for _, i := range r.rowsAt(starts...) {
			perRow[i] += len(c) - 1
			if i == r.none() {
				r.violate("notification %s: %s delivered %d times on %s", r.where(i), k.notification, len(c), k.channel)
			}
		}
	}
	for i, d := range perRow {
		r.rows[i].Duplicated = d
		if i != r.none() && d > r.bounds.InFlight {
			r.violate("notification %s: %d duplicate deliveries, over the bound of %d in flight", r.where(i), d, r.bounds.InFlight)
		}
	}
}

func (r *run) checkOrder(ns []*notification) {
	// One user's order holds per queue: a channel x category stream.
	type stream struct{ user, channel, category string }
	type item struct {
		n       *notification
		deliver Op
	}
	streams := make(map[stream][]item)
	var order []stream
	for _, n := range ns {
		for _, ch := range sortedKeys(n.deliveries) {
			s := stream{n.accepted.User, ch, n.accepted.Category}
			if streams[s] == nil {
				order = append(order, s)
			}
			d, _ := n.firstDelivery(ch)
			streams[s] = append(streams[s], item{n, d})
		}
	}
	perRow := make([]int, len(r.rows))
	example := make([]string, len(r.rows))
	for _, s := range order {
		items := streams[s]
		for i, a := range items {
			for _, b := range items[i+1:] {
				first, second := a, b
				if b.n.accepted.End.Before(a.n.accepted.Start) {
					first, second = b, a
				} else if !a.n.accepted.End.Before(b.n.accepted.Start) {
					continue // accepted concurrently: no order promised
				}
				if !second.deliver.Start.Before(first.deliver.Start) || first.n.final[s.channel].Attempts > 1 {
					continue
				}
				for _, row := range r.rowsAt(first.n.accepted.Start, second.n.accepted.Start, first.deliver.Start, second.deliver.Start) {
					if perRow[row]++; example[row] == "" {
						example[row] = fmt.Sprintf("user %q on %s (%s) got seq %d (%s) before seq %d (%s), accepted before it",
							s.user, s.channel, s.category, second.n.accepted.Seq, second.n.key, first.n.accepted.Seq, first.n.key)
					}
				}
			}
		}
	}
	for i, v := range perRow {
		r.rows[i].OrderViolations = v
		if v > 0 {
			r.violate("notification order %s: %d inversions, first: %s", r.where(i), v, example[i])
		}
	}
}

func (r *run) otpLatency(ns []*notification) {
	perRow := make([][]time.Duration, len(r.rows))
	type slow struct {
		n       *notification
		deliver Op
	}
	slowest := make([]slow, len(r.rows))
	for _, n := range ns {
		if n.accepted.Category != "critical" {
			continue
		}
		var first Op
		for _, ch := range sortedKeys(n.deliveries) {
			if d, ok := n.firstDelivery(ch); ok && (first.Start.IsZero() || d.Start.Before(first.Start)) {
				first = d
			}
		}
		if first.Start.IsZero() {
			continue
		}
		took := first.Start.Sub(n.accepted.End)
		for _, i := range r.rowsAt(n.accepted.Start) {
			perRow[i] = append(perRow[i], took)
			if s := slowest[i]; s.n == nil || took > s.deliver.Start.Sub(s.n.accepted.End) {
				slowest[i] = slow{n, first}
			}
		}
	}
	for i, ls := range perRow {
		r.rows[i].OTPp99 = percentile(ls, 0.99)
		if len(ls) > 0 {
			r.rows[i].OTPMax = slices.Max(ls)
		}
		over := ""
		switch row := r.rows[i]; {
		case r.bounds.OTPp99 > 0 && row.OTPp99 > r.bounds.OTPp99:
			over = fmt.Sprintf("p99 %s over the bound of %s", row.OTPp99, r.bounds.OTPp99)
		case r.bounds.OTPMax > 0 && row.OTPMax > r.bounds.OTPMax:
			over = fmt.Sprintf("slowest %s over the bound of %s", row.OTPMax, r.bounds.OTPMax)
		default:
			continue
		}
		s := slowest[i]
		r.violate("OTP latency %s: %s over %d OTPs; slowest %s (user %q seq %d) accepted via %s at %s, delivered on %s at %s, %s later",
			r.where(i), over, len(ls), s.n.key, s.n.accepted.User, s.n.accepted.Seq, cmp.Or(s.n.accepted.Via, "?"),
			s.n.accepted.End.UTC().Format(time.RFC3339Nano), s.deliver.Channel, s.deliver.Start.UTC().Format(time.RFC3339Nano),
			s.deliver.Start.Sub(s.n.accepted.End))
	}
}

// percentile returns the q-th quantile of ds by nearest rank (0 for none).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(q * float64(len(ds)))) // 1-based
	return ds[min(max(rank, 1), len(ds))-1]
}

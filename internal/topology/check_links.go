package topology

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// KillFault reports whether f kills a node, which loses the clicks its
// node had not flushed yet: its name contains "kill" ("kill -9 node 2").
func KillFault(f Fault) bool { return strings.Contains(strings.ToLower(f.Name), "kill") }

// link is what the history says of one code.
type link struct {
	created time.Time // End of the first successful Create
	deleted time.Time // Start of the first Delete attempt, zero if none
}

// live reports whether a redirect starting at t must find the link: after
// it was created and before anyone began to delete it.
func (l link) live(t time.Time) bool {
	return t.After(l.created) && (l.deleted.IsZero() || t.Before(l.deleted))
}

// checkLinks holds redirects and click counts to their promises.
//
//   - BadRedirects: a Redirect of a code that exists (a Create op
//     answered 2xx with that Code ended before the Redirect started, and
//     no Delete op of the code started before it) answered anything but
//     302: a 5xx, no answer, a 404. It counts in the rows of its Start;
//     any is a violation. Redirects of other codes are not judged.
//   - MissingClicks: per code with a Clicks op read back (the last one
//     answered 200 stands), the redirects answered 302 minus the Count, if
//     positive. More missing than b.ClickLoss × the number of [KillFault]
//     faults in the run (each killed node may lose its unflushed buffer)
//     is a violation. A code's missing clicks are charged, approximately,
//     to the rows its 302 redirects started in: only to its kill-fault
//     rows, when some of its redirects fell in a kill fault, else to every
//     row that holds one of them.
func checkLinks(r *run) {
	links := make(map[string]link)
	for _, o := range r.ops[Create] {
		if o.Code != "" && o.Err == "" && o.Status >= 200 && o.Status < 300 {
			if l, ok := links[o.Code]; !ok || opEnd(o).Before(l.created) {
				links[o.Code] = link{created: opEnd(o)}
			}
		}
	}
	for _, o := range r.ops[Delete] {
		if l, ok := links[o.Code]; ok && (l.deleted.IsZero() || o.Start.Before(l.deleted)) {
			l.deleted = o.Start
			links[o.Code] = l
		}
	}

	bad := make([]int, len(r.rows))
	example := make([]string, len(r.rows))
	redirected := make(map[string][]Op) // code: its redirects answered 302
	for _, o := range r.ops[Redirect] {
		if o.Status == http.StatusFound && o.Err == "" {
			redirected[o.Code] = append(redirected[o.Code], o)
			continue
		}
		if l, ok := links[o.Code]; !ok || !l.live(o.Start) {
			continue
		}
		for _, i := range r.rowsAt(o.Start) {
			if bad[i]++; example[i] == "" {
				example[i] = fmt.Sprintf("%s answered %s", o.Code, answer(o))
			}
		}
	}
	for i, n := range bad {
		r.rows[i].BadRedirects = n
		if n > 0 {
			r.violate("links %s: %d redirects of existing codes not answered 302, first: %s", r.where(i), n, example[i])
		}
	}

	r.checkClicks(redirected)
}

func (r *run) checkClicks(redirected map[string][]Op) {
	kills := 0
	for _, f := range r.faults {
		if KillFault(f) {
			kills++
		}
	}
	allowance := r.bounds.ClickLoss * int64(kills)

	counts := make(map[string]int64)
	for _, o := range r.ops[Clicks] {
		if o.Code != "" && o.Err == "" && o.Status == http.StatusOK {
			counts[o.Code] = o.Count // in start order: the last read wins
		}
	}
	for _, code := range sortedKeys(counts) {
		missing := int64(len(redirected[code])) - counts[code]
		if missing <= 0 {
			continue
		}
		rows := r.clickRows(redirected[code])
		for _, i := range rows {
			r.rows[i].MissingClicks += missing
		}
		if missing > allowance {
			where := make([]string, len(rows))
			for j, i := range rows {
				where[j] = r.where(i)
			}
			r.violate("clicks of %s: %d counted of %d redirects answered 302, %d missing (%s), over the allowance %d (%d per kill × %d kills)",
				code, counts[code], len(redirected[code]), missing, strings.Join(where, ", "), allowance, r.bounds.ClickLoss, kills)
		}
	}
}

// clickRows are the rows a code's missing clicks are charged to, from its
// redirects answered 302: its kill-fault rows if any, else all of them.
func (r *run) clickRows(redirects []Op) []int {
	seen := make(map[int]bool)
	var all, killed []int
	for _, o := range redirects {
		for _, i := range r.rowsAt(o.Start) {
			if seen[i] {
				continue
			}
			seen[i] = true
			all = append(all, i)
			if i != r.none() && KillFault(r.faults[i]) {
				killed = append(killed, i)
			}
		}
	}
	if len(killed) > 0 {
		all = killed
	}
	slices.Sort(all)
	return all
}

// answer describes what o got, for messages.
func answer(o Op) string {
	switch {
	case o.Err != "":
		return fmt.Sprintf("no answer (%s)", o.Err)
	case o.Status == 0:
		return "no answer"
	default:
		return fmt.Sprint(o.Status)
	}
}

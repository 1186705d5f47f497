package bench

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// WriteTable prints one line per result, aligned: scenario, target,
// workers, OK requests, errors, requests per second, p50, p90, p99, max and
// the scenario's note. First errors follow the table.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttarget\tworkers\tok\terrors\treq/s\tp50\tp90\tp99\tmax\t note")
	for _, r := range results {
		h := r.Latency
		if h == nil {
			h = &Histogram{}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t %s\n",
			r.Scenario, r.Target, r.Workers, r.OK, r.Errors, formatRate(r.Rate()),
			FormatDuration(h.Quantile(0.5)), FormatDuration(h.Quantile(0.9)),
			FormatDuration(h.Quantile(0.99)), FormatDuration(h.Max()), r.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.FirstError != "" {
			if _, err := fmt.Fprintf(w, "%s on %s, first error: %s\n", r.Scenario, r.Target, r.FirstError); err != nil {
				return err
			}
		}
	}
	return nil
}

func formatRate(r float64) string {
	if r >= 100 {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

// FormatDuration writes d with three significant digits in µs, ms or s.
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	default:
		return sig3(d.Seconds()) + "s"
	}
}

// sig3 writes x (at least 0) with about three significant digits and no
// exponent.
func sig3(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}

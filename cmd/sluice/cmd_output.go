package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/client"
)

// How client commands print, with --json and without: see the package
// doc, "Output".

// answer is the --json flag of a client command and the last JSON body
// its client received. It is safe for concurrent use.
type answer struct {
	on   bool
	mu   sync.Mutex
	last []byte
}

func (a *answer) String() string {
	if a == nil {
		return "false"
	}
	return fmt.Sprint(a.on)
}

func (a *answer) Set(v string) error {
	switch v {
	case "true", "":
		a.on = true
	case "false":
		a.on = false
	default:
		return fmt.Errorf("want true or false, not %q", v)
	}
	return nil
}

func (a *answer) IsBoolFlag() bool { return true }

// registerJSON adds --json to fs.
func registerJSON(fs *flag.FlagSet) *answer {
	a := &answer{}
	fs.Var(a, "json", "print the API's JSON answer (one document) instead of a table")
	return a
}

// answerOf is fs's --json flag; nil when fs has none.
func answerOf(fs *flag.FlagSet) *answer {
	if f := fs.Lookup("json"); f != nil {
		if a, ok := f.Value.(*answer); ok {
			return a
		}
	}
	return nil
}

// record makes c keep, in a, the body of every successful JSON answer.
func (a *answer) record(c *client.Client) {
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	cp := *hc
	cp.Transport = &recorder{next: cmpTransport(hc.Transport), a: a}
	c.HTTPClient = &cp
}

func cmpTransport(t http.RoundTripper) http.RoundTripper {
	if t == nil {
		return http.DefaultTransport
	}
	return t
}

// recorder is a transport that copies JSON answers' bodies into an answer
// as the client reads them.
type recorder struct {
	next http.RoundTripper
	a    *answer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	r.a.mu.Lock()
	r.a.last = nil
	r.a.mu.Unlock()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		resp.Body = &teeBody{ReadCloser: resp.Body, a: r.a}
	}
	return resp, nil
}

// maxRecorded bounds the answer kept for --json, as the client bounds
// what it reads.
const maxRecorded = 16 << 20

type teeBody struct {
	io.ReadCloser
	a *answer
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.a.mu.Lock()
		if len(t.a.last)+n <= maxRecorded {
			t.a.last = append(t.a.last, p[:n]...)
		}
		t.a.mu.Unlock()
	}
	return n, err
}

// lastAnswer is the last JSON answer received, indented; nil when none.
func (a *answer) lastAnswer() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(bytes.TrimSpace(a.last)) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, a.last, "", "  "); err != nil {
		return nil
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// show prints a command's answer: with --json the server's JSON answer
// (v, encoded, when the call answered none), else table through a
// tabwriter.
func show(env *environment, fs *flag.FlagSet, v any, table func(w io.Writer)) error {
	if a := answerOf(fs); a != nil && a.on {
		if raw := a.lastAnswer(); raw != nil {
			_, err := env.stdout.Write(raw)
			return err
		}
		return printJSON(env.stdout, v)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// showLines is show for an answer printed as lines of its own format, with
// no table alignment.
func showLines(env *environment, fs *flag.FlagSet, v any, lines func(w io.Writer)) error {
	if wantJSON(fs) {
		return show(env, fs, v, nil)
	}
	lines(env.stdout)
	return nil
}

// showValue is show for an answer the command composed (a delete's, or one
// built from several calls): --json encodes v.
func showValue(env *environment, fs *flag.FlagSet, v any, table func(w io.Writer)) error {
	if a := answerOf(fs); a != nil {
		a.mu.Lock()
		a.last = nil
		a.mu.Unlock()
	}
	return show(env, fs, v, table)
}

// wantJSON reports whether --json was given.
func wantJSON(fs *flag.FlagSet) bool {
	a := answerOf(fs)
	return a != nil && a.on
}

// row writes one tab-separated table row.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		fmt.Fprint(w, cell(c))
	}
	io.WriteString(w, "\n")
}

// cell is how a table shows a value: times in RFC 3339 (seconds), "-" for
// empty and zero ones.
func cell(v any) string {
	switch x := v.(type) {
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		return x.UTC().Format(time.RFC3339)
	case *time.Time:
		if x == nil {
			return "-"
		}
		return cell(*x)
	case string:
		if x == "" {
			return "-"
		}
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(x)
	case []string:
		if len(x) == 0 {
			return "-"
		}
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// nextPage tells, on stderr, how to get the page after one.
func nextPage(env *environment, fs *flag.FlagSet, cursor string) {
	if cursor != "" && !wantJSON(fs) {
		fmt.Fprintf(env.stderr, "more: --cursor %s\n", cursor)
	}
}

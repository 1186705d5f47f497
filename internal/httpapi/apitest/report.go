package apitest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
)

// Report writes the counts so far to w, headed by name (the package), and
// the disagreements after them. It returns code, or 1 when any exchange
// disagreed: what a TestMain exits with after m.Run returned code.
func (v *Validator) Report(w io.Writer, name string, code int) int {
	st := v.Stats()
	fmt.Fprintf(w, "%s: %v\n", name, st)
	if st.Failures == 0 {
		return code
	}
	fmt.Fprintf(w, "%s: these exchanges disagree with the OpenAPI document:\n", name)
	for _, f := range v.Failures() {
		fmt.Fprintln(w, "  "+f)
	}
	return 1
}

// Main is a TestMain's body: it runs the package's tests with
// http.DefaultClient's exchanges validated too (through transport, the
// package's validating transport), reports as Report does under name, and
// exits.
func (v *Validator) Main(m *testing.M, transport http.RoundTripper, name string) {
	http.DefaultClient.Transport = transport
	os.Exit(v.Report(os.Stderr, name, m.Run()))
}

package panics

import (
	"log/slog"
	"net/http"
)

// Handler returns next with its panics recovered and reported on
// surface. When next panicked before writing anything, fail writes the
// answer (a 500); after that the response is cut short as net/http does
// (the client sees it truncated). A panic with [http.ErrAbortHandler],
// net/http's way to abort a response on purpose, is not reported and
// goes on to the server.
func (r *Reporter) Handler(surface string, next http.Handler, fail http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tw := &writeTracker{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			r.Report(req.Context(), surface, v, slog.String("method", req.Method), slog.String("path", req.URL.Path))
			if tw.wrote {
				panic(http.ErrAbortHandler) // the answer is half sent: cut the connection
			}
			fail(w, req)
		}()
		next.ServeHTTP(tw, req)
	})
}

// writeTracker records whether a response has started. Unwrap lets
// http.ResponseController reach the server's writer (flushes, deadlines,
// hijacking, full duplex).
type writeTracker struct {
	http.ResponseWriter
	wrote bool
}

func (t *writeTracker) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		t.wrote = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *writeTracker) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for handlers that assert it.
func (t *writeTracker) Flush() {
	t.wrote = true
	_ = http.NewResponseController(t.ResponseWriter).Flush()
}

func (t *writeTracker) Unwrap() http.ResponseWriter { return t.ResponseWriter }

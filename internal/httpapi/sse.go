package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// sseStream writes Server-Sent Events to one client. The server's write
// timeout is lifted for a stream's life, so every write and flush has a
// deadline of its own (inboxWriteWait): a client that stops reading is
// cut off rather than holding the handler.
type sseStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE sends a stream's headers and its 200.
func startSSE(w http.ResponseWriter) *sseStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return &sseStream{w: w, rc: http.NewResponseController(w)}
}

// write buffers b (the ResponseWriter's buffer); flush sends what is
// buffered, so events waiting together go out in one write.
func (s *sseStream) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(inboxWriteWait))
	_, err := s.w.Write(b)
	return err
}

func (s *sseStream) flush() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(inboxWriteWait))
	return s.rc.Flush()
}

// send writes b and flushes it.
func (s *sseStream) send(b []byte) error {
	if err := s.write(b); err != nil {
		return err
	}
	return s.flush()
}

// sseBatch bounds the events a stream writes behind one another before
// one flush.
const sseBatch = 64

// sseLoop is every stream's loop once its first events are out: each
// value from c goes to write (which buffers its events), it and those
// already waiting behind it (up to sseBatch) then one flush, after which
// flushed (if set) is called; a heartbeat comment every beat while
// admitted says the stream may go on. It returns when the client goes
// (ctx) or is gone or stuck (a write fails), when c closes (the server
// shuts down, or the stream fell too far behind: the client reconnects),
// or when admitted says no.
func sseLoop[T any](ctx context.Context, out *sseStream, beat time.Duration, c <-chan T, admitted func() bool, write func(T) error, flushed func()) {
	heartbeat := time.NewTicker(beat)
	defer heartbeat.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			if !admitted() {
				return
			}
			err = out.send([]byte(": keepalive\n\n"))
		case v, ok := <-c:
			for n := 0; ok && err == nil; n++ {
				err = write(v)
				if n == sseBatch {
					break
				}
				select {
				case v, ok = <-c:
					continue
				default:
				}
				break
			}
			if err == nil {
				err = out.flush()
			}
			if err == nil && flushed != nil {
				flushed()
			}
			if !ok {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// sseEvent formats one event; id < 0 leaves the client's last event id.
// data is JSON, one line.
func sseEvent(id int64, event string, data []byte) []byte {
	b := make([]byte, 0, len(data)+48)
	if id >= 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// subscribeFailed answers a stream whose subscription was refused: past a
// cap on streams (capped), 429 with Retry-After, the answer written here;
// a server shutting down (closing), 503; else err as it is.
func subscribeFailed(w http.ResponseWriter, r *http.Request, err error, capped, closing bool) error {
	switch {
	case capped:
		w.Header().Set("Retry-After", "5")
		WriteProblem(w, r, NewProblem(http.StatusTooManyRequests, "too-many-streams", "", err.Error()))
		return nil
	case closing:
		return apperr.New(apperr.Unavailable, "this server is shutting down; reconnect")
	}
	return err
}

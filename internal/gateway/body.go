package gateway

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// errBodyShut is what reading a request body gets once its handler
// returned.
var errBodyShut = errors.New("gateway: request body read after its handler returned")

// drainWait bounds how long the end of an admitted request waits for the
// rest of a body its upstream did not read (at most net/http's 256 KiB;
// past that the server closes the connection instead).
const drainWait = 5 * time.Second

type bodyCtxKey struct{}

// handlerBody is a request body no read reaches once its handler has
// returned: net/http then reads the connection for the next request,
// and a read still going (the reverse proxy's Transport outlives the
// handler) would race it, the more so in full duplex.
//
// Only admitted requests are served in full duplex (serveDuplex, called just
// before the proxy): a refusal is written the way net/http writes any
// answer to a body left unread, the body (up to 256 KiB) drained first,
// the connection closed when more remains or it cannot be read. An
// admitted request whose upstream left part of the body unread has the
// rest drained by shut, before its handler returns: drained later, by
// net/http once the handler returned, its end starts the server's read
// of the next request under the server's own read of it, which panics
// ("invalid concurrent Body.Read call") and drops the connection.
type handlerBody struct {
	rc     io.ReadCloser
	http1  bool       // drain the rest on HTTP/1 only: HTTP/2 resets the stream
	mu     sync.Mutex // held by a read in progress, and for the fields below
	shot   bool
	eof    bool        // a read returned io.EOF
	closed bool        // the Transport closed it
	duplex atomic.Bool // admitted, served in full duplex
}

// newHandlerBody wraps r's body.
func newHandlerBody(r *http.Request) *handlerBody {
	// A client waiting for 100 Continue sends no body unless it is read:
	// net/http closes that connection after the answer, without draining.
	expect := strings.EqualFold(r.Header.Get("Expect"), "100-continue")
	return &handlerBody{rc: r.Body, http1: r.ProtoMajor == 1 && !expect}
}

func bodyFrom(r *http.Request) *handlerBody {
	b, _ := r.Context().Value(bodyCtxKey{}).(*handlerBody)
	return b
}

func (b *handlerBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shot || b.closed {
		return 0, errBodyShut
	}
	n, err := b.rc.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// Close ends the reads (the Transport calls it once it is done with the
// body); what remains is shut's to drain.
func (b *handlerBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// serveDuplex serves w's request in full duplex: the upstream's answer
// may start before the body was all forwarded (a stream begun before the
// body was read, or the proxy's last read of it, the one that sees its
// end). Without it, net/http drains and closes the body when the
// response's headers go out, under the proxy's feet, which then drops
// the upstream connection and cuts the response short.
func (b *handlerBody) serveDuplex(w http.ResponseWriter) {
	_ = http.NewResponseController(w).EnableFullDuplex()
	b.duplex.Store(true)
}

// shut, called as the handler returns, waits for a read in progress and
// fails those after; on HTTP/1 it drains what the upstream left of an
// admitted request's body. The answer goes out first: the client may
// wait for it before it sends the rest, which a read in progress (the
// Transport's, still forwarding) may be waiting for. A body that cannot
// be drained (the client stalled, or hung up) leaves the connection
// useless: it is closed, with http.ErrAbortHandler, which net/http does
// not log.
func (b *handlerBody) shut(w http.ResponseWriter) {
	if !b.duplex.Load() {
		b.mu.Lock()
		b.shot = true
		b.mu.Unlock()
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shot = true
	if !b.http1 || b.eof {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(drainWait))
	// Closing the server's body reads the rest, up to 256 KiB (more: it
	// gives up and the server closes the connection after the answer).
	if err := b.rc.Close(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

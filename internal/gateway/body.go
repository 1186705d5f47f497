package gateway

import (
	"errors"
	"io"
	"sync"
)

// errBodyShut is what reading a request body gets once its handler
// returned.
var errBodyShut = errors.New("gateway: request body read after its handler returned")

// handlerBody is a request body no read reaches once its handler has
// returned: net/http then reads the connection for the next request,
// and a read still going (the reverse proxy's Transport outlives the
// handler) would race it, the more so in full duplex.
type handlerBody struct {
	rc   io.ReadCloser
	mu   sync.Mutex // held by a read in progress
	shot bool
}

func (b *handlerBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shot {
		return 0, errBodyShut
	}
	return b.rc.Read(p)
}

// Close closes the body (the Transport does, once it is done with it).
func (b *handlerBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rc.Close()
}

// shut waits for a read in progress and fails those after: call it as
// the handler returns.
func (b *handlerBody) shut() {
	b.mu.Lock()
	b.shot = true
	b.mu.Unlock()
}

package gateway

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// A metered response the upstream compressed (the client asked for it
// with Accept-Encoding, which the gateway passes on) is decoded as it
// passes, for the meter only: the client gets the upstream's bytes
// unchanged. A body that still cannot be read charges the estimate and
// is counted (Options.UsageUnreadable), with one of these reasons.
const (
	unreadableEncoding = "encoding"  // an encoding the gateway does not decode
	unreadableCorrupt  = "corrupt"   // the encoded body does not decode
	unreadableTooLarge = "too_large" // a JSON body over 1 MiB, or over maxDecoded decoded
	unreadableInvalid  = "invalid"   // the cost found is no cost: negative, not a number
)

// maxDecoded bounds what one response decodes to (a stream's events
// included): past it the meter stops reading.
const maxDecoded = 64 << 20

// maxLayers bounds the encodings of one body.
const maxLayers = 3

// encodings returns h's Content-Encoding, in the order they were
// applied (identity left out), and whether the meter can decode them.
func encodings(h http.Header) ([]string, bool) {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for e := range strings.SplitSeq(v, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "", "identity":
			case "gzip", "x-gzip", "deflate", "br", "zstd":
				out = append(out, e)
			default:
				return nil, false
			}
		}
	}
	return out, len(out) <= maxLayers
}

// errDecoded ends the writes of a decoder that stopped reading.
var errDecoded = errors.New("gateway: the meter stopped decoding")

// decoder decodes a body written to it, on a goroutine of its own, and
// hands the decoded bytes to a sink. Its writes block until the bytes
// are decoded; once it stopped (the sink had enough, or the body is
// corrupt) they fail at once.
type decoder struct {
	pw   *io.PipeWriter
	done chan struct{}
	fail string // after done: the unreadable reason, if any
}

// newDecoder decodes encs (as encodings returns them) for sink, which
// returns false when it needs no more.
func newDecoder(encs []string, sink func([]byte) bool) *decoder {
	pr, pw := io.Pipe()
	d := &decoder{pw: pw, done: make(chan struct{})}
	go d.run(pr, encs, sink)
	return d
}

func (d *decoder) write(b []byte) { _, _ = d.pw.Write(b) }

// close ends the body and returns why it could not be read, if it
// could not.
func (d *decoder) close() string {
	_ = d.pw.Close()
	<-d.done
	return d.fail
}

func (d *decoder) run(pr *io.PipeReader, encs []string, sink func([]byte) bool) {
	defer close(d.done)
	defer pr.CloseWithError(errDecoded) // the writer goes on at once
	defer func() {
		if recover() != nil { // a decoder's bug must not take the gateway down
			d.fail = unreadableCorrupt
		}
	}()
	var r io.Reader = pr
	for i := len(encs) - 1; i >= 0; i-- {
		next, closeLayer, err := layer(encs[i], r)
		if err != nil {
			d.fail = unreadableCorrupt
			return
		}
		defer closeLayer()
		r = next
	}
	buf := make([]byte, 32<<10)
	total := 0
	for {
		n, err := r.Read(buf)
		if total += n; total > maxDecoded {
			d.fail = unreadableTooLarge
			return
		}
		if n > 0 && !sink(buf[:n]) {
			return
		}
		switch {
		case errors.Is(err, io.EOF):
			return
		case err != nil:
			d.fail = unreadableCorrupt
			return
		}
	}
}

// layer decodes one encoding of r.
func layer(enc string, r io.Reader) (io.Reader, func(), error) {
	switch enc {
	case "gzip", "x-gzip":
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return z, func() { _ = z.Close() }, nil
	case "deflate": // zlib (RFC 9110), or the raw deflate some servers send
		br := bufio.NewReader(r)
		if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint(h[0])<<8|uint(h[1]))%31 == 0 {
			z, err := zlib.NewReader(br)
			if err != nil {
				return nil, nil, err
			}
			return z, func() { _ = z.Close() }, nil
		}
		f := flate.NewReader(br)
		return f, func() { _ = f.Close() }, nil
	case "br":
		return brotli.NewReader(r), func() {}, nil
	case "zstd": // windows up to 8 MiB, as RFC 9659 has HTTP encoders use
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(8<<20))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	}
	return nil, nil, errors.New("gateway: unknown content encoding " + enc)
}

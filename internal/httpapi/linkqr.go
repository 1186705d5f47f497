package httpapi

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// linkQR answers GET /v1/links/{code}/qr?format=png|svg&size=: the QR
// code of the link's short URL with "?src=qr", so that scans are counted
// apart from clicks (source qr in the stats).
func (s *Server) linkQR(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = "png"
	}
	if format != "png" && format != "svg" {
		return fieldErrors(apperr.Invalid, "format", "must be png or svg")
	}
	size := shorten.DefaultQRSize
	if v := q.Get("size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < shorten.MinQRSize || n > shorten.MaxQRSize {
			return fieldErrors(apperr.Invalid, "size", "must be an integer from "+strconv.Itoa(shorten.MinQRSize)+" to "+strconv.Itoa(shorten.MaxQRSize)+" (pixels)")
		}
		size = n
	}
	l, err := s.opts.Links.Get(r.Context(), linkCaller(r), linkKey(r))
	if err != nil {
		return err
	}
	modules, err := shorten.QRModules(s.opts.Links.LinkURL(l) + "?" + shorten.QRMarker)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	ct := "image/png"
	if format == "svg" {
		ct = "image/svg+xml"
		err = shorten.WriteQRSVG(&buf, modules, size)
	} else {
		err = shorten.WriteQRPNG(&buf, modules, size)
	}
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "private, max-age=86400") // a link's code, hence its QR code, never changes
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// registerProviders adds the delivery receipt route. It takes no API key:
// providers cannot send one, and each provider's own signature (Twilio's
// X-Twilio-Signature) authenticates the callback instead.
func (s *Server) registerProviders() {
	s.Handle("POST /v1/providers/{provider}/callbacks", public, withService[callbackReceiver](s.opts.Notify, noNotify)(providerCallback))
}

func providerCallback(svc callbackReceiver, w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return apperr.Wrap(apperr.Invalid, err, "the callback body is not a form")
	}
	cb := notify.Callback{RequestURI: r.URL.RequestURI(), Header: r.Header, Form: r.PostForm}
	if err := svc.Callback(r.Context(), r.PathValue("provider"), cb); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

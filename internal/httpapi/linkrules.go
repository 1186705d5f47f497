package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
)

// maxRulesBody bounds a PUT of rules, below the server's body limit: 20
// rules of ten 2 KiB URLs each, with room for their conditions.
const maxRulesBody = 512 << 10

func (s *Server) registerLinkRules() {
	s.Handle("PUT /v1/links/{code}/rules", auth.ScopeLinksWrite, s.putLinkRules)
}

type linkRulesRequest struct {
	Rules []shorten.Rule `json:"rules"`
}

// putLinkRules answers PUT /v1/links/{code}/rules: the rules replace the
// link's (an empty list removes them), and the link is returned with them.
func (s *Server) putLinkRules(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxRulesBody)
	var req linkRulesRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	l, err := s.opts.Links.SetRules(r.Context(), linkCaller(r), linkKey(r), req.Rules)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toLinkResponse(l))
	return nil
}

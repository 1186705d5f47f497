package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
)

// maxDomainBody bounds a POST /v1/domains: a name and a fallback URL.
const maxDomainBody = 8 << 10

func (s *Server) registerDomains() {
	s.Handle("POST /v1/domains", auth.ScopeLinksWrite, s.createDomain)
	s.Handle("GET /v1/domains", auth.ScopeLinksWrite, s.listDomains)
	s.Handle("GET /v1/domains/{domain}", auth.ScopeLinksWrite, s.getDomain)
	s.Handle("PATCH /v1/domains/{domain}", auth.ScopeLinksWrite, s.updateDomain)
	s.Handle("DELETE /v1/domains/{domain}", auth.ScopeLinksWrite, s.deleteDomain)
	s.Handle("POST /v1/domains/{domain}/verify", auth.ScopeLinksWrite, s.verifyDomain)
}

type domainRequest struct {
	Domain      string `json:"domain"`
	FallbackURL string `json:"fallback_url"`
}

type domainResponse struct {
	Domain      string    `json:"domain"`
	FallbackURL string    `json:"fallback_url"`
	CreatedAt   time.Time `json:"created_at"`
	// Verified says the domain serves redirects; VerificationRecord and
	// VerificationToken say how to prove control while it does not.
	Verified           bool       `json:"verified"`
	VerifiedAt         *time.Time `json:"verified_at"`
	VerificationRecord string     `json:"verification_record"`
	VerificationToken  string     `json:"verification_token"`
	// VerificationError is, in a POST .../verify answer, why the domain
	// is still not verified.
	VerificationError string `json:"verification_error,omitempty"`
}

func toDomainResponse(d shorten.Domain) domainResponse {
	r := domainResponse{Domain: d.Name, FallbackURL: d.FallbackURL, CreatedAt: d.CreatedAt.UTC(), Verified: d.Verified(),
		VerificationRecord: shorten.VerificationRecord(d.Name), VerificationToken: d.Token}
	if d.Verified() {
		at := d.VerifiedAt.UTC()
		r.VerifiedAt = &at
	}
	return r
}

// createDomain answers POST /v1/domains: 201 with the domain as stored
// (its name in lower-case ASCII).
func (s *Server) createDomain(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxDomainBody)
	var req domainRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	d, err := s.opts.Links.CreateDomain(r.Context(), linkCaller(r), req.Domain, req.FallbackURL)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/domains/"+url.PathEscape(d.Name))
	writeJSON(w, http.StatusCreated, toDomainResponse(d))
	return nil
}

// listDomains answers GET /v1/domains: the caller's domains (every one
// for an admin), by name.
func (s *Server) listDomains(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	ds, err := s.opts.Links.Domains(r.Context(), linkCaller(r))
	if err != nil {
		return err
	}
	items := make([]domainResponse, len(ds))
	for i, d := range ds {
		items[i] = toDomainResponse(d)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

// getDomain answers GET /v1/domains/{domain}: 404 for a domain the caller
// does not own.
func (s *Server) getDomain(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	d, err := s.opts.Links.Domain(r.Context(), linkCaller(r), r.PathValue("domain"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toDomainResponse(d))
	return nil
}

// domainUpdate is a PATCH /v1/domains/{domain}: the fallback URL is the
// one thing a domain changes ("" or null clears it); its name is its
// identity.
type domainUpdate struct {
	FallbackURL *string `json:"fallback_url"`
}

// updateDomain answers PATCH /v1/domains/{domain}: 200 with the domain.
func (s *Server) updateDomain(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxDomainBody)
	buf, err := readBody(r)
	if err != nil {
		return err
	}
	defer putBody(buf)
	var upd domainUpdate
	if err := decodeBody(buf.Bytes(), &upd); err != nil {
		return err
	}
	// null clears the fallback as "" does; an absent field changes
	// nothing and is refused rather than taken for a clear.
	var present map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &present); err != nil {
		return jsonError(err)
	}
	if _, ok := present["fallback_url"]; !ok {
		return &apperr.Error{Code: apperr.Unprocessable, Message: "nothing to change",
			Fields: []apperr.FieldError{{Field: "fallback_url", Detail: "is required (null or \"\" clears it)"}}}
	}
	var url string
	if upd.FallbackURL != nil {
		url = *upd.FallbackURL
	}
	d, err := s.opts.Links.UpdateDomain(r.Context(), linkCaller(r), r.PathValue("domain"), url)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toDomainResponse(d))
	return nil
}

// deleteDomain answers DELETE /v1/domains/{domain}: 204, 404 for a
// domain the caller does not own, 409 while links are on it.
func (s *Server) deleteDomain(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	if err := s.opts.Links.DeleteDomain(r.Context(), linkCaller(r), r.PathValue("domain")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// verifyDomain answers POST /v1/domains/{domain}/verify: it looks the
// TXT record up now and answers 200 with the domain, "verified" true once
// the record holds its token, else false with "verification_error"; 404
// for a domain the caller has no claim of, 409 when another caller's
// claim was verified first.
func (s *Server) verifyDomain(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	d, why, err := s.opts.Links.VerifyDomain(r.Context(), linkCaller(r), r.PathValue("domain"))
	if err != nil {
		return err
	}
	resp := toDomainResponse(d)
	resp.VerificationError = why
	writeJSON(w, http.StatusOK, resp)
	return nil
}

package main

import (
	"io"

	"github.com/sluicehq/sluice/client"
)

// domainTable shows custom short domains, one a row.
func domainTable(ds ...client.Domain) func(io.Writer) {
	return func(w io.Writer) {
		row(w, "DOMAIN", "VERIFIED", "CREATED", "FALLBACK URL", "VERIFICATION RECORD", "TOKEN")
		for _, d := range ds {
			verified := cell(d.VerifiedAt)
			if !d.Verified {
				verified = "no"
			} else if d.VerifiedAt == nil {
				verified = "yes"
			}
			row(w, d.Domain, verified, d.CreatedAt, d.FallbackURL, d.VerificationRecord, d.VerificationToken)
		}
	}
}

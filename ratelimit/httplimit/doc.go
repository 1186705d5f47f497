// Package httplimit is rate limiting for net/http: response headers now,
// and middleware that identifies clients, checks their limits and refuses
// with 429 or 503.
package httplimit

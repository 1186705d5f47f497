// Package httplimit rate limits net/http servers with the ratelimit
// package: middleware, client identification and the response headers.
//
// [Middleware] wraps a handler. For each request it asks Limits for the
// client's checks and Global for the capacity checks shared by everyone,
// decides them all at once (atomically: a refused request consumes
// nothing), and then:
//
//   - refuses a client over its own quota with 429 Too Many Requests;
//   - refuses a request that only the global limit stopped with 503
//     Service Unavailable, the server shedding load, or lets it wait up to
//     MaxWait for capacity (never a client over its own quota: queueing
//     work the client is not entitled to only hides the signal to back
//     off);
//   - sets, on every response, the IETF RateLimit-Policy and RateLimit
//     structured headers (one member per policy that applied) and
//     X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset for
//     the most constrained one, plus Retry-After in whole seconds, rounded
//     up, on refusals, whose problem+json bodies list violated-policies.
//
// [Identifier] builds the client's identity in layers: the API key from
// "Authorization: Bearer" or X-API-Key where present, else the client IP,
// believing X-Forwarded-For and Forwarded only from trusted proxies
// ([Identifier.ClientIP]). On login routes, limit the IP and the target
// account together ([AccountFromBody] reads the account from the body and
// puts the body back for the handler): a brute force on one account is
// stopped from any IP, while an office behind one NAT is not locked out by
// one user.
//
// The package depends only on the standard library and ratelimit; the
// Sluice gateway (sluice serve with gateway.listen) is built on it.
package httplimit

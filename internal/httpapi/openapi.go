package httpapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// The OpenAPI document is kept in fragments, one per area of the API
// (openapi/base.json holds info, shared components and the operations
// routes; each other file holds {"paths": ..., "components": ...} for its
// area). They are merged once at start, and completeOperations adds the
// answers every operation of a kind can give (401 and 403 where a
// credential is required, 400, 413 and 415 where a body is read, 500
// everywhere), so no fragment lists them by hand. TestOpenAPIMatchesRoutes
// keeps the result in step with the registered routes, and the exchanges
// of the HTTP tests are validated against it (apitest).
//
// The document's servers[0].url is the one value known only per request:
// openAPIDoc holds serverSentinel there and serveOpenAPI writes the URL
// the client reached (see openAPIServer).
//
// docs/openapi.json is the document as served from the default address,
// rewritten by go generate and checked by TestPublishedOpenAPI.
//
//go:generate go test -run ^TestPublishedOpenAPI$ -update .
//go:embed openapi/*.json
var openAPIFiles embed.FS

// serverSentinel stands for the server URL in openAPIDoc.
const serverSentinel = "http://sluice.invalid/server-url"

var (
	openAPIDoc = mustMergeOpenAPI(openAPIFiles)
	// openAPIHead and openAPITail are openAPIDoc before and after the
	// sentinel's JSON string.
	openAPIHead, openAPITail, _ = bytes.Cut(openAPIDoc, []byte(`"`+serverSentinel+`"`))
)

// OpenAPI returns the document GET /openapi.json serves, with serverURL
// (for example "http://127.0.0.1:8080") as its server.
func OpenAPI(serverURL string) []byte {
	u, _ := json.Marshal(serverURL)
	return slices.Concat(openAPIHead, u, openAPITail)
}

// validHost is a Host header fit to be named: a name or address and a port.
var validHost = regexp.MustCompile(`^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

// openAPIServer is the URL the document names as its server: the
// configured public URL, else the scheme and Host the client used, else
// the address of the listener that took the connection.
func (s *Server) openAPIServer(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return strings.TrimRight(s.opts.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil || (s.clients.TrustedPeer(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")) {
		scheme = "https"
	}
	if validHost.MatchString(r.Host) {
		return scheme + "://" + r.Host
	}
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return scheme + "://" + addr.String()
	}
	return scheme + "://localhost"
}

func mustMergeOpenAPI(fsys fs.FS) []byte {
	doc, err := mergeOpenAPI(fsys)
	if err != nil {
		panic(err)
	}
	return doc
}

func mergeOpenAPI(fsys fs.FS) ([]byte, error) {
	names, err := fs.Glob(fsys, "openapi/*.json")
	if err != nil {
		return nil, err
	}
	// base.json first, then the rest in name order.
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == "openapi/base.json":
			return -1
		case b == "openapi/base.json":
			return 1
		case a < b:
			return -1
		default:
			return 1
		}
	})
	var doc map[string]any
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var part map[string]any
		if err := json.Unmarshal(raw, &part); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if doc == nil {
			doc = part
			continue
		}
		if err := mergeInto(doc, part, name); err != nil {
			return nil, err
		}
	}
	doc["servers"] = []any{map[string]any{"url": serverSentinel,
		"description": "The URL this document was fetched from, or the configured public URL (ui.public_url)."}}
	completeOperations(doc)
	return json.MarshalIndent(doc, "", "  ")
}

// httpMethods are the operation keys of a path item.
var httpMethods = []string{"get", "head", "post", "put", "patch", "delete", "options"}

// completeOperations adds to every operation the responses it shares with
// every operation of its kind, each as the shared Problem response:
//   - 500: any handler can fail;
//   - 401 and 503 where a credential is required (the key store may be
//     unreachable), and 403 where the credential is an API key or a
//     session (a key may lack the scope; keyless servers refuse
//     non-loopback clients);
//   - 400, 413 and 415 where a request body is read.
//
// A credential is required when the operation's security requirement
// lists no empty alternative ({} makes it optional).
func completeOperations(doc map[string]any) {
	paths, _ := doc["paths"].(map[string]any)
	for _, item := range paths {
		item, _ := item.(map[string]any)
		for _, m := range httpMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			responses, _ := op["responses"].(map[string]any)
			if responses == nil {
				responses = map[string]any{}
				op["responses"] = responses
			}
			add := func(statuses ...string) {
				for _, st := range statuses {
					if _, ok := responses[st]; !ok {
						responses[st] = map[string]any{"$ref": "#/components/responses/Problem"}
					}
				}
			}
			add("500")
			schemes, required := securityOf(op)
			if required {
				add("401", "503")
				if schemes["bearer"] || schemes["session"] {
					add("403")
				}
			}
			if schemes["bearer"] {
				add("429") // too many failed authentications from the client
			}
			if _, ok := op["requestBody"]; ok {
				add("400", "413", "415")
			}
		}
	}
}

// securityOf returns the schemes op's security requirement names, and
// whether one of them is required.
func securityOf(op map[string]any) (map[string]bool, bool) {
	reqs, _ := op["security"].([]any)
	schemes := map[string]bool{}
	required := len(reqs) > 0
	for _, req := range reqs {
		alt, _ := req.(map[string]any)
		if len(alt) == 0 {
			required = false
		}
		for name := range alt {
			schemes[name] = true
		}
	}
	return schemes, required
}

// mergeInto adds src's members to dst, descending into objects; a member
// defined twice with different leaf values is an error.
func mergeInto(dst, src map[string]any, where string) error {
	for _, k := range slices.Sorted(maps.Keys(src)) {
		sv := src[k]
		dv, ok := dst[k]
		if !ok {
			dst[k] = sv
			continue
		}
		dm, dok := dv.(map[string]any)
		sm, sok := sv.(map[string]any)
		if !dok || !sok {
			return fmt.Errorf("%s: %q is defined twice", where, k)
		}
		if err := mergeInto(dm, sm, where+": "+k); err != nil {
			return err
		}
	}
	return nil
}

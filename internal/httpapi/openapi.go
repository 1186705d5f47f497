package httpapi

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"slices"
)

// The OpenAPI document is kept in fragments, one per area of the API
// (openapi/base.json holds info, shared components and the operations
// routes; each other file holds {"paths": ..., "components": ...} for its
// area). They are merged once at start; TestOpenAPIMatchesRoutes keeps the
// result in step with the registered routes.
//
//go:embed openapi/*.json
var openAPIFiles embed.FS

var openAPIDoc = mustMergeOpenAPI(openAPIFiles)

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
	return json.MarshalIndent(doc, "", "  ")
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

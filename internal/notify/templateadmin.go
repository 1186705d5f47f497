package notify

import (
	"context"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Templates returns every type callers may send, sorted by type: each
// shipped type (its stored override when it has one, else the shipped
// template with Default set) and every custom type stored.
func (s *Service) Templates(ctx context.Context) ([]Template, error) {
	stored, err := s.opts.Store.Templates(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Template, 0, len(stored)+len(defaultTypes))
	have := make(map[string]bool, len(stored))
	for _, t := range stored {
		have[t.Type] = true
		out = append(out, t)
	}
	for _, typ := range DefaultTypes() {
		if !have[typ] {
			def, _ := DefaultTemplate(typ)
			out = append(out, def)
		}
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Type, b.Type) })
	return out, nil
}

// DeleteTemplate removes the stored template of typ: a shipped type goes
// back to its shipped template, a custom type is no longer a type callers
// may send. NotFound when no template of typ is stored (a shipped type
// that was never overridden has nothing to remove).
func (s *Service) DeleteTemplate(ctx context.Context, typ string) error {
	found, err := s.opts.Store.DeleteTemplate(ctx, typ)
	if err != nil {
		return err
	}
	s.templates.forget(typ)
	s.types.forget("")
	if !found {
		if _, shipped := defaultTypes[typ]; shipped {
			return apperr.New(apperr.NotFound, "template %q is the shipped one already: nothing to reset", typ)
		}
		return apperr.New(apperr.NotFound, "no template for type %q", typ)
	}
	return nil
}

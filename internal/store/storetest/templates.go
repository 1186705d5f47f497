package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// notificationTemplates pins the listing and removal of stored templates:
// every stored template comes back sorted by type with its rules, and a
// delete reports whether there was one.
func (s suite) notificationTemplates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)

	if got, err := db.Templates(ctx); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Templates on an empty database = %#v, %v; want an empty, non-nil list", got, err)
	}
	content := map[string]map[string]notify.Content{"default": {"en": {Subject: "S {n}", Body: "B {n}"}}}
	stored := []notify.Template{
		{Type: "zeta.custom", Category: notify.Marketing, Channels: content, UpdatedAt: t0, TrackLinks: true},
		{Type: "otp", Category: notify.Critical, Channels: content, UpdatedAt: t0.Add(time.Microsecond)},
		{Type: "invoice.ready", Category: notify.Orders, Channels: content, UpdatedAt: t0.Add(2 * time.Microsecond)},
	}
	for _, tpl := range stored {
		if err := db.PutTemplate(ctx, tpl); err != nil {
			t.Fatalf("PutTemplate(%s): %v", tpl.Type, err)
		}
	}
	got, err := db.Templates(ctx)
	if err != nil {
		t.Fatalf("Templates: %v", err)
	}
	want := []notify.Template{stored[2], stored[1], stored[0]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Templates = %+v, want %+v (sorted by type, rules kept)", got, want)
	}

	found, err := db.DeleteTemplate(ctx, "otp")
	if err != nil || !found {
		t.Errorf("DeleteTemplate(otp) = %v, %v; want true, nil", found, err)
	}
	if _, found, err := db.Template(ctx, "otp"); err != nil || found {
		t.Errorf("Template(otp) after delete found = %v, %v; want false", found, err)
	}
	if found, err := db.DeleteTemplate(ctx, "otp"); err != nil || found {
		t.Errorf("DeleteTemplate(otp) again = %v, %v; want false, nil", found, err)
	}
	if found, err := db.DeleteTemplate(ctx, "never.stored"); err != nil || found {
		t.Errorf("DeleteTemplate(never stored) = %v, %v; want false, nil", found, err)
	}
	cats, err := db.TemplateCategories(ctx)
	if err != nil || len(cats) != 2 || cats["otp"] != "" {
		t.Errorf("TemplateCategories after delete = %v, %v; want invoice.ready and zeta.custom", cats, err)
	}
	if got, err := db.Templates(ctx); err != nil || len(got) != 2 || got[0].Type != "invoice.ready" || got[1].Type != "zeta.custom" {
		t.Errorf("Templates after delete = %+v, %v", got, err)
	}
}

package storetest

import (
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// linkRules: rules set on a link are read back with it, by every read,
// and can be replaced and removed.
func (s suite) linkRules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	out, _, err := db.CreateLinks(ctx, []shorten.NewLink{{URL: "https://example.com/a", Owner: "key_1", CreatedAt: time.Now()}}, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	code := out[0].Code
	rules := []shorten.Rule{
		{Name: "ios", If: shorten.Conditions{OS: []string{"ios"}}, URL: "https://apps.example.com/x"},
		{If: shorten.Conditions{Language: []string{"de"}, Query: map[string]string{"utm_source": "x"}}, URL: "https://example.de/"},
		{Split: []shorten.Arm{{Name: "a", URL: "https://example.com/a", Weight: 70}, {URL: "https://example.com/b", Weight: 30}}},
	}
	got, err := db.SetLinkRules(ctx, "", code, rules)
	if err != nil {
		t.Fatalf("SetLinkRules: %v", err)
	}
	if got.Code != code || got.URL != "https://example.com/a" || !reflect.DeepEqual(got.Rules, rules) {
		t.Errorf("SetLinkRules returned %+v, want the link with its rules", got)
	}
	read, err := db.LinkByCode(ctx, "", code)
	if err != nil || !reflect.DeepEqual(read.Rules, rules) {
		t.Errorf("LinkByCode rules = %+v, %v; want %+v", read.Rules, err, rules)
	}
	listed, err := db.ListLinks(ctx, "key_1", nil, 0, 10)
	if err != nil || len(listed) != 1 || !reflect.DeepEqual(listed[0].Rules, rules) {
		t.Errorf("ListLinks = %+v, %v; want the link with its rules", listed, err)
	}
	if got, err := db.SetLinkRules(ctx, "", code, rules[:1]); err != nil || len(got.Rules) != 1 {
		t.Errorf("replacing the rules = %+v, %v; want one rule", got.Rules, err)
	}
	if got, err := db.SetLinkRules(ctx, "", code, nil); err != nil || got.Rules != nil {
		t.Errorf("removing the rules = %+v, %v; want none", got.Rules, err)
	}
	if read, _ := db.LinkByCode(ctx, "", code); read.Rules != nil {
		t.Errorf("LinkByCode after removing = %+v, want no rules", read.Rules)
	}
	if _, err := db.SetLinkRules(ctx, "", "absent", rules); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("SetLinkRules(absent) = %v, want NotFound", err)
	}
}

// linkClickTargets: each click's target is stored, and counted by target
// over human clicks from a time.
func (s suite) linkClickTargets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, out := s.withLinks(t, "https://example.com/a")
	id := out[0].ID
	t0 := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	err := db.RecordClicks(ctx, []shorten.Click{
		{LinkID: id, At: t0, Visitor: "v1", Dimensions: shorten.Dimensions{Target: "ios"}},
		{LinkID: id, At: t0.Add(time.Second), Visitor: "v2", Dimensions: shorten.Dimensions{Target: "ios"}},
		{LinkID: id, At: t0.Add(time.Second), Visitor: "v3", Dimensions: shorten.Dimensions{Target: "ab/a"}},
		{LinkID: id, At: t0.Add(time.Second), Visitor: "v4", Dimensions: shorten.Dimensions{Target: shorten.DefaultTarget}},
		{LinkID: id, At: t0.Add(time.Second), Visitor: "v5", Dimensions: shorten.Dimensions{Target: "ios"}, Bot: true, Reason: shorten.BotHead},
		{LinkID: id, At: t0.Add(-time.Hour), Visitor: "v6", Dimensions: shorten.Dimensions{Target: "ios"}},
	})
	if err != nil {
		t.Fatalf("RecordClicks: %v", err)
	}
	got, err := db.LinkTargetClicks(ctx, id, t0)
	want := map[string]int64{"ios": 2, "ab/a": 1, shorten.DefaultTarget: 1}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("LinkTargetClicks = %v, %v; want %v (human clicks from t0)", got, err, want)
	}
}

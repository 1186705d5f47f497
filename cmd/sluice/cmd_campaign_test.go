package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCampaignSendRefusesBadFiles runs `sluice campaign send` against a
// node: a file of the wrong shape exits 2 naming the line, and the node
// holds no notification for any of its users; the good shapes send what
// they say.
func TestCampaignSendRefusesBadFiles(t *testing.T) {
	t.Parallel()
	n, env := startCLINode(t)
	dir := t.TempDir()
	type record struct{ Data map[string]any }
	history := func(user string) []record {
		t.Helper()
		code, resp := call(t, "GET", n.httpURL+"/v1/users/"+user+"/notifications", "")
		var page struct{ Items []record }
		if err := json.Unmarshal(resp, &page); code != 200 || err != nil {
			t.Fatalf("history of %s = %d %s", user, code, resp)
		}
		return page.Items
	}
	campaign := func(name, csv string) (int, string, string) {
		t.Helper()
		file := filepath.Join(dir, name+".csv")
		if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
			t.Fatal(err)
		}
		return runCLI(t, env, "campaign", "send", "--type", "flash_sale", "--users", file, "--campaign", name)
	}

	refused := []struct {
		name, csv, wantErr string
		users              []string
	}{
		{"idheader", "id,name\nu1,Ann\n", "idheader.csv: line 1: no user_id", []string{"id", "u1"}},
		{"emptyuser", "user_id,name\nu2,Ann\n,Bob\n", "emptyuser.csv: line 3: no user_id", []string{"u2"}},
		{"lookalike", "id\nu3\n", `lookalike.csv: line 1: "id" looks like a header`, []string{"id", "u3"}},
		{"wide", "u4\nu5,extra\n", "wide.csv: line 2: no user_id", []string{"u4", "u5"}},
		{"toolong", "user_id,name\nu6,Ann,x\n", "toolong.csv: line 2: 3 cells, but the header names 2 columns", []string{"u6"}},
	}
	for _, tt := range refused {
		code, out, errs := campaign(tt.name, tt.csv)
		if code != 2 || !strings.Contains(errs, tt.wantErr) || out != "" {
			t.Errorf("campaign send of %q = %d %q %q, want exit 2 and %q", tt.csv, code, out, errs, tt.wantErr)
		}
		for _, u := range tt.users {
			if got := history(u); len(got) != 0 {
				t.Errorf("after the refused %q, user %s has notifications %+v", tt.csv, u, got)
			}
		}
	}

	if code, out, errs := campaign("named", "user_id,name\nu7,Ann\n"); code != 0 || !strings.Contains(out, "1 accepted") {
		t.Fatalf("campaign send with a user_id header = %d %q %q", code, out, errs)
	}
	if got := history("u7"); len(got) != 1 || got[0].Data["name"] != "Ann" {
		t.Errorf("u7's notifications = %+v, want one with name Ann", got)
	}
	if code, out, errs := campaign("list", "user_id\nid\n"); code != 0 || !strings.Contains(out, "1 accepted") {
		t.Fatalf("campaign send of a user called id under a user_id line = %d %q %q", code, out, errs)
	}
	if got := history("id"); len(got) != 1 {
		t.Errorf("user id's notifications = %+v, want one", got)
	}
}

package httpapi

import (
	"reflect"
	"testing"
)

// checkBodySeeds are bodies on both sides of decodeCheckFast's line.
var checkBodySeeds = []string{
	`{"policy":"paid","key":"api_key:42","cost":1}`,
	`{"policy":"paid","key":"k"}`,
	" {\n\t\"key\" : \"k\" ,\r\"policy\":\"p\", \"cost\": -12 } ",
	`{}`,
	`{"policy":"p","key":"k","reserve":true,"charge":"on_settle","reservation_ttl":"30s"}`,
	`{"policy":"p","key":"k","reserve":false}`,
	`{"policy":"p","key":"k","cost":0}`,
	`{"policy":"p","key":"k","cost":999999999999999999}`,
	`{"policy":"p","key":"k","cost":9999999999999999999}`,
	`{"policy":"p","key":"k","cost":1.5}`,
	`{"policy":"p","key":"k","cost":1e3}`,
	`{"policy":"p","key":"k","cost":01}`,
	`{"policy":"p","key":"k","cost":-0}`,
	`{"policy":"p","key":"k","cost":null}`,
	`{"policy":"p","key":"k","cost":"1"}`,
	`{"Policy":"p","key":"k"}`,
	`{"policy":"p","key":"k","extra":1}`,
	`{"policy":"p\u0041","key":"k"}`,
	`{"policy":"p\"","key":"k"}`,
	"{\"policy\":\"é\",\"key\":\"k\"}",
	`{"policy":"p","key":"k",}`,
	`{"policy":"p","key":"k"} {}`,
	`{"policy":"p","key":"k"}x`,
	`{"policy":"p","policy":"q","key":"k"}`,
	`{"checks":[{"policy":"p","key":"k"}]}`,
	`{"policy":"p","key":"k","reserve":tru}`,
	`{"policy":"p"`,
	`[]`,
	``,
	`null`,
}

// FuzzDecodeCheckFast holds the fast check decoder to encoding/json's
// strict one: wherever it answers, the strict decoder accepts the same
// body and decodes the same values. Bodies it declines go to the strict
// decoder, so error answers are the strict decoder's by construction.
func FuzzDecodeCheckFast(f *testing.F) {
	for _, s := range checkBodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := decodeCheckFast(body)
		if !ok {
			return
		}
		var strict checkBody
		if err := decodeBody(body, &strict); err != nil {
			t.Fatalf("decodeCheckFast(%q) accepted a body the strict decoder refuses: %v", body, err)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("decodeCheckFast(%q) = %+v, strict decoder %+v", body, fast, strict)
		}
	})
}

// TestDecodeCheckFastCoversCommonBodies checks the fast decoder takes the
// bodies clients send (so the hot path is what is measured) and leaves
// the unusual ones to the strict decoder.
func TestDecodeCheckFastCoversCommonBodies(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool
	}{
		{"single check", `{"policy":"paid","key":"api_key:42","cost":1}`, true},
		{"no cost", `{"policy":"paid","key":"k"}`, true},
		{"whitespace", " {\n\t\"key\" : \"k\" ,\r\"policy\":\"p\", \"cost\": -12 } ", true},
		{"reservation", `{"policy":"p","key":"k","reserve":true,"charge":"on_settle","reservation_ttl":"30s"}`, true},
		{"batch", `{"checks":[{"policy":"p","key":"k"}]}`, false},
		{"unknown field", `{"policy":"p","key":"k","extra":1}`, false},
		{"other case", `{"Policy":"p","key":"k"}`, false},
		{"escape", `{"policy":"p\u0041","key":"k"}`, false},
		{"null cost", `{"policy":"p","key":"k","cost":null}`, false},
		{"fraction", `{"policy":"p","key":"k","cost":1.5}`, false},
		{"too long", `{"policy":"p","key":"k","cost":9999999999999999999}`, false},
		{"trailing data", `{"policy":"p","key":"k"} {}`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := decodeCheckFast([]byte(tt.body)); ok != tt.want {
				t.Errorf("decodeCheckFast(%q) ok = %v, want %v", tt.body, ok, tt.want)
			}
		})
	}
}

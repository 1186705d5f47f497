package store

import (
	"reflect"
	"testing"
)

func TestPlanPurge(t *testing.T) {
	links := []int64{3, 5, 8, 9}
	for _, tc := range []struct {
		name  string
		old   map[int64]int
		limit int
		full  bool
		want  purgePlan
	}{
		{"all fit, last page", map[int64]int{3: 2, 5: 1, 9: 4}, 10, false, purgePlan{whole: []int64{3, 5, 9}}},
		{"all fit, more pages", map[int64]int{3: 2, 9: 4}, 10, true, purgePlan{whole: []int64{3, 9}, next: 10}},
		{"exactly the limit, more links with clicks", map[int64]int{3: 2, 5: 3, 8: 1}, 5, true, purgePlan{whole: []int64{3, 5}, next: 8}},
		{"one does not fit", map[int64]int{3: 2, 5: 30, 8: 1}, 10, true, purgePlan{whole: []int64{3}, partial: 5, left: 8, next: 5}},
		{"the first does not fit", map[int64]int{3: 200}, 10, false, purgePlan{partial: 3, left: 10, next: 3}},
		{"no old clicks", map[int64]int{}, 10, true, purgePlan{next: 10}},
	} {
		if got := planPurge(links, tc.old, tc.limit, tc.full); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: planPurge = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

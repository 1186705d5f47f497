package client

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadEvent(t *testing.T) {
	t.Parallel()
	in := "retry: 2000\n\n: keepalive\n\nid: 7\nevent: hit\ndata: {\"code\":\"a\"}\n\nevent: hit\ndata:x\ndata: y\n\nid: 9\n"
	sc := bufio.NewScanner(strings.NewReader(in))
	tests := []event{{id: "7", event: "hit", data: `{"code":"a"}`}, {event: "hit", data: "x\ny"}}
	for _, want := range tests {
		got, err := readEvent(sc)
		if err != nil || got != want {
			t.Fatalf("readEvent = %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := readEvent(sc); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %v, want io.EOF (an event cut off is not returned)", err)
	}
}

// FuzzReadEvent: whatever a server sends, readEvent ends (io.EOF or a
// line too long), returns only events with data, and never an id with a
// NUL or a line break.
func FuzzReadEvent(f *testing.F) {
	f.Add("id: 7\nevent: hit\ndata: {}\n\n")
	f.Add(": keepalive\n\nretry: 2000\n\n")
	f.Add("data\n\nid\x00: 1\ndata: a\r\n\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		sc := bufio.NewScanner(strings.NewReader(in))
		sc.Buffer(make([]byte, 0, 64), 1024)
		for range len(in) + 1 {
			e, err := readEvent(sc)
			if err != nil {
				return
			}
			if strings.ContainsAny(e.id, "\x00\n") || strings.ContainsRune(e.event, '\n') {
				t.Fatalf("event %+v from %q", e, in)
			}
		}
		t.Fatalf("readEvent returned more events than %q has bytes", in)
	})
}

package apperr

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestCodeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"plain error is internal", io.EOF, Internal},
		{"direct", New(NotFound, "link %q", "x"), NotFound},
		{"wrapped by fmt", fmt.Errorf("resolve: %w", New(Conflict, "taken")), Conflict},
		{"empty code is internal", &Error{Message: "x"}, Internal},
		{"fields", Fields(Unprocessable, "bad", []FieldError{{Field: "a", Detail: "b"}}), Unprocessable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestWrapKeepsCauseApartFromMessage(t *testing.T) {
	t.Parallel()
	err := Wrap(Unavailable, io.ErrUnexpectedEOF, "database unreachable")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Error("Wrap lost its cause")
	}
	if err.Message != "database unreachable" {
		t.Errorf("Message = %q; the client-facing message must not include the cause", err.Message)
	}
	if Fields(Invalid, "x", nil) != nil {
		t.Error("Fields with no fields must be nil")
	}
}

package shorten

import (
	"bytes"
	"image/png"
	"regexp"
	"strconv"
	"testing"
)

// finderAt reports whether modules hold a QR finder pattern (7×7: a dark
// ring, a light ring, a dark 3×3 core) with its top-left corner at (x, y).
func finderAt(m [][]bool, x, y int) bool {
	for dy := range 7 {
		for dx := range 7 {
			ring := max(abs(dx-3), abs(dy-3))
			want := ring != 2
			if m[y+dy][x+dx] != want {
				return false
			}
		}
	}
	return true
}

func abs(n int) int { return max(n, -n) }

func TestQRModulesAreAQRCode(t *testing.T) {
	t.Parallel()
	m, err := QRModules("https://sho.rt/abc1234?" + QRMarker)
	if err != nil {
		t.Fatal(err)
	}
	n := len(m)
	// Versions have 17+4v modules a side, plus the quiet zone on both sides.
	if (n-2*qrQuietZone-17)%4 != 0 || n < 21+2*qrQuietZone {
		t.Fatalf("side of %d modules is no QR version with a quiet zone", n)
	}
	q, e := qrQuietZone, n-qrQuietZone-7
	if !finderAt(m, q, q) || !finderAt(m, e, q) || !finderAt(m, q, e) {
		t.Errorf("finder patterns missing from the corners of a %d-module code", n)
	}
	if finderAt(m, e, e) {
		t.Errorf("a finder pattern in the bottom-right corner: not a QR code")
	}
	for i := range n {
		if m[0][i] || m[i][0] || m[n-1][i] || m[i][n-1] {
			t.Fatalf("quiet zone has a dark module at the edge (index %d)", i)
		}
	}
	other, _ := QRModules("https://sho.rt/abc1235?" + QRMarker)
	if equalModules(m, other) {
		t.Errorf("two different texts gave the same modules")
	}
}

func equalModules(a, b [][]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for y := range a {
		for x := range a[y] {
			if a[y][x] != b[y][x] {
				return false
			}
		}
	}
	return true
}

func TestWriteQRPNGDrawsEveryModule(t *testing.T) {
	t.Parallel()
	m, err := QRModules("https://sho.rt/x?" + QRMarker)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{MinQRSize, 300, DefaultQRSize} {
		var buf bytes.Buffer
		if err := WriteQRPNG(&buf, m, size); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("size %d: decode: %v", size, err)
		}
		if b := img.Bounds(); b.Dx() != size || b.Dy() != size {
			t.Errorf("size %d: image is %v", size, b)
		}
		scale, margin := qrScale(len(m), size)
		got := make([][]bool, len(m))
		for y := range m {
			got[y] = make([]bool, len(m))
			for x := range m {
				r, _, _, _ := img.At(margin+x*scale+scale/2, margin+y*scale+scale/2).RGBA()
				got[y][x] = r < 0x8000
			}
		}
		if !equalModules(m, got) {
			t.Errorf("size %d: the PNG's module centres differ from the matrix", size)
		}
	}
}

var svgRun = regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-(\d+)z`)

func TestWriteQRSVGDrawsEveryModule(t *testing.T) {
	t.Parallel()
	m, err := QRModules("https://sho.rt/x?" + QRMarker)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteQRSVG(&buf, m, 512); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	n := len(m)
	if !bytes.HasPrefix(buf.Bytes(), []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="512" height="512" viewBox="0 0 `+strconv.Itoa(n)+" "+strconv.Itoa(n)+`"`)) {
		t.Errorf("SVG header = %.120s", s)
	}
	got := make([][]bool, n)
	for y := range got {
		got[y] = make([]bool, n)
	}
	for _, r := range svgRun.FindAllStringSubmatch(s, -1) {
		x, _ := strconv.Atoi(r[1])
		y, _ := strconv.Atoi(r[2])
		w, _ := strconv.Atoi(r[3])
		for i := range w {
			got[y][x+i] = true
		}
	}
	if !equalModules(m, got) {
		t.Errorf("the SVG's runs differ from the matrix")
	}
}

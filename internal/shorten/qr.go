package shorten

import (
	"bufio"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"

	qrcode "github.com/yeqown/go-qrcode/v2"
)

// QR code sizes in pixels: the bounds of the size parameter and its
// default.
const (
	MinQRSize     = 64
	MaxQRSize     = 2048
	DefaultQRSize = 256
)

// qrQuietZone is the light margin around a QR code, in modules, that the
// standard asks for (ISO/IEC 18004: four).
const qrQuietZone = 4

// QRModules returns the QR code of text, error correction level M, as rows
// of modules (true: dark), quiet zone included. The encoding is
// github.com/yeqown/go-qrcode's; the drawing is ours (WriteQRPNG,
// WriteQRSVG), so PNG and SVG show the same modules.
func QRModules(text string) ([][]bool, error) {
	q, err := qrcode.NewWith(text, qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionMedium))
	if err != nil {
		return nil, fmt.Errorf("encode QR code: %w", err)
	}
	var m matrixCapture
	if err := q.Save(&m); err != nil {
		return nil, fmt.Errorf("encode QR code: %w", err)
	}
	if m.bits == nil {
		return nil, errors.New("encode QR code: no matrix")
	}
	n := len(m.bits) + 2*qrQuietZone
	out := make([][]bool, n)
	for y := range out {
		out[y] = make([]bool, n)
		if y >= qrQuietZone && y < n-qrQuietZone {
			copy(out[y][qrQuietZone:], m.bits[y-qrQuietZone])
		}
	}
	return out, nil
}

// matrixCapture is a qrcode.Writer that keeps the matrix.
type matrixCapture struct{ bits [][]bool }

func (c *matrixCapture) Write(m qrcode.Matrix) error { c.bits = m.Bitmap(); return nil }
func (c *matrixCapture) Close() error                { return nil }

// qrScale is how many pixels a module takes in a size-pixel image of n
// modules, and the margin that centres it.
func qrScale(n, size int) (scale, margin int) {
	scale = max(1, size/n)
	return scale, max(0, (size-n*scale)/2)
}

// WriteQRPNG draws modules as a size×size two-colour PNG, each module a
// whole number of pixels (crisp for scanners), centred.
func WriteQRPNG(w io.Writer, modules [][]bool, size int) error {
	n := len(modules)
	scale, margin := qrScale(n, size)
	side := max(size, n*scale)
	img := image.NewPaletted(image.Rect(0, 0, side, side), color.Palette{color.White, color.Black})
	for y, row := range modules {
		for x, dark := range row {
			if !dark {
				continue
			}
			for py := margin + y*scale; py < margin+(y+1)*scale; py++ {
				off := img.PixOffset(margin+x*scale, py)
				for i := range scale {
					img.Pix[off+i] = 1
				}
			}
		}
	}
	return (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(w, img)
}

// WriteQRSVG draws modules as an SVG of size×size pixels: one path of a
// rectangle per run of dark modules in a row, in module units (viewBox),
// so it scales without blurring.
func WriteQRSVG(w io.Writer, modules [][]bool, size int) error {
	n := len(modules)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" shape-rendering="crispEdges">`, size, size, n, n)
	fmt.Fprintf(bw, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, n, n)
	for y, row := range modules {
		for x := 0; x < n; {
			if !row[x] {
				x++
				continue
			}
			run := 1
			for x+run < n && row[x+run] {
				run++
			}
			fmt.Fprintf(bw, "M%d %dh%dv1h-%dz", x, y, run, run)
			x += run
		}
	}
	bw.WriteString(`"/></svg>`)
	return bw.Flush()
}

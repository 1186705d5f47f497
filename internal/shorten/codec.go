package shorten

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Code lengths a Codec accepts: 62^10 is the largest power of 62 below 2^64.
const (
	MinCodeLength = 4
	MaxCodeLength = 10
)

// alphabet is base62 in the order digits, lower case, upper case.
const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// feistelRounds is the number of rounds of the balanced Feistel network.
// Four rounds already make a strong pseudorandom permutation when the round
// function is one (Luby-Rackoff); the extra rounds are cheap margin for the
// small halves (21 bits at the default length).
const feistelRounds = 10

// Codec turns database ids into short codes and back. A code is the id
// permuted by a keyed bijection of [0, 62^n), a balanced Feistel network
// over the smallest even number of bits that covers 62^n, made to stay
// inside the range by cycle-walking (permute again while the result is
// >= 62^n), then written as exactly n base62 digits. Consecutive ids
// therefore give unrelated codes, and distinct ids never share a code.
//
// The round function is AES-128 keyed by the first 16 bytes of the SHA-256
// of the key, so any secret of any length keys it. Changing the key changes
// the code every future id gets; stored links keep their codes (codes are
// stored, never recomputed), but a new id may then map to a code an old
// link holds, which Service handles by skipping to the next id.
//
// A Codec is immutable and safe for concurrent use.
type Codec struct {
	n     int
	space uint64 // 62^n
	half  uint   // bits per Feistel half
	mask  uint64 // (1 << half) - 1
	block cipher.Block
	// visitor keys the visitor hash of recorded clicks; derived from the
	// key so that it is shared by every node and survives restarts.
	visitor [32]byte
}

// NewCodec returns a Codec for codes of length n keyed by key, which must
// not be empty.
func NewCodec(key []byte, n int) (*Codec, error) {
	if n < MinCodeLength || n > MaxCodeLength {
		return nil, fmt.Errorf("code length %d: must be between %d and %d", n, MinCodeLength, MaxCodeLength)
	}
	if len(key) == 0 {
		return nil, errors.New("code key is empty")
	}
	return newCodec(key, n), nil
}

// newCodec is NewCodec without the length bounds, so tests can walk every
// value of tiny domains.
func newCodec(key []byte, n int) *Codec {
	space := uint64(1)
	for range n {
		space *= 62
	}
	width := uint(bits.Len64(space - 1))
	if width%2 == 1 {
		width++
	}
	sum := sha256.Sum256(key)
	block, err := aes.NewCipher(sum[:16])
	if err != nil {
		panic(err) // 16 bytes is always a valid AES key
	}
	return &Codec{n: n, space: space, half: width / 2, mask: 1<<(width/2) - 1, block: block,
		visitor: sha256.Sum256(append([]byte("sluice visitor hash\x00"), key...))}
}

// Length returns the number of characters of every code.
func (c *Codec) Length() int { return c.n }

// Space returns how many distinct codes there are: 62^Length.
func (c *Codec) Space() uint64 { return c.space }

// Permute maps x in [0, Space) to its image under the keyed bijection.
// It panics when x is out of range: ids come from a sequence that Service
// checks against Space.
func (c *Codec) Permute(x uint64) uint64 {
	if x >= c.space {
		panic(fmt.Sprintf("shorten: permute %d: outside [0, %d)", x, c.space))
	}
	for {
		x = c.feistel(x, false)
		if x < c.space {
			return x
		}
	}
}

// Unpermute is Permute's inverse on [0, Space).
func (c *Codec) Unpermute(y uint64) uint64 {
	if y >= c.space {
		panic(fmt.Sprintf("shorten: unpermute %d: outside [0, %d)", y, c.space))
	}
	for {
		y = c.feistel(y, true)
		if y < c.space {
			return y
		}
	}
}

// Encode returns the code of id.
func (c *Codec) Encode(id uint64) (string, error) {
	if id >= c.space {
		return "", fmt.Errorf("encode id %d: every %d-character code is used", id, c.n)
	}
	return c.format(c.Permute(id)), nil
}

// Decode returns the id whose code is code, or false when code is not n
// base62 characters.
func (c *Codec) Decode(code string) (uint64, bool) {
	v, ok := c.parse(code)
	if !ok {
		return 0, false
	}
	return c.Unpermute(v), true
}

func (c *Codec) format(v uint64) string {
	b := make([]byte, c.n)
	for i := c.n - 1; i >= 0; i-- {
		b[i] = alphabet[v%62]
		v /= 62
	}
	return string(b)
}

func (c *Codec) parse(code string) (uint64, bool) {
	if len(code) != c.n {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(code); i++ {
		d := digit(code[i])
		if d < 0 {
			return 0, false
		}
		v = v*62 + uint64(d)
	}
	return v, v < c.space
}

func digit(b byte) int {
	switch {
	case b >= '0' && b <= '9':
		return int(b - '0')
	case b >= 'a' && b <= 'z':
		return int(b-'a') + 10
	case b >= 'A' && b <= 'Z':
		return int(b-'A') + 36
	}
	return -1
}

// feistel runs the network forwards, or backwards when inverse is set, on
// a value of 2*half bits.
func (c *Codec) feistel(x uint64, inverse bool) uint64 {
	l, r := x>>c.half, x&c.mask
	for i := range feistelRounds {
		round := i
		if inverse {
			round = feistelRounds - 1 - i
			l, r = r^c.round(round, l), l
			continue
		}
		l, r = r, l^c.round(round, r)
	}
	return l<<c.half | r
}

// round is the keyed round function F(round, v), reduced to half bits.
func (c *Codec) round(round int, v uint64) uint64 {
	var in, out [16]byte
	binary.BigEndian.PutUint64(in[:8], uint64(round))
	binary.BigEndian.PutUint64(in[8:], v)
	c.block.Encrypt(out[:], in[:])
	return binary.BigEndian.Uint64(out[:8]) & c.mask
}

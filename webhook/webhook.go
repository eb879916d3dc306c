// Package webhook signs and verifies chime's HTTP callbacks the Standard
// Webhooks way (https://www.standardwebhooks.com): every callback carries
//
//	webhook-id: the run id (the same for every attempt of a run)
//	webhook-timestamp: the attempt's time, in Unix seconds
//	webhook-signature: v1,<base64 HMAC-SHA256> [v1,<…> …]
//
// where each signature is the HMAC-SHA256, keyed by one of the app's
// signing secrets, of "{webhook-id}.{webhook-timestamp}.{body}". A secret
// is "whsec_" and the standard base64 of its key; the key is what the HMAC
// uses. While a rotated secret is still active, callbacks carry one
// signature per active secret, so a receiver holding either verifies.
//
// A receiver verifies with Verify (any Standard Webhooks library works
// too), checking that the timestamp is recent to refuse replays, and should
// treat webhook-id as an idempotency key: a run may be delivered more than
// once. See docs/callbacks.md.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Header names. HTTP header names are case insensitive; these are the
// spelling of the Standard Webhooks specification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret.
const SecretPrefix = "whsec_"

// SecretBytes is the length of the keys NewSecret makes.
const SecretBytes = 32

// DefaultTolerance is how far a callback's timestamp may be from the
// receiver's clock, either way, for Verify.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify and ParseSecret; the returned errors wrap them.
var (
	ErrMissingHeaders = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrBadTimestamp   = errors.New("webhook-timestamp is not a Unix time in seconds")
	ErrTooOld         = errors.New("webhook-timestamp is too old")
	ErrTooNew         = errors.New("webhook-timestamp is too far in the future")
	ErrNoMatch        = errors.New("no matching signature")
	ErrBadSecret      = errors.New("not a webhook secret")
)

// NewSecret returns a new random secret: SecretPrefix and the base64 of
// SecretBytes random bytes.
func NewSecret() string {
	b := make([]byte, SecretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret returns the HMAC key of secret: the base64 after
// SecretPrefix. The prefix is optional and missing base64 padding is
// tolerated, as in the Standard Webhooks libraries; an empty key is an
// error.
func ParseSecret(secret string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimSpace(secret), SecretPrefix)
	if n := len(s) % 4; n != 0 {
		s += strings.Repeat("=", 4-n)
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSecret, err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrBadSecret)
	}
	return key, nil
}

// sign appends the base64 HMAC of the signed content to dst.
func sign(dst, key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	var buf [20]byte
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(buf[:0], ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	var sum [sha256.Size]byte
	return base64.StdEncoding.AppendEncode(dst, h.Sum(sum[:0]))
}

// signer is the HMAC of one secret's key, ready to sign: the key's inner
// and outer pads hashed once (hmac's Reset keeps their state), so that a
// signature costs two SHA-256 blocks for a short message instead of four,
// and neither the secret's base64 nor the HMAC is made anew per callback.
type signer struct{ pool sync.Pool }

// signers holds the signer of each secret signed with, up to maxSigners
// (then it starts over: secrets are few, one or two per app).
var (
	signers     sync.Map // secret → *signer
	signerCount atomic.Int64
)

const maxSigners = 4096

// signerOf returns the signer of secret.
func signerOf(secret string) (*signer, error) {
	if v, ok := signers.Load(secret); ok {
		return v.(*signer), nil
	}
	key, err := ParseSecret(secret)
	if err != nil {
		return nil, err
	}
	sg := &signer{pool: sync.Pool{New: func() any {
		h := hmac.New(sha256.New, key)
		h.Reset() // hashes the pads and keeps their state
		return &signState{h: h, buf: make([]byte, 0, 128)}
	}}}
	if signerCount.Add(1) > maxSigners {
		signers.Clear()
		signerCount.Store(1)
	}
	v, _ := signers.LoadOrStore(secret, sg)
	return v.(*signer), nil
}

// signState is one HMAC of a signer and a scratch buffer for it.
type signState struct {
	h   hash.Hash
	buf []byte
}

// append appends the base64 HMAC of the signed content to dst.
func (sg *signer) append(dst []byte, id string, ts int64, body []byte) []byte {
	st := sg.pool.Get().(*signState)
	b := append(append(st.buf[:0], id...), '.')
	b = append(strconv.AppendInt(b, ts, 10), '.')
	st.h.Write(b)
	st.h.Write(body)
	b = st.h.Sum(b[:0])
	dst = base64.StdEncoding.AppendEncode(dst, b)
	st.h.Reset()
	st.buf = b
	sg.pool.Put(st)
	return dst
}

// Sign returns the webhook-signature value for one message signed with
// each of secrets: "v1,<sig>" for each, separated by spaces. The timestamp
// is ts in whole Unix seconds, the value of webhook-timestamp.
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("webhook: sign: no secret")
	}
	var buf [len("v1,") + 44 + 1]byte // one signature, without allocating
	out := buf[:0]
	if len(secrets) > 1 {
		out = make([]byte, 0, len(secrets)*(len("v1,")+base64.StdEncoding.EncodedLen(sha256.Size)+1))
	}
	for i, s := range secrets {
		sg, err := signerOf(s)
		if err != nil {
			return "", fmt.Errorf("webhook: sign: secret %d: %w", i, err)
		}
		if i > 0 {
			out = append(out, ' ')
		}
		out = sg.append(append(out, "v1,"...), id, ts.Unix(), body)
	}
	return string(out), nil
}

// SetHeaders sets the three webhook headers of h for a message signed with
// secrets.
func SetHeaders(h http.Header, secrets []string, id string, ts time.Time, body []byte) error {
	sig, err := Sign(secrets, id, ts, body)
	if err != nil {
		return err
	}
	// Under their canonical keys, as h.Set would put them, without
	// canonicalising the lower-case names for every callback.
	vals := []string{id, strconv.FormatInt(ts.Unix(), 10), sig}
	h[canonicalID], h[canonicalTimestamp], h[canonicalSignature] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	return nil
}

var (
	canonicalID        = http.CanonicalHeaderKey(HeaderID)
	canonicalTimestamp = http.CanonicalHeaderKey(HeaderTimestamp)
	canonicalSignature = http.CanonicalHeaderKey(HeaderSignature)
)

// Verify checks the webhook headers of a received callback against secret
// with DefaultTolerance and the current time: see VerifyAt.
func Verify(secret string, h http.Header, body []byte) error {
	return VerifyAt(secret, h, body, time.Now(), DefaultTolerance)
}

// VerifyAt checks that one of the v1 signatures of h's webhook-signature
// is the signature of body by secret, with h's webhook-id and
// webhook-timestamp, and that the timestamp is within tolerance of now
// (tolerance 0 or less skips that check, which lets replays through).
// Signatures are compared in constant time; signatures of other versions
// are ignored. body must be the raw bytes received, before any parsing.
func VerifyAt(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := ParseSecret(secret)
	if err != nil {
		return fmt.Errorf("webhook: verify: %w", err)
	}
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return fmt.Errorf("webhook: verify: %w", ErrMissingHeaders)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: verify: %w: %q", ErrBadTimestamp, tsText)
	}
	if tolerance > 0 {
		at := time.Unix(ts, 0)
		if now.Sub(at) > tolerance {
			return fmt.Errorf("webhook: verify: %w (%s, now %s)", ErrTooOld, at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		if at.Sub(now) > tolerance {
			return fmt.Errorf("webhook: verify: %w (%s, now %s)", ErrTooNew, at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
	}
	want := sign(nil, key, id, ts, body)
	for sig := range strings.FieldsSeq(sigs) {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		if hmac.Equal([]byte(value), want) {
			return nil
		}
	}
	return fmt.Errorf("webhook: verify: %w", ErrNoMatch)
}

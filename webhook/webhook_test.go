package webhook_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/webhook"
)

func TestSignReference(t *testing.T) {
	t.Parallel()
	got, err := webhook.Sign([]string{refSecret}, refID, time.Unix(refTimestamp, 0), []byte(refBody))
	if err != nil {
		t.Fatal(err)
	}
	if got != refSignature {
		t.Fatalf("Sign = %s, want %s", got, refSignature)
	}
}

func TestVerifyVectors(t *testing.T) {
	t.Parallel()
	for _, c := range vectors() {
		t.Run(c.Name, func(t *testing.T) {
			err := webhook.VerifyAt(c.Secret, c.header(), []byte(c.Body), time.Unix(c.Now, 0), webhook.DefaultTolerance)
			if (err == nil) != c.Valid {
				t.Fatalf("VerifyAt = %v, want valid %v", err, c.Valid)
			}
		})
	}
}

func TestVerifyErrors(t *testing.T) {
	t.Parallel()
	at := time.Unix(refTimestamp, 0)
	h := func(mod func(http.Header)) http.Header {
		x := http.Header{}
		x.Set(webhook.HeaderID, refID)
		x.Set(webhook.HeaderTimestamp, "1614265330")
		x.Set(webhook.HeaderSignature, refSignature)
		if mod != nil {
			mod(x)
		}
		return x
	}
	for _, tc := range []struct {
		name   string
		secret string
		h      http.Header
		now    time.Time
		tol    time.Duration
		want   error
	}{
		{"missing", refSecret, h(func(x http.Header) { x.Del(webhook.HeaderID) }), at, webhook.DefaultTolerance, webhook.ErrMissingHeaders},
		{"bad timestamp", refSecret, h(func(x http.Header) { x.Set(webhook.HeaderTimestamp, "1.5") }), at, webhook.DefaultTolerance, webhook.ErrBadTimestamp},
		{"too old", refSecret, h(nil), at.Add(time.Hour), webhook.DefaultTolerance, webhook.ErrTooOld},
		{"too new", refSecret, h(nil), at.Add(-time.Hour), webhook.DefaultTolerance, webhook.ErrTooNew},
		{"old but no tolerance", refSecret, h(nil), at.Add(24 * time.Hour), 0, nil},
		{"no match", refSecret, h(func(x http.Header) { x.Set(webhook.HeaderSignature, otherSig) }), at, webhook.DefaultTolerance, webhook.ErrNoMatch},
		{"empty secret", "whsec_", h(nil), at, webhook.DefaultTolerance, webhook.ErrBadSecret},
		{"not base64", "whsec_!!!", h(nil), at, webhook.DefaultTolerance, webhook.ErrBadSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.VerifyAt(tc.secret, tc.h, []byte(refBody), tc.now, tc.tol)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("VerifyAt = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestParseSecretPadding is the Python library's unpadded-secret case: a
// secret whose base64 lacks its padding is the same key.
func TestParseSecretPadding(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr"} {
		padded := s + strings.Repeat("=", (4-len(s)%4)%4)
		want, err := base64.StdEncoding.DecodeString(padded)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []string{s, padded, "whsec_" + s, "whsec_" + padded} {
			got, err := webhook.ParseSecret(in)
			if err != nil || string(got) != string(want) {
				t.Fatalf("ParseSecret(%s) = %x, %v; want %x", in, got, err, want)
			}
		}
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, b := webhook.NewSecret(), webhook.NewSecret()
	if a == b || !strings.HasPrefix(a, webhook.SecretPrefix) {
		t.Fatalf("NewSecret: %s, %s", a, b)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, webhook.SecretPrefix))
	if err != nil || len(key) != webhook.SecretBytes || webhook.SecretBytes < 24 {
		t.Fatalf("NewSecret %s: key %d bytes, %v", a, len(key), err)
	}
}

// TestRotationSignatures: a message signed with two secrets verifies with
// either, and not with a third.
func TestRotationSignatures(t *testing.T) {
	t.Parallel()
	oldS, newS, other := webhook.NewSecret(), webhook.NewSecret(), webhook.NewSecret()
	now := time.Now()
	h := http.Header{}
	if err := webhook.SetHeaders(h, []string{newS, oldS}, "run_1", now, []byte("body")); err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(h.Get(webhook.HeaderSignature))); n != 2 {
		t.Fatalf("%d signatures: %s", n, h.Get(webhook.HeaderSignature))
	}
	for _, s := range []string{oldS, newS} {
		if err := webhook.Verify(s, h, []byte("body")); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	if err := webhook.Verify(other, h, []byte("body")); !errors.Is(err, webhook.ErrNoMatch) {
		t.Fatalf("Verify with another secret: %v", err)
	}
	if _, err := webhook.Sign(nil, "x", now, nil); err == nil {
		t.Fatal("Sign without secrets succeeded")
	}
}

// TestSignReused: a secret's signer, kept and reused (concurrently), gives
// the signature of a fresh HMAC every time, with one secret or several.
func TestSignReused(t *testing.T) {
	t.Parallel()
	other := webhook.NewSecret()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				id := refID + strconv.Itoa(g*1000+i)
				at := time.Unix(refTimestamp+int64(i), 0)
				got, err := webhook.Sign([]string{refSecret, other}, id, at, []byte(refBody))
				if err != nil {
					t.Error(err)
					return
				}
				for _, s := range []string{refSecret, other} {
					h := http.Header{}
					h.Set(webhook.HeaderID, id)
					h.Set(webhook.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
					h.Set(webhook.HeaderSignature, got)
					if err := webhook.VerifyAt(s, h, []byte(refBody), at, webhook.DefaultTolerance); err != nil {
						t.Errorf("%s: %v", got, err)
						return
					}
				}
				if one, _ := webhook.Sign([]string{refSecret}, id, at, []byte(refBody)); !strings.HasPrefix(got, one+" ") {
					t.Errorf("Sign with two secrets = %s, want it to start with %s", got, one)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func BenchmarkSign(b *testing.B) {
	secrets := []string{webhook.NewSecret()}
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := webhook.Sign(secrets, refID, at, nil); err != nil {
			b.Fatal(err)
		}
	}
}

package sqlstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/chimehq/chime/model"
)

// sealer seals secrets at rest with aead, and leaves them in clear
// without one.
type sealer struct {
	aead cipher.AEAD
}

// Encryption at rest. With Options.SecretKey, every secret value of a
// timer's action (model.Action.WalkSecrets: secret headers, the URL's
// password, shell env values, a handler's secret args), every webhook URL
// of notification rules (model.WalkNotifySecrets: a timer's and an app's)
// and of the notifications made of them, every signing secret and every
// app secret is stored as SealedPrefix + base64(nonce || AES-256-GCM
// ciphertext), with a random 12-byte nonce per value, inside the stored
// JSON or column. Reads decrypt. Without a key values are stored as they
// are; values stored before a key was configured (or before a kind of
// value became secret) are read as they are and encrypted at their next
// write.

// SecretKeySize is the length of Options.SecretKey: AES-256.
const SecretKeySize = 32

// SealedPrefix starts every encrypted value.
const SealedPrefix = "enc:v1:"

// ErrSecretKey is wrapped by the errors of reading an encrypted value
// without the key it was encrypted with (none, or another one).
var ErrSecretKey = errors.New("secret key")

// ParseSecretKey reads the value of --secret-key: the base64 of 32 bytes,
// or "@" and the path of a file holding it. Surrounding whitespace, of the
// value and of the file's content, is ignored.
func ParseSecretKey(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read key file: %w", err)
		}
		v = strings.TrimSpace(string(b))
	}
	if v == "" {
		return nil, errors.New("empty key: want the base64 of 32 random bytes (head -c 32 /dev/urandom | base64)")
	}
	var key []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err = enc.DecodeString(v); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("not base64: want the base64 of 32 random bytes (head -c 32 /dev/urandom | base64)")
	}
	if len(key) != SecretKeySize {
		return nil, fmt.Errorf("the key is %d bytes, want %d (head -c 32 /dev/urandom | base64)", len(key), SecretKeySize)
	}
	return key, nil
}

// newAEAD returns the cipher of key, nil for no key.
func newAEAD(key []byte) (cipher.AEAD, error) {
	if key == nil {
		return nil, nil
	}
	if len(key) != SecretKeySize {
		return nil, fmt.Errorf("secret key is %d bytes, want %d", len(key), SecretKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return cipher.NewGCM(block)
}

// sealAction returns a copy of a with its secrets sealed.
func (s sealer) sealAction(a model.Action) (model.Action, error) {
	c := a.Clone()
	err := c.WalkSecrets(func(ref model.SecretRef, v string) (string, error) {
		sealed, err := s.seal(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", ref.Field, err)
		}
		return sealed, nil
	})
	return c, err
}

// openAction opens the sealed secrets of a in place.
func (s sealer) openAction(a *model.Action) error {
	return a.WalkSecrets(func(ref model.SecretRef, v string) (string, error) {
		plain, err := s.open(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", ref.Field, err)
		}
		return plain, nil
	})
}

// sealNotify returns a copy of rules with their webhook URLs sealed.
func (s sealer) sealNotify(rules []model.NotifyRule) ([]model.NotifyRule, error) {
	c := model.CloneNotify(rules)
	err := model.WalkNotifySecrets("notify", c, func(field, v string) (string, error) {
		sealed, err := s.seal(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return sealed, nil
	})
	return c, err
}

// openNotify opens the sealed webhook URLs of rules in place.
func (s sealer) openNotify(rules []model.NotifyRule) error {
	return model.WalkNotifySecrets("notify", rules, func(field, v string) (string, error) {
		plain, err := s.open(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field, err)
		}
		return plain, nil
	})
}

// sealTarget and openTarget are seal and open for the target of a
// notification: a webhook's URL is secret, an email's recipients are not.
func (s sealer) sealTarget(channel, target string) (string, error) {
	if channel != model.ChannelWebhook {
		return target, nil
	}
	return s.seal(target)
}

func (s sealer) openTarget(channel, target string) (string, error) {
	if channel != model.ChannelWebhook {
		return target, nil
	}
	return s.open(target)
}

// seal prepares a secret for storage and open reverses it. Without a
// secret key they are the identity; see Options.SecretKey.
func (s sealer) seal(v string) (string, error) {
	if s.aead == nil {
		if strings.HasPrefix(v, SealedPrefix) {
			// It would read as an encrypted value.
			return "", fmt.Errorf("a secret value may not start with %q", SealedPrefix)
		}
		return v, nil
	}
	if v == "" {
		return v, nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("encrypt: %w", err)
	}
	return SealedPrefix + base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(v), nil)), nil
}

func (s sealer) open(v string) (string, error) {
	b64, ok := strings.CutPrefix(v, SealedPrefix)
	if !ok {
		return v, nil
	}
	if s.aead == nil {
		return "", fmt.Errorf("%w: the value is encrypted, but no secret key is configured: start chime with the --secret-key it was stored with", ErrSecretKey)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	n := s.aead.NonceSize()
	if err != nil || len(b) < n+s.aead.Overhead() {
		return "", fmt.Errorf("%w: the encrypted value is damaged", ErrSecretKey)
	}
	plain, err := s.aead.Open(nil, b[:n], b[n:], nil)
	if err != nil {
		return "", fmt.Errorf("%w: the value does not decrypt with the configured secret key: it was stored with another --secret-key (or is damaged)", ErrSecretKey)
	}
	return string(plain), nil
}

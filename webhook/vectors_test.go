package webhook_test

import (
	"net/http"
	"strconv"
)

// vector is one verification case. The reference message and its
// signature are the Standard Webhooks test suite's (libraries/go and
// libraries/python of github.com/standard-webhooks/standard-webhooks, the
// same as svix's); the other cases are the suites' failure cases made
// deterministic with a fixed receiver clock (Now). An empty ID, Timestamp
// or Signature leaves that header out.
type vector struct {
	Name      string `json:"name"`
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Signature string `json:"signature"`
	Body      string `json:"body"`
	Now       int64  `json:"now"`
	Valid     bool   `json:"valid"`
}

const (
	refSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	refID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	refTimestamp = 1614265330
	refBody      = `{"test": 2432232314}`
	refSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	otherSig     = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

// vectors returns the cases; each starts from the reference message.
func vectors() []vector {
	ref := vector{Secret: refSecret, ID: refID, Timestamp: strconv.Itoa(refTimestamp), Signature: refSignature,
		Body: refBody, Now: refTimestamp, Valid: true}
	v := func(name string, valid bool, mod func(*vector)) vector {
		c := ref
		c.Name, c.Valid = name, valid
		if mod != nil {
			mod(&c)
		}
		return c
	}
	return []vector{
		v("reference signature", true, nil),
		v("secret without whsec_ prefix", true, func(c *vector) { c.Secret = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }),
		v("multiple signatures, one valid", true, func(c *vector) {
			c.Signature = otherSig + " v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " + refSignature + " " + otherSig
		}),
		v("timestamp at the edge of the tolerance", true, func(c *vector) { c.Now = refTimestamp + 300 }),
		v("timestamp ahead at the edge of the tolerance", true, func(c *vector) { c.Now = refTimestamp - 300 }),
		v("invalid signature", false, func(c *vector) { c.Signature = otherSig }),
		v("signature one character off", false, func(c *vector) { c.Signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=" }),
		v("partial signature", false, func(c *vector) { c.Signature = "v1," }),
		v("right value, wrong version", false, func(c *vector) { c.Signature = "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" }),
		v("wrong secret", false, func(c *vector) { c.Secret = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
		v("old timestamp", false, func(c *vector) { c.Now = refTimestamp + 301 }),
		v("new timestamp", false, func(c *vector) { c.Now = refTimestamp - 301 }),
		v("missing id", false, func(c *vector) { c.ID = "" }),
		v("missing timestamp", false, func(c *vector) { c.Timestamp = "" }),
		v("missing signature", false, func(c *vector) { c.Signature = "" }),
		v("timestamp not a number", false, func(c *vector) { c.Timestamp = "hello" }),
		v("tampered body", false, func(c *vector) { c.Body = `{"test": 2432232315}` }),
		v("other message id", false, func(c *vector) { c.ID = "msg_p5jXN8AQM9LWM0D4loKWxJel" }),
		v("timestamp changed within tolerance", false, func(c *vector) { c.Timestamp = strconv.Itoa(refTimestamp + 1) }),
	}
}

func (c vector) header() http.Header {
	h := http.Header{}
	for k, v := range map[string]string{"webhook-id": c.ID, "webhook-timestamp": c.Timestamp, "webhook-signature": c.Signature} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

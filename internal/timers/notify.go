package timers

import (
	"fmt"
	"net/mail"
	"net/url"

	"github.com/chimehq/chime/model"
)

// MaxNotifyRules bounds a timer's (or an app's) notification rules.
const MaxNotifyRules = 10

// MaxThreshold bounds a consecutive_failures rule's threshold.
const MaxThreshold = 1000

// ValidatePriority checks a timer's priority: unset (the default,
// model.DefaultPriority) or between model.MinPriority and
// model.MaxPriority.
func ValidatePriority(p *int) error {
	if p != nil && (*p < model.MinPriority || *p > model.MaxPriority) {
		return model.Errorf("priority", "must be between %d and %d, got %d", model.MinPriority, model.MaxPriority, *p)
	}
	return nil
}

// ValidateNotify checks notification rules; field names the list in
// errors ("notify", or "notify" of an app's defaults). Each rule needs a
// known On, a webhook with an http or https URL and/or an email with 1 to
// 100 addresses, and for consecutive_failures a threshold from 1 to
// MaxThreshold. Where a webhook may connect is checked when it is sent,
// against the node's egress policy, as for callbacks. emailAllowed, when
// not nil, refuses email addresses the node may not send to
// (--email-allow); they are checked again when sent.
func ValidateNotify(field string, rules []model.NotifyRule, emailAllowed func(address string) error) error {
	if len(rules) > MaxNotifyRules {
		return model.Errorf(field, "has more than %d rules", MaxNotifyRules)
	}
	for i, r := range rules {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch r.On {
		case model.NotifyFailure, model.NotifyRecovery:
			if r.Threshold != 0 {
				return model.Errorf(f+".threshold", "is only for on consecutive_failures")
			}
		case model.NotifyConsecutiveFailures:
			if r.Threshold < 1 || r.Threshold > MaxThreshold {
				return model.Errorf(f+".threshold", "must be between 1 and %d, got %d", MaxThreshold, r.Threshold)
			}
		case "":
			return model.Errorf(f+".on", "is required (failure, recovery or consecutive_failures)")
		default:
			return model.Errorf(f+".on", "must be failure, recovery or consecutive_failures, got %q", r.On)
		}
		if r.Webhook == nil && r.Email == nil {
			return model.Errorf(f, "needs a webhook or an email")
		}
		if w := r.Webhook; w != nil {
			u, err := url.Parse(w.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return model.Errorf(f+".webhook.url", "must be an http or https URL, got %q", w.URL)
			}
			if len(w.URL) > 2048 {
				return model.Errorf(f+".webhook.url", "is longer than 2048 bytes")
			}
		}
		if e := r.Email; e != nil {
			if len(e.To) == 0 || len(e.To) > 100 {
				return model.Errorf(f+".email.to", "must list 1 to 100 addresses")
			}
			for _, a := range e.To {
				addr, err := mail.ParseAddress(a)
				if err != nil {
					return model.Errorf(f+".email.to", "%q is not an email address", a)
				}
				if emailAllowed != nil {
					if err := emailAllowed(addr.Address); err != nil {
						return model.Errorf(f+".email.to", "%v", err)
					}
				}
			}
		}
	}
	return nil
}

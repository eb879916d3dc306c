package model

// The X-Chime-* headers of chime's requests: the callbacks of HTTP actions
// (package action) and the webhook notifications (package notify), besides
// the Standard Webhooks headers (webhook-id, webhook-timestamp,
// webhook-signature) of package webhook.
const (
	HeaderTimerID     = "X-Chime-Timer-ID"
	HeaderRunID       = "X-Chime-Run-ID"
	HeaderScheduledAt = "X-Chime-Scheduled-At"
	// HeaderDueAt is the instant the attempt was due (the run's due_at):
	// the scheduled instant plus the timer's jitter for a first attempt on
	// time, the retry's instant for a retry.
	HeaderDueAt   = "X-Chime-Due-At"
	HeaderAttempt = "X-Chime-Attempt"
	// HeaderNode names the node that sent the attempt, so that a receiver
	// can tell where each of two deliveries of one run came from.
	HeaderNode = "X-Chime-Node"
	// HeaderShardIndex and HeaderShardTotal are sent by the shards of a
	// fire split over nodes (broadcast, shards): which shard, from 0, of
	// how many.
	HeaderShardIndex = "X-Chime-Shard-Index"
	HeaderShardTotal = "X-Chime-Shard-Total"
	// HeaderUpstreamRunID is sent by a run made because its timer's
	// upstreams ended (Timer.After): the upstream run whose end made it
	// (Run.UpstreamRunID). Other runs send none, whatever the timer's own
	// headers say.
	HeaderUpstreamRunID = "X-Chime-Upstream-Run-ID"
	// HeaderRerunOf is sent by a rerun (Run.RerunOf): the run it runs
	// again, whose scheduled instant it sends as HeaderScheduledAt. Other
	// runs send none, whatever the timer's own headers say.
	HeaderRerunOf = "X-Chime-Rerun-Of"
	// HeaderNotification is the event of a webhook notification (a
	// model.Notify* code).
	HeaderNotification = "X-Chime-Notification"
)

package transport

// Gossip member statuses.
const (
	MemberAlive = "alive"
	MemberDead  = "dead" // declared dead by memberlist's failure detection
	MemberLeft  = "left" // said it was leaving, then left (maosd stopped)
)

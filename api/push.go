package api

import (
	"net"
	"net/url"
	"strings"
	"unicode"
)

// A2A push notifications (docs/A2A.md "Push notifications"): a task's
// push configs, replicated, and the deliverer's cursor. All three ops
// need cluster state version 3.
const (
	// OpPushConfigSet sets (adds or replaces) one push config of a task
	// (body: PushConfigSetCommand).
	OpPushConfigSet Op = "push_config_set"
	// OpPushConfigDelete deletes one (body: PushConfigDeleteCommand).
	OpPushConfigDelete Op = "push_config_delete"
	// OpPushCursor records how far the deliverer got (body:
	// PushCursorCommand).
	OpPushCursor Op = "push_cursor"
)

// Limits of push configs.
const (
	MaxPushConfigsPerTask = 8    // configs one task holds
	MaxPushURLLen         = 2048 // bytes
	MaxPushTokenLen       = 512  // bytes
	MaxPushCredentialLen  = 4096 // bytes
)

// PushConfig is one push notification config of a task: where the
// deliverer POSTs the task's updates (A2A's TaskPushNotificationConfig).
// TaskID and ID (unique per task; the pattern of a task id) name it; URL
// is absolute http or https without user info, at most MaxPushURLLen
// bytes; Token, optional (at most MaxPushTokenLen bytes, one token), is
// sent back as the header A2A-Notification-Token so the receiver can
// check the push is for it; Authentication, optional, is how the
// deliverer authenticates to URL. Index, set by the state, is the entry
// that set it: the config receives the updates of later entries.
type PushConfig struct {
	TaskID         string              `json:"task_id"`
	ID             string              `json:"id"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *PushAuthentication `json:"authentication,omitempty"`
	Index          uint64              `json:"index,omitempty"`
}

// PushAuthentication is a push config's authentication: Scheme "Bearer"
// or "Basic" (any case; the deliverer sends "Authorization: <Scheme>
// <Credentials>"), Credentials at most MaxPushCredentialLen bytes, one
// token. Credentials are kept in the state but shown by no read except the
// deliverer's (admin only, GET /v1/push/tasks/{id}).
type PushAuthentication struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// PushConfigSetCommand is the body of OpPushConfigSet and of POST
// /v1/tasks/{id}/push: From, the task's creator (a token acts only for its
// own agent, an admin for anyone), sets Config.
type PushConfigSetCommand struct {
	From   string     `json:"from"`
	Config PushConfig `json:"config"`
}

// PushConfigDeleteCommand is the body of OpPushConfigDelete (DELETE
// /v1/tasks/{id}/push/{config}?from=): From, the task's creator, deletes
// config ID of task TaskID.
type PushConfigDeleteCommand struct {
	From   string `json:"from"`
	TaskID string `json:"task_id"`
	ID     string `json:"id"`
}

// PushCursorCommand is the body of OpPushCursor (PUT /v1/push/cursor,
// admin only): every task event of the entries up to Index was delivered.
// A cursor never moves back: a lower Index changes nothing.
type PushCursorCommand struct {
	Index uint64 `json:"index"`
}

// PushCursor is the deliverer's replicated position (GET
// /v1/push/cursor): Index as PushCursorCommand's; Since, the entry of the
// first push config ever set (0: none), so a deliverer without a cursor
// starts there, not at the log's start.
type PushCursor struct {
	Index uint64 `json:"index"`
	Since uint64 `json:"since"`
}

// PushConfigPage is a task's push configs, in id order, as the state held
// them at entry Index (the applied index of the read).
type PushConfigPage struct {
	Index   uint64       `json:"index"`
	Configs []PushConfig `json:"configs"`
}

// Validate checks the config's fields; the error is a *FieldError naming
// config.<field> and the limit (never quoting a credential or token).
func (p *PushConfig) Validate() error {
	switch {
	case CheckTaskRef(p.TaskID) != nil:
		return FieldErrorf("config.task_id", "%q is not a task id", clipText(p.TaskID, 200))
	case !idRE.MatchString(p.ID):
		return FieldErrorf("config.id", "%q: want 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", clipText(p.ID, 200))
	}
	if err := checkCalledURL("config.url", p.URL, MaxPushURLLen, "the URL the task's updates are POSTed to"); err != nil {
		return err
	}
	if err := checkPushSecret("config.token", p.Token, MaxPushTokenLen); err != nil {
		return err
	}
	if a := p.Authentication; a != nil {
		if s := strings.ToLower(a.Scheme); s != "bearer" && s != "basic" {
			return FieldErrorf("config.authentication.scheme", "%q: want Bearer or Basic", clipText(a.Scheme, 50))
		}
		return checkPushSecret("config.authentication.credentials", a.Credentials, MaxPushCredentialLen)
	}
	return nil
}

func checkPushSecret(field, s string, limit int) error {
	if len(s) > limit {
		return FieldErrorf(field, "%d bytes, at most %d", len(s), limit)
	}
	if strings.IndexFunc(s, func(c rune) bool { return unicode.IsControl(c) || c == ' ' }) >= 0 {
		return FieldErrorf(field, "must be one token: no spaces or control characters")
	}
	return nil
}

// View is p as a read shows it: without the authentication's
// credentials.
func (p PushConfig) View() PushConfig {
	if p.Authentication != nil {
		p.Authentication = &PushAuthentication{Scheme: p.Authentication.Scheme}
	}
	return p
}

// Validate checks from (an agent id) and the config.
func (c *PushConfigSetCommand) Validate() error {
	if err := CheckAgentField("from", c.From); err != nil {
		return err
	}
	return c.Config.Validate()
}

// Validate checks from, the task id and the config id.
func (c *PushConfigDeleteCommand) Validate() error {
	if err := CheckAgentField("from", c.From); err != nil {
		return err
	}
	if CheckTaskRef(c.TaskID) != nil {
		return FieldErrorf("task_id", "%q is not a task id", clipText(c.TaskID, 200))
	}
	if !idRE.MatchString(c.ID) {
		return FieldErrorf("id", "%q is not a push config id", clipText(c.ID, 200))
	}
	return nil
}

// Validate accepts every index.
func (c *PushCursorCommand) Validate() error { return nil }

// CheckPushURL checks rawURL against an operator's allowlist (maosd
// --a2a-push-allow): its host must be one of allow, an entry being a host
// (any port) or host:port (that port), compared without case. An empty
// allowlist allows nothing: push notifications are off. The error is a
// *FieldError on config.url saying which host is not allowed.
func CheckPushURL(allow []string, rawURL string) error {
	if len(allow) == 0 {
		return FieldErrorf("config.url", "push notifications are off on this node (maosd --a2a-push-allow names the hosts it may call)")
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return FieldErrorf("config.url", "%q is not an absolute URL", clipText(rawURL, 200))
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == host || a == net.JoinHostPort(host, port) {
			return nil
		}
	}
	return FieldErrorf("config.url", "host %s is not one this node may call (maosd --a2a-push-allow: %s)", u.Host, strings.Join(allow, ","))
}

package a2ahost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// HeaderNotificationToken is the header a push carries a config's token
// in (the a2a-go SDK's push sender's).
const HeaderNotificationToken = "A2A-Notification-Token"

// httpSender sends a push as the SDK's push.HTTPPushSender does (the body
// an a2a.StreamResponse, the token in HeaderNotificationToken,
// "Authorization: Bearer|Basic <credentials>"), with two differences: it
// never follows a redirect (an allowed host must not lead the node to one
// the operator did not allow: a 3xx is a failed try), and every failure is
// an error (the SDK's sender only logs unless told otherwise).
type httpSender struct{ client *http.Client }

func newHTTPSender(timeout time.Duration) *httpSender {
	return &httpSender{client: &http.Client{Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// SendPush POSTs event to config's URL. Error: the request's, or a
// status other than 2xx.
func (s *httpSender) SendPush(ctx context.Context, config *a2a.PushConfig, event a2a.Event) error {
	body, err := json.Marshal(a2a.StreamResponse{Event: event})
	if err != nil {
		return fmt.Errorf("push: encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, config.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if config.Token != "" {
		req.Header.Set(HeaderNotificationToken, config.Token)
	}
	if a := config.Auth; a != nil && a.Credentials != "" {
		switch strings.ToLower(a.Scheme) {
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+a.Credentials)
		case "basic":
			req.Header.Set("Authorization", "Basic "+a.Credentials)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("push: %s answered %s", config.URL, resp.Status)
	}
	return nil
}

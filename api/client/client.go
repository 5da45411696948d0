package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/maos-project/maos/api"
)

// Client speaks API v1 to one node. It is safe for concurrent use; its
// connections are pooled and kept alive, so many goroutines can share one
// Client without serialising on a connection.
type Client struct {
	base      string // "http://host:port"
	hc        *http.Client
	forwarded bool
	token     string // bearer secret (WithToken); "" sends none
	cluster   string // HeaderCluster (WithCluster); "" sends none
}

// NewClient returns a client for the node at addr ("host:port" or a URL).
// A nil hc means a client with a pooled transport and no overall timeout
// (calls are bounded by their context).
func NewClient(addr string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Transport: NewHTTPTransport()}
	}
	base := strings.TrimRight(addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{base: base, hc: hc}
}

// NewHTTPTransport returns the pooled transport maos uses between nodes and
// from clients: many idle connections per host so concurrent requests run in
// parallel, short dial timeout so a dead node is noticed quickly.
func NewHTTPTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
}

// Addr is the base URL the client talks to.
func (c *Client) Addr() string { return c.base }

// Forwarding returns a copy whose requests carry HeaderForwarded, for a node
// relaying a request to the leader.
func (c *Client) Forwarding() *Client {
	cp := *c
	cp.forwarded = true
	return &cp
}

// Send posts m and returns where it was committed.
func (c *Client) Send(ctx context.Context, m *api.Message) (*api.SendResponse, error) {
	return c.SendFenced(ctx, m, 0)
}

// Message fetches one message by id.
func (c *Client) Message(ctx context.Context, id string, cons api.Consistency) (*api.Message, error) {
	var out api.Message
	if err := c.do(ctx, http.MethodGet, "/v1/messages/"+url.PathEscape(id), consQuery(cons), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ChannelPage fetches up to limit messages of channel after seq after.
func (c *Client) ChannelPage(ctx context.Context, channel string, after uint64, limit int, cons api.Consistency) (api.Page, error) {
	q := listQuery(cons, limit, map[string]string{"after": seqParam(after)})
	return request[api.Page](ctx, c, http.MethodGet, "/v1/channels/"+url.PathEscape(channel)+"/messages", q, nil)
}

// Channels lists the channels with their counts.
func (c *Client) Channels(ctx context.Context, cons api.Consistency) ([]api.ChannelInfo, error) {
	var out api.ChannelsResponse
	err := c.do(ctx, http.MethodGet, "/v1/channels", consQuery(cons), nil, &out)
	return out.Channels, err
}

// Status returns the node's view of the cluster.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	return request[api.Status](ctx, c, http.MethodGet, "/v1/cluster/status", nil, nil)
}

// Health returns nil when the process answers /healthz.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Ready returns nil when the node answers /readyz with 200.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// Join asks the cluster (through this node) to add a voter.
func (c *Client) Join(ctx context.Context, req api.JoinRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/cluster/join", nil, req, nil)
}

// Remove asks the cluster to remove a server.
func (c *Client) Remove(ctx context.Context, nodeID string) error {
	return c.do(ctx, http.MethodDelete, "/v1/cluster/nodes/"+url.PathEscape(nodeID), nil, nil, nil)
}

// Snapshot makes this node take a snapshot now.
func (c *Client) Snapshot(ctx context.Context) (api.SnapshotResponse, error) {
	return request[api.SnapshotResponse](ctx, c, http.MethodPost, "/v1/cluster/snapshot", nil, nil)
}

// TransferLeadership asks the leader to hand over to nodeID ("" for any).
func (c *Client) TransferLeadership(ctx context.Context, nodeID string) (api.TransferResponse, error) {
	return request[api.TransferResponse](ctx, c, http.MethodPost, "/v1/cluster/transfer-leadership", nil, api.TransferRequest{NodeID: nodeID})
}

func consQuery(c api.Consistency) url.Values {
	q := url.Values{}
	if c != "" && c != api.Local {
		q.Set("consistency", string(c))
	}
	return q
}

// listQuery is the query of a list read: the consistency, each of params
// that is set (not ""), and limit when above 0 (0: the server's default).
func listQuery(cons api.Consistency, limit int, params map[string]string) url.Values {
	q := consQuery(cons)
	for k, v := range params {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// seqParam is a seq as a query parameter; 0 is "", left out.
func seqParam(seq uint64) string {
	if seq == 0 {
		return ""
	}
	return strconv.FormatUint(seq, 10)
}

// do sends one request with a JSON body (in, nil for none) and decodes
// the answer into out (nil to ignore it).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	var raw []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("transport: encode %s %s: %w", method, path, err)
		}
		raw = b
	}
	return c.doRaw(ctx, method, path, q, nil, raw, out, nil)
}

// request is do for a call whose answer is a T: it returns the decoded
// answer.
func request[T any](ctx context.Context, c *Client, method, path string, q url.Values, in any) (T, error) {
	var out T
	err := c.do(ctx, method, path, q, in, &out)
	return out, err
}

// doRaw sends one request with extra headers and a body already encoded as
// JSON. A non-2xx answer with an error body becomes an *APIError (or, for a
// 409 when conflict is set, whatever conflict makes of it and the raw
// body); a transport failure is returned wrapped with the address.
func (c *Client) doRaw(ctx context.Context, method, path string, q url.Values, h http.Header, in []byte,
	out any, conflict func(*api.APIError, []byte) error) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if in != nil {
		body = bytes.NewReader(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("transport: %s %s: %w", method, u, err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	if in != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.forwarded {
		req.Header.Set(api.HeaderForwarded, "1")
	}
	c.setAuth(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.requestError(method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("transport: %s %s: read body: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == nil || eb.Error.Code == "" {
			return &api.APIError{Status: resp.StatusCode, Code: api.CodeInternal,
				Message: fmt.Sprintf("%s %s: %s", method, u, strings.TrimSpace(string(data)))}
		}
		eb.Error.Status = resp.StatusCode
		eb.Error.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
		if resp.StatusCode == http.StatusConflict && conflict != nil {
			return conflict(eb.Error, data)
		}
		return eb.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("transport: %s %s: decode answer: %w", method, u, err)
	}
	return nil
}

// ReadIndex asks the node (the leader) for a confirmed read index.
func (c *Client) ReadIndex(ctx context.Context) (uint64, error) {
	var out api.ReadIndexResponse
	err := c.do(ctx, http.MethodGet, "/v1/internal/read-index", nil, nil, &out)
	return out.Index, err
}

// Config returns the cluster settings.
func (c *Client) Config(ctx context.Context, cons api.Consistency) (api.ClusterConfig, error) {
	return request[api.ClusterConfig](ctx, c, http.MethodGet, "/v1/cluster/config", consQuery(cons), nil)
}

// SetConfig changes one cluster setting (value is any JSON value) and
// returns the settings after the change.
func (c *Client) SetConfig(ctx context.Context, key string, value any) (api.ClusterConfig, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return api.ClusterConfig{}, fmt.Errorf("transport: encode %s: %w", key, err)
	}
	var out api.ClusterConfig
	err = c.do(ctx, http.MethodPut, "/v1/cluster/config", nil, api.SetConfigCommand{Key: key, Value: raw}, &out)
	return out, err
}

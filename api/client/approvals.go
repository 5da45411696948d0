package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maos-project/maos/api"
)

// RequestApproval opens an approval (POST /v1/approvals) and returns its
// id, the entry's index, its state (pending) and the action's hash. Set
// cmd.ID (api.NewApprovalID) before the first try so that a retry is
// stored once; without one the node picks it.
func (c *Client) RequestApproval(ctx context.Context, cmd api.ApprovalRequestCommand) (api.ApprovalResult, error) {
	return request[api.ApprovalResult](ctx, c, http.MethodPost, "/v1/approvals", nil, cmd)
}

// Approval returns one approval with its decisions (GET
// /v1/approvals/{id}), read with consistency=strong so it sees every
// decision acknowledged before the call.
func (c *Client) Approval(ctx context.Context, id string) (*api.Approval, error) {
	a, err := request[api.Approval](ctx, c, http.MethodGet, approvalPath(id, ""), consQuery(api.Strong), nil)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Approvals lists approvals in creation order, without their decisions
// (GET /v1/approvals), read with consistency=strong. Continue a page with
// q.After set to the last approval's Seq while HasMore.
func (c *Client) Approvals(ctx context.Context, q api.ApprovalQuery) (api.ApprovalPage, error) {
	v := listQuery(api.Strong, q.Limit, map[string]string{
		"state": string(q.State), "approver": q.Approver, "from": q.From, "after": seqParam(q.After)})
	return request[api.ApprovalPage](ctx, c, http.MethodGet, "/v1/approvals", v, nil)
}

// DecideApproval records cmd.Approver's decision on the action whose hash
// is cmd.ActionHash (POST /v1/approvals/{id}/decide) and returns the
// approval as the decision left it, with its decisions.
func (c *Client) DecideApproval(ctx context.Context, cmd api.ApprovalDecideCommand) (*api.Approval, error) {
	a, err := request[api.Approval](ctx, c, http.MethodPost, approvalPath(cmd.ID, "decide"), nil, cmd)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// CancelApproval cancels a pending approval (POST
// /v1/approvals/{id}/cancel); only its requester may (an admin token acts
// as the requester). A retried cancel of a cancelled approval answers it
// again.
func (c *Client) CancelApproval(ctx context.Context, cmd api.ApprovalCancelCommand) (api.ApprovalResult, error) {
	return request[api.ApprovalResult](ctx, c, http.MethodPost, approvalPath(cmd.ID, "cancel"), nil, cmd)
}

// approvalPath is /v1/approvals/{id}, or /v1/approvals/{id}/{verb}.
func approvalPath(id, verb string) string {
	p := "/v1/approvals/" + url.PathEscape(id)
	if verb != "" {
		p += "/" + verb
	}
	return p
}

package console

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/maos-project/maos/api"
	"github.com/maos-project/maos/api/client"
)

// NodeView is one voter as the cluster view shows it: its own status,
// asked of it with the caller's token, or why it did not answer.
type NodeView struct {
	NodeID       string `json:"node_id"`
	APIAddr      string `json:"api_addr"`
	Suffrage     string `json:"suffrage"`
	Reachable    bool   `json:"reachable"`
	Error        string `json:"error,omitempty"`
	State        string `json:"state,omitempty"`
	Term         uint64 `json:"term,omitempty"`
	CommitIndex  uint64 `json:"commit_index,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	LastIndex    uint64 `json:"last_index,omitempty"`
	LeaderID     string `json:"leader_id,omitempty"`
	// LastContact is when this node last heard from it: the later of
	// its last answer to this node's console and its last answer to this
	// node's gossip probes (api.Member.LastContact), so a node that died
	// before anyone opened this console still shows when it was last up.
	LastContact *time.Time `json:"last_contact,omitempty"`
}

// ClusterView is GET /ui/api/cluster: every voter's status (asked of each
// node), this node's gossip members and who it takes for leader.
type ClusterView struct {
	NodeID   string       `json:"node_id"` // the node answering
	LeaderID string       `json:"leader_id"`
	Nodes    []NodeView   `json:"nodes"`
	Members  []api.Member `json:"members"`
}

// cluster answers the cluster view. This node's status and members come
// from its API in process, with the caller's token (so a caller the API
// refuses is refused here in its words); each other voter's status from
// that node's GET /v1/cluster/status with the same token, at most
// PeerTimeout each, all at once.
func (c *console) cluster(w http.ResponseWriter, r *http.Request) {
	secret := c.token(r)
	rec := c.local(r, "/v1/cluster/status", secret)
	if rec.code != http.StatusOK {
		relay(w, rec)
		return
	}
	var own api.Status
	if err := json.Unmarshal(rec.body.Bytes(), &own); err != nil {
		writeErr(w, http.StatusInternalServerError, "cluster status: "+err.Error())
		return
	}
	view := ClusterView{NodeID: own.NodeID, LeaderID: own.LeaderID, Nodes: make([]NodeView, len(own.Voters))}
	if rec := c.local(r, "/v1/cluster/members", secret); rec.code == http.StatusOK {
		var m api.MembersResponse
		if json.Unmarshal(rec.body.Bytes(), &m) == nil {
			view.Members = m.Members
		}
	}
	var wg sync.WaitGroup
	for i, v := range own.Voters {
		nv := &view.Nodes[i]
		nv.NodeID, nv.APIAddr, nv.Suffrage = v.ID, v.APIAddr, v.Suffrage
		if v.ID == own.NodeID {
			c.fill(nv, own, nil)
			continue
		}
		if v.APIAddr == "" {
			nv.Error = "no API address known"
			c.fill(nv, api.Status{}, errNoAddr)
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), c.opts.PeerTimeout)
			defer cancel()
			st, err := c.client(v.APIAddr, r.TLS != nil).WithToken(secret).Status(ctx)
			c.fill(nv, st, err)
		})
	}
	wg.Wait()
	gossipContact(view.Nodes, view.Members)
	sort.Slice(view.Nodes, func(i, j int) bool { return view.Nodes[i].NodeID < view.Nodes[j].NodeID })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(view)
}

// gossipContact makes each node's LastContact the later of the console's
// and gossip's: memberlist probes every member about once a second
// whether or not a page is open, and keeps the last answer of one that
// died.
func gossipContact(nodes []NodeView, members []api.Member) {
	seen := make(map[string]*time.Time, len(members))
	for _, m := range members {
		seen[m.NodeID] = m.LastContact
	}
	for i := range nodes {
		if t := seen[nodes[i].NodeID]; t != nil && (nodes[i].LastContact == nil || t.After(*nodes[i].LastContact)) {
			nodes[i].LastContact = t
		}
	}
}

type noAddr struct{}

func (noAddr) Error() string { return "no API address known" }

var errNoAddr error = noAddr{}

// fill completes nv from the node's answer (or error), and records or
// reads when it last answered.
func (c *console) fill(nv *NodeView, st api.Status, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		nv.Reachable = true
		nv.State, nv.Term, nv.LeaderID = st.State, st.Term, st.LeaderID
		nv.CommitIndex, nv.AppliedIndex, nv.LastIndex = st.CommitIndex, st.AppliedIndex, st.LastIndex
		c.contact[nv.NodeID] = time.Now().UTC()
	} else {
		nv.Error = err.Error()
	}
	if t, ok := c.contact[nv.NodeID]; ok {
		nv.LastContact = &t
	}
}

// client is the API client for another node's address, kept per address.
func (c *console) client(addr string, https bool) *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[addr]; ok {
		return cl
	}
	var cl *client.Client
	if https && c.opts.ClientTLS != nil {
		cl = client.NewClientTLS(addr, &http.Client{Transport: client.NewHTTPTransportTLS(c.opts.ClientTLS)})
	} else {
		cl = client.NewClient(addr, nil)
	}
	c.clients[addr] = cl
	return cl
}

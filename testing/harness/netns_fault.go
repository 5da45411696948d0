package harness

import (
	"errors"
	"fmt"
	"strings"
)

// cutRoutes makes the routes of every node's namespace match drops: for
// each link from -> to, from's namespace holds a blackhole route to to's
// address. A blackhole drops every packet the namespace sends there, TCP
// and UDP alike, so one route cuts Raft, the API (a follower's forwarding
// to the leader) and gossip at once; what the namespace receives is
// untouched, which is what makes a one-way cut possible. Locally sent
// packets to a blackholed address fail at once (connect and sendto return
// EINVAL) rather than time out; packets of a connection already open are
// dropped and retransmitted until the connection times out. The test
// process is in none of the namespaces, so its requests still reach
// every node. The routes that are already right are left alone.
func (c *Cluster) cutRoutes(drops map[link]bool) error {
	h := c.net
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for l := range h.drops {
		if drops[l] {
			continue
		}
		if err := h.route(l, "del"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(h.drops, l)
	}
	for l := range drops {
		if h.drops[l] {
			continue
		}
		if err := h.route(l, "replace"); err != nil {
			errs = append(errs, err)
			continue
		}
		h.drops[l] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("harness: cut links: %w", errors.Join(errs...))
	}
	return nil
}

// route adds ("replace") or removes ("del") the blackhole route of l;
// call it with h.mu held.
func (h *hostNet) route(l link, op string) error {
	from, to := h.byID[l.from], h.byID[l.to]
	if from == nil || to == nil {
		return fmt.Errorf("%s -> %s: not a node of this cluster's network", l.from, l.to)
	}
	return h.run("-n", from.ns, "route", op, "blackhole", to.ip+"/32")
}

// blackholes lists the addresses node id's namespace blackholes, as the
// kernel reports them: what its tests check the cuts against.
func (h *hostNet) blackholes(id string) ([]string, error) {
	h.mu.Lock()
	host := h.byID[id]
	h.mu.Unlock()
	if host == nil {
		return nil, fmt.Errorf("harness: %s has no namespace", id)
	}
	out, err := h.output("-n", host.ns, "-4", "route", "show", "type", "blackhole")
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "blackhole" {
			ips = append(ips, f[1])
		}
	}
	return ips, nil
}

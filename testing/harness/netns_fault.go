package harness

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
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
// every node.
//
// The routes that are already right are left alone; the changes of each
// namespace go in one `ip -batch`, and the namespaces are changed
// concurrently, so a fault takes hold at nearly the same moment
// everywhere rather than one route at a time.
func (c *Cluster) cutRoutes(drops map[link]bool) error {
	h := c.net
	h.mu.Lock()
	defer h.mu.Unlock()
	batches := map[string][]string{} // by the sending node's id
	add := func(l link, op string) error {
		to := h.byID[l.to]
		if h.byID[l.from] == nil || to == nil {
			return fmt.Errorf("harness: cut links: %s -> %s: not a node of this cluster's network", l.from, l.to)
		}
		batches[l.from] = append(batches[l.from], "route "+op+" blackhole "+to.ip+"/32")
		return nil
	}
	for l := range h.drops {
		if !drops[l] {
			if err := add(l, "del"); err != nil {
				return err
			}
		}
	}
	for l := range drops {
		if !h.drops[l] {
			if err := add(l, "replace"); err != nil {
				return err
			}
		}
	}
	errs := make(map[string]error, len(batches))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for from, lines := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.runBatch(h.byID[from].ns, lines); err != nil {
				mu.Lock()
				errs[from] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for from := range batches {
		if errs[from] == nil {
			for l := range h.drops {
				if l.from == from && !drops[l] {
					delete(h.drops, l)
				}
			}
			for l := range drops {
				if l.from == from {
					h.drops[l] = true
				}
			}
			continue
		}
		// Part of the batch may have applied: learn what did.
		if err := h.resync(from); err != nil {
			errs[from] = errors.Join(errs[from], err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	ids := make([]string, 0, len(errs))
	for id := range errs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	all := make([]error, len(ids))
	for i, id := range ids {
		all[i] = fmt.Errorf("%s: %w", id, errs[id])
	}
	return fmt.Errorf("harness: cut links: %w", errors.Join(all...))
}

// cuts is a copy of the links whose blackhole routes are in place.
func (h *hostNet) cuts() map[link]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[link]bool, len(h.drops))
	for l := range h.drops {
		out[l] = true
	}
	return out
}

// runBatch runs lines as one `ip -n ns -batch -`; the error quotes ip's
// output.
func (h *hostNet) runBatch(ns string, lines []string) error {
	return h.runIn(strings.Join(lines, "\n")+"\n", "-n", ns, "-batch", "-")
}

// resync sets the drops of node from to the blackhole routes its
// namespace holds; call it with h.mu held.
func (h *hostNet) resync(from string) error {
	ips, err := h.blackholesOf(h.byID[from])
	if err != nil {
		return err
	}
	holed := map[string]bool{}
	for _, ip := range ips {
		holed[ip] = true
	}
	for id, host := range h.byID {
		l := link{from, id}
		if holed[host.ip] {
			h.drops[l] = true
		} else {
			delete(h.drops, l)
		}
	}
	return nil
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
	return h.blackholesOf(host)
}

func (h *hostNet) blackholesOf(host *nsHost) ([]string, error) {
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

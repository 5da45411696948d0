package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/maos-project/maos/api"
)

// The global bulletin: one replicated JSON document every agent reads for
// shared awareness (the seed's global_bulletin/status.json):
//
//	{"system_status": "normal", "current_phase": "implementation",
//	 "warnings": [], "shared_resources": {"api_server": "available"}, ...}
//
// Locks in shared_resources. Every lock shows in the document read back as
// shared_resources[path] = {"managed_by":"lock","holder","token",
// "acquired_at","expires_at","expired"}. These entries are not stored in
// the document: they are composed at read time from the locks bucket in
// the same read transaction, so they always agree with the locks, cost no
// second write, and the 64 KiB document limit does not cap the number of
// locks. Writers own everything else, including other keys of
// shared_resources ("api_server": "available"). A PUT or PATCH that carries
// entries with "managed_by":"lock" has them dropped, so reading the
// bulletin, editing it and putting it back is safe; a written key equal to
// a locked path is shadowed by the lock's entry while the lock exists.
// Lock changes do not move the version: compare-and-set protects what
// bulletin writers write, and lock churn must not fail their writes.

// mergePatch applies an RFC 7396 merge patch to target.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
		} else {
			tm[k] = mergePatch(tm[k], v)
		}
	}
	return tm
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode: %v", err))
	}
	return b
}

// changedKeys lists, sorted, the top-level keys added, removed or altered.
func changedKeys(old, next map[string]any) []string {
	var out []string
	for k, v := range next {
		if ov, ok := old[k]; !ok || !bytes.Equal(mustJSON(ov), mustJSON(v)) {
			out = append(out, k)
		}
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// describeChanges renders changed keys for the audit line, with the new
// value of the short well-known ones: "system_status=degraded, warnings".
func describeChanges(changed []string, doc map[string]any) string {
	if len(changed) == 0 {
		return "no change"
	}
	parts := make([]string, 0, len(changed))
	for _, k := range changed {
		v, ok := doc[k]
		switch {
		case !ok:
			parts = append(parts, k+" deleted")
		case k == "system_status" || k == "current_phase":
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		default:
			parts = append(parts, k)
		}
	}
	return api.FirstLine(strings.Join(parts, ", "), 400)
}

#!/usr/bin/env bash
# make demo: a local 3-node maos cluster on loopback. Sends a few messages
# through a follower, reads them back from every node, prints the cluster
# status, and stops every node it started (also on Ctrl-C).
#
#   DEMO_BASE_PORT  first port (default 27070); nodes use BASE, BASE+10, BASE+20
#                   for HTTP and the next port up for Raft
#   DEMO_KEEP=1     keep the cluster running until Ctrl-C
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
base=${DEMO_BASE_PORT:-27070}
dir=$(mktemp -d "${TMPDIR:-/tmp}/maos-demo.XXXXXX")
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped ${#pids[@]} nodes; logs and data were in $dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

api() { echo "127.0.0.1:$((base + 10 * ($1 - 1)))"; }
raft() { echo "127.0.0.1:$((base + 10 * ($1 - 1) + 1))"; }
ctl() { "$BIN/maosctl" "$@"; }

# wait_for N CMD...: run CMD every 0.2 s until it succeeds, at most N tries.
wait_for() {
  local tries=$1; shift
  for ((i = 0; i < tries; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "demo: gave up waiting for: $*" >&2
  tail -n 20 "$dir"/n*.log >&2 || true
  return 1
}
voters3() { [ "$(ctl --addr "$1" --json cluster status | grep -c '"suffrage": "voter"')" = 3 ]; }

start() {
  local i=$1; shift
  "$BIN/maosd" --node-id "n$i" --data-dir "$dir/n$i" --http-addr "$(api "$i")" --raft-addr "$(raft "$i")" \
    "$@" >"$dir/n$i.log" 2>&1 &
  pids+=($!)
  echo "started n$i (pid $!): api $(api "$i"), raft $(raft "$i")"
}

echo "== starting 3 nodes in $dir"
start 1
wait_for 100 ctl --addr "$(api 1)" cluster status
start 2 --join "$(api 1)"
start 3 --join "$(api 1)"
for i in 1 2 3; do wait_for 150 voters3 "$(api "$i")"; done

follower=$(api 2)
if ctl --addr "$follower" cluster status | grep -q '^state: *leader'; then follower=$(api 3); fi

echo
echo "== registering agents through follower $follower"
ctl --addr "$follower" agents register supervisor --role orchestrator
ctl --addr "$follower" agents register codex --role engineer
ctl --addr "$follower" agents register claude --role engineer

echo
echo "== sending through follower $follower"
ctl --addr "$follower" send --from supervisor --to role:engineer --channel demo --title "Plan" \
  --text "Split the retry work: @codex takes the client, @claude the server." --type task_assign
ctl --addr "$follower" send --from codex --to claude --channel demo --text "Client side done; please review." --type review
ctl --addr "$follower" send --from claude --to codex,supervisor --channel demo --priority high \
  --text "Found a missing backoff cap; fixing before merge." --type feedback

for i in 1 2 3; do
  echo
  echo "== channel demo read back from n$i ($(api "$i"), strong)"
  ctl --addr "$(api "$i")" read --channel demo --strong
done

echo
echo "== claude's inbox, read on n1 (strong)"
ctl --addr "$(api 1)" inbox --agent claude --strong

echo
echo "== audit trail from n3"
ctl --addr "$(api 3)" audit --strong

echo
echo "== cluster status from $follower"
ctl --addr "$follower" cluster status

if [ "${DEMO_KEEP:-}" = 1 ]; then
  echo
  echo "cluster running; try: $BIN/maosctl --addr $(api 1) channels    (Ctrl-C to stop)"
  wait
fi

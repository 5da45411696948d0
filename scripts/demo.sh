#!/usr/bin/env bash
# make demo: a local 3-node maos cluster on loopback with watcher agents
# spread over the nodes (a supervisor, two workers and a reviewer, each
# answering through the stub model CLI, so no network or model API is
# needed). The supervisor assigns a task through a follower, both workers
# answer, the reviewer votes; then it delegates a task to the role:worker
# queue (one worker claims it) and a review that depends on it (waiting
# until the work succeeded). The conversation is read back from every
# node, then `maosctl who --health` and the audit trail; last, an artifact
# put through n1 and attached is read back, checked, from n3. Stops every node
# it started (also on Ctrl-C).
#
#   DEMO_BASE_PORT  first port (default 27070); nodes use BASE, BASE+10, BASE+20
#                   for HTTP and the next port up for Raft
#   DEMO_KEEP=1     keep the cluster running until Ctrl-C
#   BIN             where maosd, maosctl and stubmodel are (default bin,
#                   what make build writes)
#   TMPDIR          where the demo's directory maos-demo.XXXXXX goes
#                   (default /tmp; make clean removes it)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
stubmodel="$(cd "$BIN" && pwd)/stubmodel"
base=${DEMO_BASE_PORT:-27070}
dir=$(mktemp -d "${TMPDIR:-/tmp}/maos-demo.XXXXXX")
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped ${#pids[@]} nodes; logs and data were in $dir (make clean removes it)"
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

# agents FILE ID:ROLE[:TYPES] ...: a watcher config answering through the
# stub model (which takes 1 s, so a dependent task is seen waiting); each
# agent also claims the tasks of its role's queue.
agents() {
  local file=$1; shift
  echo "agents:" >"$file"
  for spec in "$@"; do
    IFS=: read -r id role types <<<"$spec"
    cat >>"$file" <<YAML
  - id: $id
    role: $role
    channels: [demo]
    command: ["$stubmodel", "--sleep", "1s"]
    timeout: 30s
    retries: 1
    claim: ["role:$role"]
YAML
    if [ -n "$types" ]; then echo "    match: {types: [$types]}" >>"$file"; fi
  done
}
# The supervisor's watcher only takes questions, so results and votes do
# not start a reply loop between bots.
agents "$dir/n1.yaml" supervisor:orchestrator:question
agents "$dir/n2.yaml" worker1:worker
agents "$dir/n3.yaml" worker2:worker reviewer:reviewer

echo "== the watcher agents answer through a stub model ($BIN/stubmodel: a canned answer, no network, no API key)"
echo "== starting 3 nodes in $dir"
start 1 --agents "$dir/n1.yaml"
wait_for 100 ctl --addr "$(api 1)" cluster status
start 2 --join "$(api 1)" --agents "$dir/n2.yaml"
start 3 --join "$(api 1)" --agents "$dir/n3.yaml"
for i in 1 2 3; do wait_for 150 voters3 "$(api "$i")"; done

follower=$(api 2)
if ctl --addr "$follower" cluster status | grep -q '^state: *leader'; then follower=$(api 3); fi

# count_type TYPE N: the demo channel holds at least N messages of TYPE.
count_type() { [ "$(ctl --addr "$follower" --json read --channel demo --strong | grep -c "\"type\": \"$1\"")" -ge "$2" ]; }
workers2() { [ "$(ctl --addr "$follower" --json agents list --role worker | grep -c '"id"')" -ge 2 ]; }
wait_for 150 workers2

echo
echo "== the supervisor assigns a task to role:worker, through follower $follower"
ctl --addr "$follower" send --from supervisor --to role:worker --channel demo --type task_assign \
  --title "Retry logic" --text "Add a capped exponential backoff to the client retries."
wait_for 150 count_type task_result 2

echo
echo "== the supervisor asks the reviewer for a vote"
ctl --addr "$follower" send --from supervisor --to role:reviewer --channel demo --type review \
  --title "Vote on the retry change" --text "Both workers answered; approve or reject."
wait_for 150 count_type response 1

echo
echo "== the supervisor delegates the work to the role:worker queue, and its review to role:reviewer, after it"
ctl --addr "$follower" task create --from supervisor --id demo-impl --to role:worker --channel demo \
  --title "Implement the retry backoff" --description "Add a capped exponential backoff to the client retries."
ctl --addr "$follower" task create --from supervisor --id demo-review --to role:reviewer --channel demo \
  --title "Review the retry backoff" --description "Check the backoff is capped and jittered." --depends-on demo-impl
ctl --addr "$follower" task wait demo-review --timeout 60s
echo
echo "== the two tasks: one worker claimed the work, the review ran once it succeeded"
ctl --addr "$follower" task list --from supervisor
ctl --addr "$follower" task show demo-review

for i in 1 2 3; do
  echo
  echo "== channel demo read back from n$i ($(api "$i"), strong)"
  ctl --addr "$(api "$i")" read --channel demo --strong
done

echo
echo "== who is awake, and how their tasks went (from n1)"
ctl --addr "$(api 1)" who --health

echo
echo "== audit trail (from n3)"
ctl --addr "$(api 3)" audit --strong

echo
echo "== an artifact: the supervisor uploads a spec through n1 and attaches it to a note to the workers;"
echo "   n3 serves the same bytes, checked against the id (the workers' watchers fetched it into"
echo "   their shared context: $dir/n2/watcher/worker1/context)"
printf 'Retry policy: capped exponential backoff, 100 ms base, 5 s cap, full jitter.\n' >"$dir/retry-spec.md"
ctl --addr "$(api 1)" send --from supervisor --to role:worker --channel demo --type notification \
  --title "Spec attached" --text "The retry spec is attached." --attach "$dir/retry-spec.md"
id=$(ctl --addr "$(api 1)" artifact ls --from supervisor | awk '{print $2}' | head -n 1)
ctl --addr "$(api 3)" artifact get "$id" -o "$dir/retry-spec.from-n3.md"
cmp "$dir/retry-spec.md" "$dir/retry-spec.from-n3.md" && echo "identical on n3"

echo
echo "== cluster status from $follower"
ctl --addr "$follower" cluster status

cat <<EOF

== the agents above ran a stub model ($BIN/stubmodel). To have a watcher run a real
   model CLI instead, give its entry in the agents YAML (maosd --agents FILE, or
   maosctl watch --config FILE; here: $dir/n2.yaml) that CLI as its command;
   the prompt goes to its stdin and its answer is posted as the reply:
     command: ["claude", "-p"]            # Claude Code
     command: ["codex", "exec", "-"]      # Codex ("-": the prompt from stdin)
     command: ["gemini"]                  # Gemini CLI (a piped stdin is its prompt)
   with a timeout a model needs (timeout: 10m).
EOF

echo
echo "== the web console: http://$(api 1)/ui/ (every node serves it: http://$(api 2)/ui/, http://$(api 3)/ui/)"
if [ "${DEMO_KEEP:-}" != 1 ]; then
  echo "   the cluster stops now; DEMO_KEEP=1 make demo keeps it up to look at the console"
fi

if [ "${DEMO_KEEP:-}" = 1 ]; then
  echo
  echo "cluster running; open http://$(api 1)/ui/ or try: $BIN/maosctl --addr $(api 1) tail -f    (Ctrl-C to stop)"
  wait
fi

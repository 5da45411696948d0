#!/usr/bin/env bash
# farm-at-rest.sh: what a farm of AGENTS watcher agents costs at rest.
# Starts 3 maosd nodes on loopback, each running a third of the agents
# under its own watchers (maosd --agents; a stub model, never invoked),
# waits until every agent's lease is held, then measures over IDLE seconds
# the CPU of each node (utime+stime, % of one core) and the raft log
# entries per second (the leader's last index).
#
# usage: AGENTS=1000 IDLE=30 bash scripts/farm-at-rest.sh [BIN]   (BIN from make build)
# Run it on a quiet machine: it prints the load average before and after.
# Only loopback; it stops only the processes it started, by PID.
set -u
BIN=$(cd "${1:-bin}" && pwd) || exit 2
AGENTS=${AGENTS:-1000} IDLE=${IDLE:-30} CLAIM=${CLAIM:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/farm-at-rest.XXXX")
PIDS=()
cleanup() { local p; for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait; rm -rf "$T"; }
trap cleanup EXIT
freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1]);s.close()'; }
ctl() { "$BIN/maosctl" --addr "127.0.0.1:${h[0]}" "$@"; }
h=() r=() g=()
for i in 0 1 2; do
  h[$i]=$(freeport) r[$i]=$(freeport) g[$i]=$(freeport)
  echo "agents:" >"$T/agents$i.yaml"
done
for ((a = 0; a < AGENTS; a++)); do
  cat >>"$T/agents$((a % 3)).yaml" <<YAML
  - id: farm-$a
    role: worker
    channels: [farm]
    command: ["$BIN/stubmodel"]
YAML
  [[ -n $CLAIM ]] && echo '    claim: ["role:worker"]' >>"$T/agents$((a % 3)).yaml"
done
for i in 0 1 2; do
  j=(); ((i > 0)) && j=(--join "127.0.0.1:${h[0]}")
  # PROFILE=FILE: a CPU profile of the first node over the idle window
  [[ $i == 0 && -n ${PROFILE:-} ]] && j+=(--debug-addr "127.0.0.1:$(freeport)")
  "$BIN/maosd" --node-id "f$i" --data-dir "$T/f$i" --http-addr "127.0.0.1:${h[$i]}" --raft-addr "127.0.0.1:${r[$i]}" \
    --gossip-addr "127.0.0.1:${g[$i]}" --log-level warn --agents "$T/agents$i.yaml" "${j[@]}" >>"$T/f$i.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:${h[$i]}/readyz" 2>/dev/null | grep -q ready && break; sleep 0.2; done
done
held() { # agents whose lease is granted (GET /v1/agents/ID/lease answers 200)
  python3 - "127.0.0.1:${h[0]}" "$AGENTS" <<'PY'
import sys, urllib.request
addr, n, held = sys.argv[1], int(sys.argv[2]), 0
for a in range(n):
    try:
        urllib.request.urlopen(f"http://{addr}/v1/agents/farm-{a}/lease", timeout=5).read()
        held += 1
    except Exception:
        pass
print(held)
PY
}
for _ in $(seq 1 120); do [[ $(held) -ge $AGENTS ]] && break; sleep 2; done
echo "leases held: $(held) of $AGENTS"
sleep 5
last() { # the leader's last log index, as the first node sees it
  local i
  for i in 1 2 3 4 5; do
    ctl --json cluster status 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["last_index"])' 2>/dev/null && return
    sleep 1
  done
  echo "cannot read the cluster status" >&2; exit 1
}
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
declare -a t0; for i in 0 1 2; do t0[$i]=$(ticks "${PIDS[$i]}"); done
i0=$(last)
if [[ -n ${PROFILE:-} ]]; then
  dbg=$(grep -o -- '--debug-addr [0-9.:]*' "/proc/${PIDS[0]}/cmdline" 2>/dev/null || tr '\0' ' ' <"/proc/${PIDS[0]}/cmdline" | grep -o -- '--debug-addr [0-9.:]*')
  curl -s "http://${dbg#--debug-addr }/debug/pprof/profile?seconds=$IDLE" -o "$PROFILE"
else
  sleep "$IDLE"
fi
i1=$(last)
HZ=$(getconf CLK_TCK)
for i in 0 1 2; do
  echo "RESULT node=f$i agents=$(grep -c '^  - id:' "$T/agents$i.yaml") cpu_pct=$(python3 -c "print(round(100*($(ticks "${PIDS[$i]}")-${t0[$i]})/$HZ/$IDLE,2))")"
done
echo "RESULT entries_per_s=$(python3 -c "print(round(($i1-$i0)/$IDLE,2))") (last index $i0 -> $i1 over ${IDLE}s)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

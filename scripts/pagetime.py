#!/usr/bin/env python3
# Times 50-message pages of the bench channel and bench-sink inbox on one
# node: 300 keep-alive GETs each, p50 and p99 (docs/PERFORMANCE.md, Scale).
# usage: scripts/pagetime.py 127.0.0.1:37070
import http.client, json, sys, time, statistics
host, port = sys.argv[1].split(':')
c = http.client.HTTPConnection(host, int(port))
def get(path):
    c.request('GET', path); r = c.getresponse(); b = r.read()
    if r.status != 200: raise SystemExit(f'{path}: {r.status} {b[:200]}')
    return json.loads(b)
def timeit(path, n=300):
    get(path)
    ts = []
    for _ in range(n):
        t = time.perf_counter(); get(path); ts.append((time.perf_counter() - t) * 1000)
    ts.sort()
    return ts[len(ts)//2], ts[int(len(ts)*0.99)]
st = get('/v1/cluster/status')
last = st['applied_index']
chans = {ch['name']: ch for ch in get('/v1/channels')['channels']}
ch = chans.get('bench', {})
print('applied_index', last, 'bench channel', {k: ch.get(k) for k in ('count', 'first_seq', 'last_seq')})
for name, path in [
    ('channel first page (50)', '/v1/channels/bench/messages?limit=50'),
    ('channel last page (50)', f'/v1/channels/bench/messages?limit=50&after={max(0, (ch.get("last_seq") or last) - 200)}'),
    ('inbox first page (50)', '/v1/agents/bench-sink/inbox?limit=50'),
    ('inbox counts', '/v1/agents/bench-sink/inbox/counts'),
]:
    p50, p99 = timeit(path)
    print(f'{name:28s} p50 {p50:.3f} ms  p99 {p99:.3f} ms')

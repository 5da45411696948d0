// The maos web console: one page over the public API. The feed, tasks,
// approvals and audit follow the node's event stream (GET /v1/stream, an
// EventSource: pushed, never polled); agents and the cluster view are
// asked for every few seconds. With --auth the token is in an HttpOnly
// cookie this script never sees. No framework, no build step.
'use strict';

const FEED_BACKLOG = 2000; // log entries of history the feed starts with
const FEED_MAX = 1000;     // lines kept in the feed
const REFRESH_MS = 3000;   // agents and cluster view
const TASK_STATES = ['waiting', 'ready', 'running', 'awaiting_approval', 'succeeded', 'failed', 'cancelled'];

const $ = (sel) => document.querySelector(sel);
const state = { me: null, es: null, peers: [], auditAfter: 0, timers: {}, tab: 'feed', failing: false };

// el builds an element; text goes in as text, never as HTML.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) if (k != null) e.append(k instanceof Node ? k : String(k));
  return e;
}

// api calls the API on this node. Writes carry X-Maos-CSRF, which the
// node asks of every write its cookie authenticates.
async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (method !== 'GET') opts.headers['X-Maos-CSRF'] = '1';
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const err = new Error(data && data.error ? data.error.message : `${r.status} ${text}`);
    err.status = r.status;
    throw err;
  }
  return data;
}

function showError(e) { $('#error').textContent = e ? String(e.message || e) : ''; }
const enc = encodeURIComponent;
const time = (t) => (t ? new Date(t).toLocaleTimeString() : '');
const to = (m) => (m.recipients && m.recipients.length ? m.recipients : [].concat(m.to || [])).join(',');

// ---- start, login, logout

async function start() {
  try {
    state.me = await api('GET', '/v1/whoami');
  } catch (e) {
    if (e.status === 401) return showLogin();
    showError(e);
    return failover();
  }
  $('#login').hidden = true;
  $('#app').hidden = false;
  $('#who').textContent = state.me.auth ? `${state.me.agent || 'admin'} (${state.me.role})` : 'no auth';
  $('#logout').hidden = !state.me.auth;
  $('#approver-line').hidden = !!state.me.agent;
  await refreshCluster();
  openStream();
  loadTasks(); loadApprovals(); loadAudit(); loadAgents();
  state.timers.refresh = setInterval(() => {
    refreshCluster();
    if (state.tab === 'agents') loadAgents();
  }, REFRESH_MS);
}

function showLogin() {
  if (state.es) state.es.close();
  clearInterval(state.timers.refresh);
  $('#app').hidden = true;
  $('#login').hidden = false;
  $('#conn').textContent = 'logged out';
  $('#token').focus();
}

$('#login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('#login-error').textContent = '';
  try {
    await api('POST', '/ui/login', { token: $('#token').value });
    $('#token').value = '';
    start();
  } catch (e) {
    $('#login-error').textContent = e.message;
  }
});

$('#logout').addEventListener('click', async () => {
  await api('POST', '/ui/logout').catch(() => {});
  location.reload();
});

// ---- tabs

document.querySelectorAll('nav button').forEach((b) => b.addEventListener('click', () => {
  state.tab = b.dataset.tab;
  document.querySelectorAll('nav button').forEach((x) => x.classList.toggle('active', x === b));
  document.querySelectorAll('.tab').forEach((t) => { t.hidden = t.id !== `tab-${state.tab}`; });
  ({ agents: loadAgents, cluster: refreshCluster, tasks: loadTasks, approvals: loadApprovals, audit: loadAudit })[state.tab]?.();
}));

// later runs fn once after a burst of events.
function later(fn) {
  clearTimeout(state.timers[fn.name]);
  state.timers[fn.name] = setTimeout(fn, 150);
}

// ---- the stream and the feed

async function openStream() {
  let after = 0;
  try {
    const st = await api('GET', '/v1/cluster/status');
    after = Math.max(0, st.applied_index - FEED_BACKLOG);
  } catch (_) { /* from the start */ }
  const es = new EventSource(`/v1/stream?after=${after}`);
  state.es = es;
  es.addEventListener('message', (ev) => { addMessage(JSON.parse(ev.data)); later(loadAudit); });
  es.addEventListener('task', () => { later(loadTasks); later(loadAudit); });
  es.addEventListener('approval', () => { later(loadApprovals); later(loadAudit); });
  es.addEventListener('ready', () => setConn('live'));
  es.addEventListener('open', () => setConn('live'));
  es.addEventListener('error', () => streamError(es));
}

function setConn(what) {
  const c = $('#conn');
  c.textContent = what;
  c.className = `conn ${what === 'live' ? 'live' : 'down'}`;
}

// streamError: the browser retries a dropped stream by itself, resuming
// with Last-Event-ID. If this node no longer answers, go to another one.
async function streamError(es) {
  setConn('reconnecting');
  if (state.failing) return;
  state.failing = true;
  try {
    const r = await fetch('/v1/whoami', { credentials: 'same-origin', signal: AbortSignal.timeout(1500) });
    if (r.status === 401) return showLogin();
    if (es.readyState === EventSource.CLOSED) setTimeout(openStream, 1000);
  } catch (_) {
    await failover();
  } finally {
    state.failing = false;
  }
}

// failover probes the other nodes' /healthz (an opaque no-cors answer
// means it is up) and moves the page to the first that answers. Nothing
// secret goes along; the login cookie is per host name, so a node on
// another host asks for a token again.
async function failover() {
  const here = location.host;
  for (const addr of state.peers) {
    if (addr === here) continue;
    try {
      await fetch(`${location.protocol}//${addr}/healthz`, { mode: 'no-cors', signal: AbortSignal.timeout(1000) });
      setConn(`moving to ${addr}`);
      location.href = `${location.protocol}//${addr}/ui/`;
      return;
    } catch (_) { /* next */ }
  }
  setConn('node down');
  setTimeout(() => (state.me ? streamError(state.es) : start()), 2000);
}

function addMessage(m) {
  const li = el('li', {
    class: `msg p-${m.priority}`,
    dataset: { id: m.id, seq: m.seq, channel: m.channel, from: m.from, to: to(m), type: m.type, priority: m.priority },
    onclick: () => openMessage(m.id, li),
  }, `#${m.seq} ${time(m.timestamp)} ${m.channel}: ${m.from} → ${to(m)} [${m.type}/${m.priority}] ${m.title || firstLine(m)}`);
  const feed = $('#feed');
  const atBottom = feed.scrollTop + feed.clientHeight >= feed.scrollHeight - 20;
  filterLine(li);
  feed.append(li);
  while (feed.children.length > FEED_MAX) feed.firstChild.remove();
  if (atBottom) feed.scrollTop = feed.scrollHeight;
}

const firstLine = (m) => ((m.content && m.content.text) || '').split('\n')[0].slice(0, 80);

function filterLine(li) {
  const f = (id) => $(id).value.trim();
  const d = li.dataset;
  const agent = f('#f-agent');
  li.hidden = (f('#f-channel') && d.channel !== f('#f-channel')) ||
    (f('#f-type') && d.type !== f('#f-type')) ||
    (f('#f-priority') && d.priority !== f('#f-priority')) ||
    (agent && d.from !== agent && !d.to.split(',').includes(agent));
}
['#f-channel', '#f-agent', '#f-type', '#f-priority'].forEach((id) =>
  $(id).addEventListener('input', () => $('#feed').querySelectorAll('li').forEach(filterLine)));

async function openMessage(id, li) {
  document.querySelectorAll('#feed li.open').forEach((x) => x.classList.remove('open'));
  if (li) li.classList.add('open');
  const d = $('#detail');
  try {
    const [m, thread, rc] = await Promise.all([
      api('GET', `/v1/messages/${enc(id)}`),
      api('GET', `/v1/threads/${enc(id)}?limit=200`),
      api('GET', `/v1/messages/${enc(id)}/receipts`),
    ]);
    d.replaceChildren(...[
      el('h3', {}, m.title || '(no title)'),
      el('p', { class: 'small' }, `#${m.seq} ${m.id} · ${new Date(m.timestamp).toLocaleString()} · ${m.channel} · ${m.from} → ${to(m)} · ${m.type}/${m.priority}${m.visibility && m.visibility !== 'public' ? ' · ' + m.visibility : ''}`),
      el('pre', { class: 'text' }, (m.content && m.content.text) || ''),
      m.content && m.content.code ? el('pre', { class: 'code' }, m.content.code) : null,
      el('h4', {}, `Thread (${thread.messages.length})`),
      el('ol', { class: 'lines thread' }, thread.messages.map((t) => el('li', { class: t.id === m.id ? 'open' : '' },
        el('a', { href: '#', onclick: (ev) => { ev.preventDefault(); openMessage(t.id); } }, `#${t.seq} ${t.from}: ${t.title || firstLine(t)}`)))),
      el('h4', {}, 'Receipts'),
      el('table', {}, el('tbody', {}, (rc.receipts || []).map((r) =>
        el('tr', {}, el('td', {}, r.agent), el('td', {}, r.state), el('td', { class: 'small' }, time(r.read_at || r.delivered_at || r.queued_at)))))),
    ].filter(Boolean));
  } catch (e) {
    d.replaceChildren(el('p', { class: 'error' }, e.message));
  }
}

// renderRows makes container's children the rows, in order; a row is
// {key, sig, build}: its identity, what it shows, and how to make its node.
// A row whose key and sig match a node already there keeps that node (the
// same element, its buttons and listeners), and a kept node moves only
// when the order changed, so a refresh that changes one row leaves the
// others' nodes in place. A changed row with a button under the pointer
// is not replaced until the pointer leaves it: a button being clicked is
// never swapped for a new one (the click would be lost), and it acts on
// what it showed (an approval's shown hash: the node refuses a changed
// action). Rows with nothing to click are replaced at once.
function renderRows(container, rows) {
  container.latest = rows;
  const old = new Map([...container.children].map((n) => [n.rowKey, n]));
  const nodes = rows.map((r) => {
    const n = old.get(r.key);
    if (n && n.rowSig === r.sig) return n;
    if (n && n.matches(':hover') && n.querySelector('button, a, input, select')) {
      if (!n.deferred) {
        n.deferred = true;
        n.addEventListener('mouseleave', () => { n.deferred = false; renderRows(container, container.latest); }, { once: true });
      }
      return n;
    }
    const fresh = r.build();
    fresh.rowKey = r.key;
    fresh.rowSig = r.sig;
    return fresh;
  });
  const keep = new Set(nodes);
  for (const n of [...container.children]) if (!keep.has(n)) n.remove();
  let at = container.firstChild;
  for (const n of nodes) {
    if (n === at) at = at.nextSibling;
    else container.insertBefore(n, at);
  }
}

// ---- agents

// mayReadInbox is the API's reader rule (transport/routes.go, reader):
// without auth anyone, else a moderator, an admin or the agent itself. The
// view asks only for what its token may read, so it writes no DENIED
// audit line per other agent.
function mayReadInbox(id) {
  const me = state.me || {};
  return !me.auth || me.role === 'admin' || me.role === 'moderator' || me.agent === id;
}

async function loadAgents() {
  try {
    const [reg, pres] = await Promise.all([api('GET', '/v1/agents?limit=1000'), api('GET', '/v1/presence')]);
    const byID = new Map();
    for (const a of reg.agents || []) byID.set(a.id, { id: a.id, role: a.role });
    for (const p of pres.agents || []) byID.set(p.agent_id, Object.assign(byID.get(p.agent_id) || { id: p.agent_id }, { p }));
    const rows = await Promise.all([...byID.values()].sort((a, b) => a.id.localeCompare(b.id)).map(async (a) => {
      const [counts, health] = await Promise.all([
        mayReadInbox(a.id) ? api('GET', `/v1/agents/${enc(a.id)}/inbox/counts`).catch(() => null) : null,
        api('GET', `/v1/agents/${enc(a.id)}/health`).catch(() => null),
      ]);
      const p = a.p || {};
      return { key: a.id, sig: JSON.stringify([a, counts, health]), build: () => el('tr', { dataset: { agent: a.id } },
        el('td', {}, a.id), el('td', {}, a.role || ''),
        el('td', { class: p.state || '' }, [p.state, p.substate].filter(Boolean).join('/') || 'unknown', p.reason ? el('span', { class: 'small' }, ` ${p.reason}`) : null),
        el('td', {}, p.node || ''),
        // The agent's lease (several nodes' watchers, one serving): who
        // serves it and who stands by, from the replicated state.
        el('td', { class: 'served' }, p.served_by || '', (p.standby || []).length ? el('span', { class: 'small' }, ` standby ${p.standby.join(', ')}`) : null),
        el('td', {}, counts ? `${counts.unread} / ${counts.total}` : '—'),
        el('td', { class: health ? health.status : '' }, health ? health.status : '—'),
        el('td', {}, p.task || ''),
        el('td', { class: 'small' }, time(p.timestamp))) };
    }));
    renderRows($('#agents'), rows);
  } catch (e) { showError(e); }
}

// ---- cluster

async function refreshCluster() {
  try {
    const [v, b] = await Promise.all([api('GET', '/ui/api/cluster'), api('GET', '/v1/bulletin').catch(() => null)]);
    $('#node').textContent = `node ${v.node_id}`;
    const peers = new Set(v.nodes.map((n) => n.api_addr));
    (v.members || []).forEach((m) => m.status === 'alive' && m.api_addr && peers.add(m.api_addr));
    state.peers = [...peers].filter(Boolean);
    renderRows($('#nodes'), v.nodes.map((n) => ({ key: n.node_id, sig: JSON.stringify([n, v.leader_id, v.node_id]), build: () => el('tr', { dataset: { node: n.node_id } },
      el('td', {}, n.node_id, n.node_id === v.leader_id ? ' ★' : '', n.node_id === v.node_id ? ' (this)' : ''),
      el('td', {}, n.api_addr),
      el('td', { class: n.reachable ? n.state : 'dead' }, n.reachable ? n.state : `unreachable: ${n.error}`),
      el('td', {}, n.term ?? ''), el('td', {}, n.commit_index ?? ''), el('td', {}, n.applied_index ?? ''),
      el('td', { class: 'small' }, n.last_contact ? new Date(n.last_contact).toLocaleTimeString() : 'never')) })));
    renderRows($('#members'), (v.members || []).map((m) => ({ key: m.node_id, sig: JSON.stringify(m), build: () => el('tr', { dataset: { node: m.node_id } },
      el('td', {}, m.node_id), el('td', { class: `status ${m.status}` }, m.status), el('td', {}, m.api_addr || ''), el('td', {}, m.gossip_addr || '')) })));
    $('#bulletin').textContent = b ? JSON.stringify(b.bulletin, null, 2) + `\n(version ${b.version}, ${b.updated_by || ''} ${time(b.updated_at)})` : '';
  } catch (e) {
    if (e.status === 401) showLogin();
  }
}

// ---- tasks

async function loadTasks() {
  try {
    let tasks = [];
    let after = 0;
    for (let i = 0; i < 10; i++) { // at most 10 pages
      const p = await api('GET', `/v1/tasks?limit=1000&after=${after}`);
      tasks = tasks.concat(p.tasks || []);
      if (!p.has_more || !p.tasks.length) break;
      after = p.tasks[p.tasks.length - 1].seq;
    }
    renderRows($('#tasks'), TASK_STATES.map((s) => {
      const col = tasks.filter((t) => t.state === s);
      return { key: s, sig: JSON.stringify(col), build: () => el('div', { class: 'column', dataset: { state: s } },
        el('h3', {}, `${s} (${col.length})`),
        col.slice().reverse().slice(0, 200).map((t) => el('div', { class: 'card', dataset: { task: t.id } },
          el('b', {}, t.title), el('div', { class: 'small' }, `${t.id} · ${t.from} → ${t.to}`),
          t.claimed_by ? el('div', { class: 'small' }, `claimed by ${t.claimed_by} (attempt ${t.attempt})`) : null,
          t.depends_on && t.depends_on.length ? el('div', { class: 'small' }, `after ${t.depends_on.join(', ')}`) : null))) };
    }));
  } catch (e) { showError(e); }
}

// ---- approvals

async function loadApprovals() {
  try {
    const p = await api('GET', '/v1/approvals?state=pending&limit=1000');
    const list = p.approvals || [];
    // Buttons only where the viewer may decide: the node says which (the
    // approver filter matches by id and by the agent's role); an admin
    // token (no agent) decides as whoever it names.
    let mine = null;
    if (state.me.agent) {
      const q = await api('GET', `/v1/approvals?state=pending&limit=1000&approver=${enc(state.me.agent)}`);
      mine = new Set((q.approvals || []).map((x) => x.id));
    }
    const mayDecide = (a) => mine === null || mine.has(a.id);
    $('#pending-count').textContent = list.length ? `(${list.length})` : '';
    renderRows($('#approvals'), list.map((a) => ({ key: a.id, sig: JSON.stringify([a, mayDecide(a)]), build: () => el('tr', { dataset: { approval: a.id } },
      el('td', {}, el('b', {}, a.title), el('div', { class: 'small' }, `${a.id} · ${a.approvals}/${a.quorum} · until ${time(a.deadline)}`)),
      el('td', {}, a.from),
      el('td', {}, (a.approvers || []).join(', ')),
      el('td', {}, el('pre', {}, JSON.stringify(a.action, null, 1))),
      el('td', {}, el('code', { class: 'hash' }, a.action_hash)),
      el('td', {}, mayDecide(a) ? [
        el('button', { type: 'button', class: 'approve', dataset: { id: a.id }, onclick: () => decide(a, 'approve') }, 'Approve'),
        el('button', { type: 'button', class: 'reject', dataset: { id: a.id }, onclick: () => decide(a, 'reject') }, 'Reject'),
      ] : el('span', { class: 'small not-yours' }, 'not yours to decide'))) })));
  } catch (e) { showError(e); }
}

// decide sends the hash the page showed: if the action changed since,
// the node refuses (409) rather than approve what was not seen.
async function decide(a, decision) {
  const approver = state.me.agent || $('#approver').value.trim();
  if (!approver) return showError('say who decides ("decide as")');
  try {
    await api('POST', `/v1/approvals/${enc(a.id)}/decide`, { approver, decision, action_hash: a.action_hash });
    showError(null);
    loadApprovals();
  } catch (e) { showError(e); }
}

// ---- audit

async function loadAudit() {
  try {
    for (let i = 0; i < 20; i++) { // at most 20 pages at once
      const p = await api('GET', `/v1/audit?after=${state.auditAfter}&limit=1000`);
      const list = $('#audit');
      for (const ev of p.events || []) {
        list.append(el('li', { class: ev.kind }, ev.line || `#${ev.seq} ${ev.time} ${ev.kind} ${ev.label} ${ev.text}`));
        state.auditAfter = ev.seq;
      }
      while (list.children.length > FEED_MAX) list.firstChild.remove();
      if (!p.has_more) break;
    }
  } catch (e) { showError(e); }
}

start();

// The maos web console: one page over the public API. The feed, tasks,
// approvals and audit follow the node's event stream (GET /v1/stream, an
// EventSource: pushed, never polled); agents and the cluster view are
// asked for every few seconds. Every view and every object has its own
// URL (hash routes: #/tasks/ID, #/approvals/ID, ...), so back, forward,
// reload and a bookmark keep what was shown. With --auth the token is in
// an HttpOnly cookie this script never sees. No framework, no build step.
'use strict';

const FEED_BACKLOG = 2000; // log entries of history the feed starts with
const FEED_MAX = 1000;     // lines kept in the feed
const REFRESH_MS = 3000;   // agents and cluster view
const TASK_PAGE = 50;      // cards per task column, and per "more"
const AGENT_PAGE = 100;    // agent cards shown, and per "more"
const COUNTS_MS = 15000;   // agents' unread counts asked again at most this often without mail
const TASK_STATES = ['waiting', 'ready', 'running', 'awaiting_approval', 'succeeded', 'failed', 'cancelled'];

const $ = (sel) => document.querySelector(sel);
const state = {
  me: null, es: null, peers: [], auditAfter: 0, timers: {}, tab: 'feed', failing: false,
  route: { view: 'feed', id: '', params: new URLSearchParams() },
  agentsShown: AGENT_PAGE, taskLimit: {}, counts: new Map(), countsAt: 0, mailSince: false, agentsBusy: false, agentsAgain: false,
};

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
const when = (t) => (t && !String(t).startsWith('0001') ? new Date(t).toLocaleString() : '');
const to = (m) => (m.recipients && m.recipients.length ? m.recipients : [].concat(m.to || [])).join(',');
const list = (v) => (Array.isArray(v) ? v : v ? String(v).split(',') : []);
const json = (v) => JSON.stringify(v, null, 2);

// span says a duration in ms roughly: "12 s", "5 min", "3 h".
function span(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}
const ago = (t) => span(Date.now() - new Date(t));     // how long before now
const until = (t) => span(new Date(t) - Date.now());   // how long from now

// ---- routes: #/VIEW, #/VIEW/ID, #/VIEW?filters

// href is the URL of a view or an object in it; params are its filters.
function href(view, id, params) {
  const q = params && params.toString();
  return `#/${view}${id ? '/' + enc(id) : ''}${q ? '?' + q : ''}`;
}
// link is an <a> to a view or object.
const link = (view, id, text, cls) => el('a', { href: href(view, id), class: cls || '' }, text ?? id);

function parseRoute() {
  const h = location.hash.replace(/^#\/?/, '');
  const [path, qs] = h.split('?');
  const parts = path.split('/');
  let id = '';
  try { id = decodeURIComponent(parts.slice(1).join('/')); } catch (_) { id = parts.slice(1).join('/'); }
  return { view: parts[0] || 'feed', id, params: new URLSearchParams(qs || '') };
}

// The tab each route shows; messages and threads open in the feed's pane.
const TAB_OF = { feed: 'feed', messages: 'feed', threads: 'feed', agents: 'agents', tasks: 'tasks', approvals: 'approvals', cluster: 'cluster', audit: 'audit' };

// route shows what the URL names: the tab, its filters, and the object
// in its detail pane. It runs at start and on every hashchange (links,
// back, forward); a reload runs it again from the same URL.
function route() {
  if (!state.me) return;
  const r = parseRoute();
  state.route = r;
  const tab = TAB_OF[r.view];
  state.tab = tab || '';
  $('#notfound').hidden = !!tab;
  $('#notfound').textContent = tab ? '' : `There is no view ${location.hash}.`;
  // Each tab's link goes back to where that tab was last (its object,
  // its filters), as separate windows would.
  document.querySelectorAll('nav a').forEach((a) => {
    a.classList.toggle('active', a.dataset.tab === tab);
    if (a.dataset.tab === tab) a.setAttribute('href', location.hash || '#/feed');
  });
  document.querySelectorAll('.tab').forEach((t) => { t.hidden = t.id !== `tab-${tab}`; });
  document.title = `maos · ${r.view}${r.id ? ' ' + r.id : ''}`;
  const views = {
    feed: () => { setFeedFilters(r.params); markOpen(null); hint('#detail', 'Click a line to open the message, its thread and receipts.'); },
    messages: () => { setFeedFilters(r.params); showMessage(r.id); },
    threads: () => { setFeedFilters(r.params); showThread(r.id); },
    agents: () => { setAgentFilters(r.params); loadAgents(); r.id ? showAgent(r.id) : hint('#agent-detail', 'Click an agent to open it.'); },
    tasks: () => { loadTasks(); r.id ? showTask(r.id) : hint('#task-detail', 'Click a task to open its dependencies and history.'); },
    approvals: () => {
      $('#ap-state').value = r.params.get('state') || 'pending';
      loadApprovals();
      r.id ? showApproval(r.id) : hint('#approval-detail', 'Click an approval to open its action, rationale and votes.');
    },
    cluster: refreshCluster,
    audit: loadAudit,
  };
  views[r.view]?.();
}
window.addEventListener('hashchange', route);

function hint(sel, text) {
  const d = $(sel);
  d.dataset.showing = d.dataset.shown = '';
  d.replaceChildren(el('p', { class: 'hint' }, text));
}

// detail fills a detail pane from an async builder, or says why not. As
// renderRows does for rows, a pane with a button under the pointer is
// filled again only once the pointer leaves: a click is never lost to a
// pane built again, and it acts on what it showed.
async function detail(sel, id, build) {
  const d = $(sel);
  d.dataset.showing = id;
  try {
    const kids = await build();
    if (d.dataset.showing !== id) return;
    const fill = () => { if (d.dataset.showing === id) { d.replaceChildren(...kids.flat().filter(Boolean)); d.dataset.shown = id; } };
    // Only a refresh of what is shown waits; another object shows at once.
    if (d.dataset.shown === id && d.matches(':hover') && d.querySelector('button')) {
      d.addEventListener('mouseleave', fill, { once: true });
      return;
    }
    fill();
  } catch (e) {
    if (d.dataset.showing === id) { d.replaceChildren(el('p', { class: 'error' }, e.status === 404 ? `${id}: not found` : e.message)); d.dataset.shown = ''; }
  }
}

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
  route();
  await refreshCluster();
  openStream();
  loadAudit();
  if (state.tab !== 'approvals') loadApprovals();
  api('GET', '/v1/channels').then((c) => $('#channels').replaceChildren(...(c.channels || []).map((x) => el('option', { value: x.name })))).catch(() => {});
  state.timers.refresh = setInterval(() => {
    refreshCluster();
    if (state.tab === 'agents') loadAgents();
  }, REFRESH_MS);
}

function showLogin() {
  if (state.es) state.es.close();
  clearInterval(state.timers.refresh);
  state.me = null;
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

// later runs fn once after a burst of events.
function later(fn) {
  clearTimeout(state.timers[fn.name]);
  state.timers[fn.name] = setTimeout(fn, 150);
}

// ---- the stream

async function openStream() {
  let after = 0;
  try {
    const st = await api('GET', '/v1/cluster/status');
    after = Math.max(0, st.applied_index - FEED_BACKLOG);
  } catch (_) { /* from the start */ }
  const es = new EventSource(`/v1/stream?after=${after}`);
  state.es = es;
  es.addEventListener('message', (ev) => { addMessage(JSON.parse(ev.data)); state.mailSince = true; later(loadAudit); });
  es.addEventListener('task', (ev) => { later(loadTasks); later(loadAudit); refreshShown('tasks', ev); });
  es.addEventListener('approval', (ev) => { later(loadApprovals); later(loadAudit); refreshShown('approvals', ev); });
  es.addEventListener('ready', () => setConn('live'));
  es.addEventListener('open', () => setConn('live'));
  es.addEventListener('error', () => streamError(es));
}

// refreshShown reloads the open task or approval when an event names it.
function refreshShown(view, ev) {
  const r = state.route;
  if (r.view !== view || !r.id) return;
  let id = '';
  try { const d = JSON.parse(ev.data); id = d.id || (d.task && d.task.id) || (d.approval && d.approval.id) || ''; } catch (_) { /* not JSON */ }
  if (view === 'approvals' && id && id !== r.id) return; // a task: its dependencies may have moved
  later(view === 'tasks' ? reshowTask : reshowApproval);
}
function reshowTask() { if (state.route.view === 'tasks' && state.route.id) showTask(state.route.id); }
function reshowApproval() { if (state.route.view === 'approvals' && state.route.id) showApproval(state.route.id); }

// A page left for another keeps no stream open: the browser may keep it
// (back-forward cache), and each kept stream holds one of the few
// connections a browser opens to a host, until new pages cannot load.
// Coming back to a kept page loads it again, stream and all.
window.addEventListener('pagehide', () => { if (state.es) state.es.close(); });
window.addEventListener('pageshow', (ev) => { if (ev.persisted) location.reload(); });

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
// means it is up) and moves the page to the first that answers, keeping
// the view (the hash). Nothing secret goes along; the login cookie is per
// host name, so a node on another host asks for a token again.
async function failover() {
  const here = location.host;
  for (const addr of state.peers) {
    if (addr === here) continue;
    try {
      await fetch(`${location.protocol}//${addr}/healthz`, { mode: 'no-cors', signal: AbortSignal.timeout(1000) });
      setConn(`moving to ${addr}`);
      location.href = `${location.protocol}//${addr}/ui/${location.hash}`;
      return;
    } catch (_) { /* next */ }
  }
  setConn('node down');
  setTimeout(() => (state.me ? streamError(state.es) : start()), 2000);
}

// ---- the feed: one line per message, filtered, searchable, threaded

const FEED_FILTERS = { channel: '#f-channel', agent: '#f-agent', q: '#f-q', type: '#f-type', priority: '#f-priority' };

// feedParams are the feed's filters as URL parameters.
function feedParams() {
  const p = new URLSearchParams();
  for (const [k, sel] of Object.entries(FEED_FILTERS)) if ($(sel).value.trim()) p.set(k, $(sel).value.trim());
  if ($('#f-threaded').checked) p.set('threaded', '1');
  return p;
}

// setFeedFilters puts the URL's filters in the inputs and applies them.
function setFeedFilters(p) {
  let changed = false;
  for (const [k, sel] of Object.entries(FEED_FILTERS)) {
    const v = p.get(k) || '';
    if ($(sel).value !== v) { $(sel).value = v; changed = true; }
  }
  const threaded = p.get('threaded') === '1';
  if ($('#f-threaded').checked !== threaded) { $('#f-threaded').checked = threaded; orderFeed(); }
  if (changed) filterFeed();
}

// A filter typed in changes the URL in place (no history entry per key).
function onFeedFilter() {
  const r = state.route;
  history.replaceState(null, '', href(TAB_OF[r.view] === 'feed' ? r.view : 'feed', r.id, feedParams()));
  state.route = parseRoute();
  filterFeed();
}
[...Object.values(FEED_FILTERS)].forEach((id) => $(id).addEventListener('input', onFeedFilter));
$('#f-threaded').addEventListener('change', () => { onFeedFilter(); orderFeed(); });

function addMessage(m) {
  const thread = m.thread_id || m.id;
  const reply = !!m.in_reply_to;
  const li = el('li', {
    class: `msg p-${m.priority}${reply ? ' reply' : ''}`,
    dataset: { id: m.id, seq: m.seq, channel: m.channel, from: m.from, to: to(m), type: m.type, priority: m.priority, thread },
    onclick: () => { location.hash = href('messages', m.id, feedParams()); },
  }, `${reply ? '↳ ' : ''}#${m.seq} ${time(m.timestamp)} ${m.channel}: ${m.from} → ${to(m)} [${m.type}/${m.priority}] ${m.title || firstLine(m)}`);
  li.search = `${m.title || ''}\n${(m.content && m.content.text) || ''}`.toLowerCase();
  const feed = $('#feed');
  const atBottom = feed.scrollTop + feed.clientHeight >= feed.scrollHeight - 20;
  filterLine(li);
  if (li.dataset.id === state.route.id && state.route.view === 'messages') li.classList.add('open');
  // Threaded: a reply goes under the last line of its thread.
  const last = $('#f-threaded').checked && reply ? [...feed.querySelectorAll(`li[data-thread="${CSS.escape(thread)}"]`)].pop() : null;
  if (last) last.after(li);
  else feed.append(li);
  while (feed.children.length > FEED_MAX) feed.firstChild.remove();
  if (atBottom) feed.scrollTop = feed.scrollHeight;
  later(countFeed);
}

const firstLine = (m) => ((m.content && m.content.text) || '').split('\n')[0].slice(0, 80);

// orderFeed puts the lines in log order, or threaded: each thread's
// lines together, in the order the threads began.
function orderFeed() {
  const feed = $('#feed');
  const lines = [...feed.children];
  const begun = new Map();
  for (const li of lines) if (!begun.has(li.dataset.thread)) begun.set(li.dataset.thread, +li.dataset.seq);
  const threaded = $('#f-threaded').checked;
  lines.sort((a, b) => (threaded ? begun.get(a.dataset.thread) - begun.get(b.dataset.thread) : 0) || a.dataset.seq - b.dataset.seq);
  feed.append(...lines);
}

function filterLine(li) {
  const f = (id) => $(id).value.trim();
  const d = li.dataset;
  const agent = f('#f-agent');
  const q = f('#f-q').toLowerCase();
  li.hidden = (f('#f-channel') && d.channel !== f('#f-channel')) ||
    (f('#f-type') && d.type !== f('#f-type')) ||
    (f('#f-priority') && d.priority !== f('#f-priority')) ||
    (agent && d.from !== agent && !d.to.split(',').includes(agent)) ||
    (q && !li.search.includes(q) && !li.textContent.toLowerCase().includes(q));
}
function filterFeed() { $('#feed').querySelectorAll('li').forEach(filterLine); countFeed(); }
function countFeed() {
  const all = $('#feed').children.length;
  const shown = $('#feed').querySelectorAll('li:not([hidden])').length;
  $('#feed-count').textContent = shown === all ? `${all} lines` : `${shown} of ${all} lines`;
}

function markOpen(id) {
  document.querySelectorAll('#feed li.open').forEach((x) => x.classList.remove('open'));
  if (id) document.querySelectorAll(`#feed li[data-id="${CSS.escape(id)}"]`).forEach((x) => x.classList.add('open'));
}

// showMessage opens #/messages/ID: the message, its thread and receipts.
function showMessage(id) {
  markOpen(id);
  return detail('#detail', id, async () => {
    const [m, thread, rc] = await Promise.all([
      api('GET', `/v1/messages/${enc(id)}`),
      api('GET', `/v1/threads/${enc(id)}?limit=200`),
      api('GET', `/v1/messages/${enc(id)}/receipts`).catch(() => ({ receipts: [] })),
    ]);
    return [
      el('h3', {}, m.title || '(no title)'),
      el('p', { class: 'small meta' }, `#${m.seq} ${m.id} · ${when(m.timestamp)} · ${m.channel} · `, link('agents', m.from), ` → ${to(m)} · ${m.type}/${m.priority}${m.visibility && m.visibility !== 'public' ? ' · ' + m.visibility : ''}`,
        m.in_reply_to ? [' · in reply to ', link('messages', m.in_reply_to)] : null),
      el('pre', { class: 'text' }, (m.content && m.content.text) || ''),
      m.content && m.content.code ? el('pre', { class: 'code' }, m.content.code) : null,
      el('h4', {}, `Thread (${thread.messages.length}${thread.has_more ? '+' : ''}) `, link('threads', thread.thread_id || id, 'open the thread')),
      threadTree(thread.messages, m.id),
      el('h4', {}, 'Receipts'),
      el('table', {}, el('tbody', {}, (rc.receipts || []).map((r) =>
        el('tr', {}, el('td', {}, link('agents', r.agent)), el('td', {}, r.state), el('td', { class: 'small' }, time(r.read_at || r.delivered_at || r.queued_at)))))),
    ];
  });
}

// threadTree lists a thread's messages, each indented under the one it
// answers (a parent outside the page: at the top level).
function threadTree(msgs, openID, full) {
  const depth = new Map();
  for (const t of msgs) depth.set(t.id, t.in_reply_to && depth.has(t.in_reply_to) ? depth.get(t.in_reply_to) + 1 : 0);
  const kids = new Map();
  const roots = [];
  for (const t of msgs) {
    if (t.in_reply_to && depth.has(t.in_reply_to)) (kids.get(t.in_reply_to) || kids.set(t.in_reply_to, []).get(t.in_reply_to)).push(t);
    else roots.push(t);
  }
  const out = [];
  const walk = (t) => { out.push(t); (kids.get(t.id) || []).forEach(walk); };
  roots.forEach(walk);
  return el('ol', { class: 'lines thread' }, out.map((t) => {
    const li = el('li', { class: t.id === openID ? 'open' : '', dataset: { id: t.id, depth: depth.get(t.id) } },
      link('messages', t.id, `#${t.seq} ${t.from} → ${to(t)}: ${t.title || firstLine(t)}`),
      full ? el('pre', { class: 'text' }, (t.content && t.content.text) || '') : null);
    li.style.paddingLeft = `${Math.min(depth.get(t.id), 8) * 1.5}em`; // CSSOM: the CSP refuses style attributes
    return li;
  }));
}

// showThread opens #/threads/ID (any message of it): every message,
// indented by reply, with its text; pages of 200 with "more".
function showThread(id, after, acc) {
  markOpen(null);
  return detail('#detail', id, async () => {
    const p = await api('GET', `/v1/threads/${enc(id)}?limit=200${after ? '&after=' + after : ''}`);
    const msgs = (acc || []).concat(p.messages || []);
    const root = msgs[0] || {};
    return [
      el('h3', { class: 'thread-title' }, `Thread: ${root.title || firstLine(root) || id}`),
      el('p', { class: 'small' }, `${msgs.length}${p.has_more ? '+' : ''} messages · ${root.channel || ''} · started by ${root.from || ''} ${when(root.timestamp)}`),
      threadTree(msgs, '', true),
      p.has_more ? el('button', { type: 'button', onclick: () => showThread(id, msgs[msgs.length - 1].seq, msgs) }, 'more') : null,
    ];
  });
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
// action). Rows with nothing to click are replaced at once, and so is the
// row keyed now (the one whose own button asked for the change: "more").
function renderRows(container, rows, now) {
  container.latest = rows;
  const old = new Map([...container.children].map((n) => [n.rowKey, n]));
  const nodes = rows.map((r) => {
    const n = old.get(r.key);
    if (n && n.rowSig === r.sig) return n;
    if (n && r.key !== now && n.matches(':hover') && n.querySelector('button, a, input, select')) {
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

// ---- agents: a board of cards, one per agent, a page at a time

// mayReadInbox is the API's reader rule (transport/routes.go, reader):
// without auth anyone, else a moderator, an admin or the agent itself. The
// view asks only for what its token may read, so it writes no DENIED
// audit line per other agent.
function mayReadInbox(id) {
  const me = state.me || {};
  return !me.auth || me.role === 'admin' || me.role === 'moderator' || me.agent === id;
}

// health is api.Presence.Health's status, from the presence record the
// board already has (no request per agent): not AWAKE is an error,
// BLOCKED or more failures than successes degraded.
function health(p) {
  if (!p) return '';
  if (p.state !== 'AWAKE') return 'error';
  if (p.substate === 'BLOCKED' || (p.tasks_failed || 0) > (p.tasks_succeeded || 0)) return 'degraded';
  return 'healthy';
}

// agentState is what the board groups by: WORKING, BLOCKED, IDLE (AWAKE
// otherwise), OFFLINE, or unknown (no presence record).
function agentState(p) {
  if (!p) return 'unknown';
  if (p.state !== 'AWAKE') return 'OFFLINE';
  return p.substate || 'IDLE';
}
const STATE_ORDER = ['WORKING', 'BLOCKED', 'IDLE', 'OFFLINE', 'unknown'];

function agentParams() {
  const p = new URLSearchParams();
  if ($('#a-q').value.trim()) p.set('q', $('#a-q').value.trim());
  if ($('#a-state').value) p.set('state', $('#a-state').value);
  return p;
}
function setAgentFilters(p) {
  $('#a-q').value = p.get('q') || '';
  $('#a-state').value = p.get('state') || '';
}
function onAgentFilter() {
  history.replaceState(null, '', href('agents', state.route.id, agentParams()));
  state.route = parseRoute();
  state.agentsShown = AGENT_PAGE;
  loadAgents();
}
$('#a-q').addEventListener('input', onAgentFilter);
$('#a-state').addEventListener('change', onAgentFilter);
$('#agents-more').addEventListener('click', () => { state.agentsShown += AGENT_PAGE; loadAgents(); });

// allAgents is the registry, page by page (1000 a page, at most 20).
async function allAgents() {
  let out = [];
  let after = '';
  for (let i = 0; i < 20; i++) {
    const p = await api('GET', `/v1/agents?limit=1000${after ? '&after=' + enc(after) : ''}`);
    out = out.concat(p.agents || []);
    if (!p.has_more || !(p.agents || []).length) break;
    after = p.agents[p.agents.length - 1].id;
  }
  return out;
}

// loadAgents renders the board at once from what it has, then asks for
// the unread counts it lacks (or that may have changed) a few at a time
// and renders again. One load at a time: a load asked for meanwhile runs
// once the current one ends.
async function loadAgents() {
  if (state.agentsBusy) { state.agentsAgain = true; return; }
  state.agentsBusy = true;
  try {
    const [reg, pres] = await Promise.all([allAgents(), api('GET', '/v1/presence')]);
    const byID = new Map();
    for (const a of reg) byID.set(a.id, { id: a.id, role: a.role });
    for (const p of pres.agents || []) byID.set(p.agent_id, Object.assign(byID.get(p.agent_id) || { id: p.agent_id }, { p }));
    const q = $('#a-q').value.trim().toLowerCase();
    const st = $('#a-state').value;
    const all = [...byID.values()].filter((a) => (!q || a.id.toLowerCase().includes(q) || (a.role || '').toLowerCase().includes(q)) && (!st || agentState(a.p) === st));
    all.sort((a, b) => STATE_ORDER.indexOf(agentState(a.p)) - STATE_ORDER.indexOf(agentState(b.p)) || a.id.localeCompare(b.id));
    const shown = all.slice(0, state.agentsShown);
    const render = () => renderRows($('#agents'), shown.map((a) => {
      const counts = state.counts.get(a.id);
      return { key: a.id, sig: JSON.stringify([a, counts, a.id === state.route.id]), build: () => agentCard(a, counts) };
    }));
    render();
    $('#agents-count').textContent = `${shown.length} of ${all.length} agents (${byID.size} in all)`;
    $('#agents-more').hidden = shown.length >= all.length;
    // Unread counts for the cards shown only (a page, not the farm), each
    // asked again only after mail came or COUNTS_MS passed.
    const stale = Date.now() - state.countsAt > COUNTS_MS || state.mailSince;
    if (stale) { state.countsAt = Date.now(); state.mailSince = false; }
    const ask = shown.filter((a) => mayReadInbox(a.id) && (stale || !state.counts.has(a.id)));
    const worker = async () => {
      for (let a = ask.shift(); a; a = ask.shift()) {
        // null: none to show (no inbox); kept so it is not asked again at once
        state.counts.set(a.id, await api('GET', `/v1/agents/${enc(a.id)}/inbox/counts`).catch(() => null));
      }
    };
    if (ask.length) {
      await Promise.all([1, 2, 3, 4].map(worker));
      render();
    }
  } catch (e) {
    showError(e);
  } finally {
    state.agentsBusy = false;
    if (state.agentsAgain) { state.agentsAgain = false; later(loadAgents); }
  }
}

function agentCard(a, counts) {
  const p = a.p || {};
  const s = agentState(a.p);
  const h = health(a.p);
  return el('a', { class: `card agent s-${s}${a.id === state.route.id ? ' open' : ''}`, href: href('agents', a.id, agentParams()), dataset: { agent: a.id } },
    el('div', { class: 'card-head' }, el('b', {}, a.id), el('span', { class: 'small' }, ` ${a.role || ''}`)),
    el('div', { class: `state ${s}` }, s, p.reason ? el('span', { class: 'small' }, ` ${p.reason}`) : null),
    el('div', { class: 'task small' }, p.task ? `on ${p.task}` : 'no task'),
    // The agent's lease (several nodes' watchers, one serving): who
    // serves it and who stands by, from the replicated state.
    el('div', { class: 'served small', title: 'served by (the node whose watcher holds its lease), and standing by' }, p.served_by || (a.p ? 'no lease' : ''), list(p.standby).length ? ` standby ${list(p.standby).join(', ')}` : ''),
    el('div', { class: 'unread small' }, counts ? `${counts.unread} unread / ${counts.total}` : ''),
    el('div', { class: `health ${h}` }, h || 'no presence'),
    el('div', { class: 'small' }, p.timestamp ? `seen ${ago(p.timestamp)} ago on ${p.node || '?'}` : ''));
}

// showAgent opens #/agents/ID: presence, lease, inbox, its tasks and the
// approvals waiting on it.
function showAgent(id) {
  document.querySelectorAll('#agents .open').forEach((x) => x.classList.remove('open'));
  return detail('#agent-detail', id, async () => {
    const [reg, hr, lease, counts, claimed, assigned, waiting] = await Promise.all([
      api('GET', `/v1/agents/${enc(id)}`).catch((e) => (e.status === 404 ? null : Promise.reject(e))),
      api('GET', `/v1/agents/${enc(id)}/health`).catch(() => null),
      api('GET', `/v1/agents/${enc(id)}/lease`).catch(() => null),
      mayReadInbox(id) ? api('GET', `/v1/agents/${enc(id)}/inbox/counts`).catch(() => null) : null,
      api('GET', `/v1/tasks?claimed_by=${enc(id)}&limit=50`).catch(() => ({ tasks: [] })),
      api('GET', `/v1/tasks?to=${enc(id)}&limit=50`).catch(() => ({ tasks: [] })),
      api('GET', `/v1/approvals?state=pending&approver=${enc(id)}&limit=50`).catch(() => ({ approvals: [] })),
    ]);
    if (!reg && !hr) throw Object.assign(new Error('not found'), { status: 404 });
    const taskList = (ts) => (ts.length ? el('ul', {}, ts.map((t) => el('li', {}, link('tasks', t.id, t.title), ` ${t.state}`))) : el('p', { class: 'small' }, 'none'));
    return [
      el('h3', { class: 'agent-title' }, id, reg && reg.role ? el('span', { class: 'small' }, ` ${reg.role}`) : null),
      hr ? el('p', {}, el('span', { class: `health ${hr.status}` }, hr.status), ` · ${[hr.state, hr.substate].filter(Boolean).join('/')}`, hr.reason ? ` · ${hr.reason}` : '',
        hr.task ? [' · on ', link('tasks', hr.task)] : '', hr.node ? ` · node ${hr.node}` : '', hr.last_seen ? ` · seen ${when(hr.last_seen)}` : '') : el('p', { class: 'small' }, 'no presence record'),
      hr ? el('p', { class: 'small' }, `tasks: ${hr.tasks_running || 0} running, ${hr.tasks_succeeded || 0} succeeded, ${hr.tasks_failed || 0} failed${hr.last_error ? ' · last error: ' + hr.last_error : ''}`) : null,
      el('p', { class: 'lease' }, lease && lease.holder ? [`served by ${lease.holder.node} (${lease.holder.instance || ''}, fence ${lease.fence}) ${lease.expired ? 'expired' : lease.released ? 'released' : 'until ' + time(lease.expires_at)}`,
        (lease.standbys || []).length ? ` · standby ${lease.standbys.map((s) => s.node).join(', ')}` : ''] : 'no lease: no watcher serves it'),
      counts ? el('p', {}, `inbox: ${counts.unread} unread of ${counts.total}`) : null,
      el('h4', {}, 'Claimed'), taskList(claimed.tasks || []),
      el('h4', {}, 'Assigned to it'), taskList(assigned.tasks || []),
      el('h4', {}, 'Approvals waiting on it'),
      (waiting.approvals || []).length ? el('ul', {}, waiting.approvals.map((a) => el('li', {}, link('approvals', a.id, a.title)))) : el('p', { class: 'small' }, 'none'),
      reg ? el('details', {}, el('summary', {}, 'registry entry'), el('pre', {}, json(reg))) : null,
    ];
  });
}

// ---- cluster

// contactText says when this node last heard from another: the time, and
// for one that no longer answers how long ago; "never" only when this
// node never did (neither its console nor its gossip).
function contactText(t, up) {
  if (!t) return 'never';
  return up ? time(t) : `${time(t)} (${ago(t)} ago)`;
}

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
      el('td', { class: 'small contact' }, contactText(n.last_contact, n.reachable))) })));
    renderRows($('#members'), (v.members || []).map((m) => ({ key: m.node_id, sig: JSON.stringify(m), build: () => el('tr', { dataset: { node: m.node_id } },
      el('td', {}, m.node_id), el('td', { class: `status ${m.status}` }, m.status), el('td', {}, m.api_addr || ''), el('td', {}, m.gossip_addr || ''),
      el('td', { class: 'small contact' }, m.node_id === v.node_id ? '(this node)' : contactText(m.last_contact, m.status === 'alive'))) })));
    $('#bulletin').textContent = b ? JSON.stringify(b.bulletin, null, 2) + `\n(version ${b.version}, ${b.updated_by || ''} ${time(b.updated_at)})` : '';
  } catch (e) {
    if (e.status === 401) showLogin();
  }
}

// ---- tasks: a column per state, a page each, and a task's own view

$('#tasks').addEventListener('click', (ev) => {
  const more = ev.target.closest('button.more');
  if (!more) return;
  const s = more.dataset.state;
  state.taskLimit[s] = Math.min(1000, (state.taskLimit[s] || TASK_PAGE) + TASK_PAGE);
  loadTasks(s);
});

// loadTasks renders the columns; now is the column whose "more" was
// clicked, rebuilt though the pointer is on it.
async function loadTasks(now) {
  try {
    const pages = await Promise.all(TASK_STATES.map((s) => api('GET', `/v1/tasks?state=${s}&limit=${state.taskLimit[s] || TASK_PAGE}`)));
    const stateOf = new Map();
    pages.forEach((p) => (p.tasks || []).forEach((t) => stateOf.set(t.id, t.state)));
    renderRows($('#tasks'), TASK_STATES.map((s, i) => {
      const col = pages[i].tasks || [];
      const more = pages[i].has_more;
      const open = state.route.view === 'tasks' ? state.route.id : '';
      return { key: s, sig: JSON.stringify([col, more, open, col.flatMap((t) => (t.depends_on || []).map((d) => stateOf.get(d)))]), build: () => el('div', { class: 'column', dataset: { state: s } },
        el('h3', {}, `${s} (${col.length}${more ? '+' : ''})`),
        col.map((t) => el('a', { class: `card task${t.id === open ? ' open' : ''}`, href: href('tasks', t.id), dataset: { task: t.id } },
          el('b', {}, t.title), el('div', { class: 'small' }, `${t.id} · ${t.from} → ${t.to}`),
          t.claimed_by ? el('div', { class: 'small' }, `claimed by ${t.claimed_by} (attempt ${t.attempt})`) : null,
          t.progress != null ? el('div', { class: 'small' }, `progress ${Math.round(t.progress * 100)}% ${t.progress_message || ''}`) : null,
          (t.depends_on || []).length ? el('div', { class: 'small deps' }, 'after ', t.depends_on.map((d) => `${d}${stateOf.has(d) ? ' (' + stateOf.get(d) + ')' : ''}`).join(', ')) : null)),
        more ? el('button', { type: 'button', class: 'more', dataset: { state: s } }, 'more') : null) };
    }), typeof now === 'string' ? now : undefined);
  } catch (e) { showError(e); }
}

// showTask opens #/tasks/ID: the task, its dependencies with their
// states, and its history (every transition).
function showTask(id) {
  return detail('#task-detail', id, async () => {
    const t = await api('GET', `/v1/tasks/${enc(id)}`);
    const deps = await Promise.all((t.depends_on || []).slice(0, 50).map((d) => api('GET', `/v1/tasks/${enc(d)}`).catch(() => ({ id: d, state: '?' }))));
    const c = t.completion;
    return [
      el('h3', { class: 'task-title' }, t.title),
      el('p', { class: 'small' }, `${t.id} · `, el('span', { class: `tstate ${t.state}` }, t.state), ` · from `, link('agents', t.from), ` to ${t.to} · ${t.priority} · ${t.channel} · created ${when(t.created)}`),
      t.claimed_by ? el('p', {}, 'claimed by ', link('agents', t.claimed_by), ` · attempt ${t.attempt} of ${t.max_attempts}${t.lease_expires ? ' · lease until ' + time(t.lease_expires) : ''}`) : null,
      t.description ? el('pre', { class: 'text' }, t.description) : null,
      t.progress != null ? el('p', {}, `progress ${Math.round(t.progress * 100)}% ${t.progress_message || ''}`) : null,
      el('h4', {}, `Depends on (${deps.length})`),
      deps.length ? el('ul', { class: 'deps' }, deps.map((d) => el('li', { dataset: { task: d.id } }, link('tasks', d.id, d.title || d.id), ' ', el('span', { class: `tstate ${d.state}` }, d.state)))) : el('p', { class: 'small' }, 'nothing'),
      c ? [el('h4', {}, `Completion: ${c.status}`), c.result ? el('pre', { class: 'text' }, c.result) : null, c.rationale ? el('p', {}, `why: ${c.rationale}`) : null] : null,
      t.approval_id ? el('p', {}, 'approval ', link('approvals', t.approval_id)) : null,
      t.message_id ? el('p', { class: 'small' }, 'announced by ', link('messages', t.message_id)) : null,
      el('h4', {}, 'History'),
      el('table', { class: 'history' }, el('tbody', {}, (t.history || []).map((h) => el('tr', {},
        el('td', { class: 'small' }, when(h.time)), el('td', {}, h.actor), el('td', {}, h.event), el('td', { class: `tstate ${h.state}` }, h.state), el('td', {}, h.detail || ''))))),
      t.context ? el('details', {}, el('summary', {}, 'context'), el('pre', {}, json(t.context))) : null,
    ];
  });
}

// ---- approvals: the queue, and an approval's own view

$('#ap-state').addEventListener('change', () => { location.hash = href('approvals', '', new URLSearchParams({ state: $('#ap-state').value })); });

// mine is the ids of the pending approvals the viewer may decide: the
// node says which (the approver filter matches by id and by the agent's
// role); null: an admin token or no auth, which decides as whoever it
// names.
async function mine() {
  if (!state.me.agent) return null;
  const q = await api('GET', `/v1/approvals?state=pending&limit=1000&approver=${enc(state.me.agent)}`);
  return new Set((q.approvals || []).map((x) => x.id));
}

function decideButtons(a, may) {
  if (a.state !== 'pending') return el('span', { class: 'small' }, a.state);
  return may ? [
    el('button', { type: 'button', class: 'approve', dataset: { id: a.id }, onclick: (ev) => { ev.preventDefault(); decide(a, 'approve'); } }, 'Approve'),
    el('button', { type: 'button', class: 'reject', dataset: { id: a.id }, onclick: (ev) => { ev.preventDefault(); decide(a, 'reject'); } }, 'Reject'),
  ] : el('span', { class: 'small not-yours' }, 'not yours to decide');
}

const deadline = (a) => `${when(a.deadline)}${a.escalated ? ' (escalated)' : ''}${a.state === 'pending' && new Date(a.deadline) > Date.now() ? ` · in ${until(a.deadline)}` : ''}`;
const clip = (s, n) => (s && s.length > n ? s.slice(0, n - 1) + '…' : s || '');

async function loadApprovals() {
  try {
    const st = $('#ap-state').value || 'pending';
    const [p, may] = await Promise.all([api('GET', `/v1/approvals?state=${enc(st)}&limit=200`), mine()]);
    const items = p.approvals || [];
    if (st === 'pending') $('#pending-count').textContent = items.length ? `(${items.length}${p.has_more ? '+' : ''})` : '';
    const mayDecide = (a) => may === null || may.has(a.id);
    const open = state.route.view === 'approvals' ? state.route.id : '';
    renderRows($('#approvals'), items.map((a) => ({ key: a.id, sig: JSON.stringify([a, mayDecide(a), a.id === open]), build: () => el('tr', { dataset: { approval: a.id }, class: a.id === open ? 'open' : '' },
      el('td', {}, link('approvals', a.id, a.title, 'title'), el('div', { class: 'small' }, a.id)),
      el('td', {}, link('agents', a.from)),
      el('td', { class: 'rationale' }, clip(a.rationale, 160) || el('span', { class: 'small' }, '(no rationale)')),
      el('td', {}, `${a.approvals}/${a.quorum}`),
      el('td', { class: 'small' }, deadline(a)),
      el('td', {}, el('code', { class: 'hash' }, a.action_hash)),
      el('td', {}, decideButtons(a, mayDecide(a)))) })));
  } catch (e) { showError(e); }
}

// originalAction is the action as first requested: the request message
// says it ("action HASH:\n{json}"); null when that message is not
// readable.
async function originalAction(a) {
  if (!a.message_id) return null;
  const m = await api('GET', `/v1/messages/${enc(a.message_id)}`).catch(() => null);
  const text = (m && m.content && m.content.text) || '';
  const at = text.indexOf('\naction ');
  if (at < 0) return null;
  const body = text.slice(text.indexOf(':\n', at) + 2);
  try { return JSON.parse(body); } catch (_) { return null; }
}

// changes lists what turned before into after, key by key for objects.
function changes(before, after) {
  const isObj = (v) => v && typeof v === 'object' && !Array.isArray(v);
  if (!isObj(before) || !isObj(after)) return [`${JSON.stringify(before)} → ${JSON.stringify(after)}`];
  const out = [];
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (!(k in after)) out.push(`− ${k}: ${JSON.stringify(before[k])}`);
    else if (!(k in before)) out.push(`+ ${k}: ${JSON.stringify(after[k])}`);
    else if (JSON.stringify(before[k]) !== JSON.stringify(after[k])) out.push(`~ ${k}: ${JSON.stringify(before[k])} → ${JSON.stringify(after[k])}`);
  }
  return out.length ? out : ['(no change)'];
}

// showApproval opens #/approvals/ID: who asks and why, the action (and
// what each modify changed), the deadline and every vote.
function showApproval(id) {
  return detail('#approval-detail', id, async () => {
    const [a, may] = await Promise.all([api('GET', `/v1/approvals/${enc(id)}`), mine()]);
    const decisions = a.decisions || [];
    let prev = decisions.some((d) => d.decision === 'modify') ? await originalAction(a) : null;
    const modifies = [];
    for (const d of decisions.filter((x) => x.decision === 'modify')) {
      modifies.push(el('li', {}, `${d.approver} at ${when(d.time)}${d.comment ? ' (' + d.comment + ')' : ''}: `,
        prev ? el('pre', { class: 'diff' }, changes(prev, d.action).join('\n')) : el('pre', { class: 'diff' }, `now ${JSON.stringify(d.action)}`)));
      prev = d.action;
    }
    return [
      el('h3', { class: 'approval-title' }, a.title),
      el('p', { class: 'small' }, `${a.id} · `, el('span', { class: `astate ${a.state}` }, a.state), ` · ${a.priority} · ${a.channel}`, a.task_id ? [' · task ', link('tasks', a.task_id)] : null),
      el('p', {}, 'requested by ', link('agents', a.from), ` at ${when(a.created)}`, a.approval_needed_for ? ` · needed for ${a.approval_needed_for}` : ''),
      el('h4', {}, 'Rationale'),
      el('pre', { class: 'text rationale' }, a.rationale || '(the requester gave none)'),
      a.confidence != null ? el('p', { class: 'small' }, `confidence ${a.confidence}`) : null,
      a.context ? [el('h4', {}, 'Context'), el('pre', {}, json(a.context))] : null,
      el('h4', {}, 'Action'),
      el('pre', { class: 'action' }, json(a.action)),
      el('p', { class: 'small' }, 'hash ', el('code', { class: 'hash' }, a.action_hash)),
      modifies.length ? [el('h4', {}, 'Modified'), el('ul', { class: 'modifies' }, modifies)] : null,
      el('h4', {}, 'Deadline'),
      el('p', { class: 'deadline' }, `${deadline(a)} · then ${a.on_timeout || 'reject'}`),
      el('h4', {}, `Votes: ${a.approvals} of ${a.quorum} needed`),
      el('p', { class: 'small' }, `approvers: ${(a.approvers || []).join(', ')}`),
      decisions.length ? el('table', { class: 'votes' }, el('tbody', {}, decisions.map((d) => el('tr', { class: d.voided ? 'voided' : '' },
        el('td', {}, link('agents', d.approver)), el('td', { class: `vote ${d.decision}` }, d.decision + (d.voided ? ' (voided by a modify)' : '')),
        el('td', { class: 'small' }, when(d.time)), el('td', {}, d.comment || ''), el('td', {}, el('code', { class: 'hash' }, d.action_hash.slice(0, 16))))))) : el('p', { class: 'small' }, 'no votes yet'),
      el('p', {}, decideButtons(a, may === null || may.has(a.id))),
      el('p', { class: 'small' }, 'request message ', link('messages', a.message_id)),
    ];
  });
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
    reshowApproval();
  } catch (e) { showError(e); }
}

// ---- audit

async function loadAudit() {
  try {
    for (let i = 0; i < 20; i++) { // at most 20 pages at once
      const p = await api('GET', `/v1/audit?after=${state.auditAfter}&limit=1000`);
      const lines = $('#audit');
      for (const ev of p.events || []) {
        lines.append(el('li', { class: ev.kind }, ev.line || `#${ev.seq} ${ev.time} ${ev.kind} ${ev.label} ${ev.text}`));
        state.auditAfter = ev.seq;
      }
      while (lines.children.length > FEED_MAX) lines.firstChild.remove();
      if (!p.has_more) break;
    }
  } catch (e) { showError(e); }
}

start();

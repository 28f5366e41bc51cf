// Live tail for the Logs page: listens to /console/logs/stream (Server-Sent Events) and puts each new entry at the
// top of the table, with the same markup the server renders. Text goes in through textContent only.

(() => {
  const table = document.getElementById('log-table');
  if (!(table instanceof HTMLTableElement)) return;
  const status = document.getElementById('live-status');
  const toggle = document.getElementById('live-toggle');
  if (!status || !table.dataset.stream || !window.EventSource) return;
  const tbody = table.tBodies[0];
  const MAX_ROWS = 500;
  let paused = false;
  let held = [];
  let source = null;

  function setStatus(state, text) {
    status.dataset.state = state;
    status.querySelector('.label').textContent = text;
  }

  function tone(action) {
    if (/failed|ratelimited|denied|refused|reject/.test(action)) return 'bad';
    if (/delete|expire|disable|revoke/.test(action)) return 'warn';
    if (/signin$|create|register|approve/.test(action)) return 'good';
    return 'plain';
  }

  function cell(label, cls) {
    const td = document.createElement('td');
    td.dataset.label = label;
    if (cls) td.className = cls;
    return td;
  }

  function row(e) {
    const tr = document.createElement('tr');
    tr.dataset.id = e.id;
    tr.className = 'new';
    const time = cell('Time (UTC)', 'time');
    const t = document.createElement('time');
    t.dateTime = e.time;
    t.textContent = `${e.time.slice(0, 10)} ${e.time.slice(11, 19)}`;
    time.appendChild(t);
    const action = cell('Action');
    const badge = document.createElement('span');
    badge.className = `badge ${tone(e.action)}`;
    badge.textContent = e.action;
    action.appendChild(badge);
    const actor = cell('Actor', 'actor');
    actor.textContent = e.actor || '—';
    const addr = cell('Address', 'mono addr');
    addr.textContent = e.ip || '—';
    const target = cell('Target');
    target.textContent = e.target || '—';
    const details = cell('Details', 'details');
    const pairs = Object.entries(e.details || {});
    if (pairs.length === 0) details.textContent = '—';
    for (const [k, v] of pairs) {
      const kv = document.createElement('span');
      kv.className = 'kv';
      const ks = document.createElement('span');
      ks.className = 'k';
      ks.textContent = k;
      const vs = document.createElement('span');
      vs.className = 'v';
      vs.textContent = typeof v === 'string' ? v : JSON.stringify(v);
      kv.append(ks, ' ', vs);
      details.appendChild(kv);
    }
    tr.append(time, action, actor, addr, target, details);
    return tr;
  }

  function show(e) {
    if (tbody.querySelector(`tr[data-id="${CSS.escape(e.id)}"]`)) return;
    const empty = tbody.querySelector('tr.empty');
    if (empty) empty.remove();
    tbody.insertBefore(row(e), tbody.firstChild);
    while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(tbody.rows.length - 1);
  }

  function connect() {
    source = new EventSource(table.dataset.stream);
    source.addEventListener('open', () => setStatus(paused ? 'paused' : 'live', paused ? 'Paused' : 'Live'));
    source.addEventListener('entry', (ev) => {
      let e;
      try {
        e = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (paused) {
        held.push(e);
        setStatus('paused', `Paused · ${held.length} new`);
      } else {
        show(e);
      }
    });
    source.addEventListener('end', () => {
      source.close();
      setStatus('ended', 'Session ended');
      const link = document.createElement('a');
      link.href = `/console/login?next=${encodeURIComponent(location.pathname + location.search)}`;
      link.textContent = 'Sign in again';
      status.append(' · ', link);
      toggle.hidden = true;
    });
    source.addEventListener('reload', () => location.reload());
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) {
        setStatus('ended', 'Disconnected — reload the page');
      } else {
        setStatus('connecting', 'Reconnecting…');
      }
    });
  }

  toggle.hidden = false;
  toggle.addEventListener('click', () => {
    paused = !paused;
    toggle.textContent = paused ? 'Resume' : 'Pause';
    if (!paused) {
      for (const e of held) show(e);
      held = [];
    }
    setStatus(paused ? 'paused' : 'live', paused ? 'Paused' : 'Live');
  });
  connect();
})();

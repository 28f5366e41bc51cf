// Live views (Machines, a machine's page, Routes): listens to the element's data-stream (Server-Sent Events from
// /console/machines/stream or /console/routes/stream) and swaps in each new rendering of the view. The server escapes everything it renders, the same code as the page,
// so the markup is used as it comes. While someone is filling in a form inside the view (choosing a user to
// approve a device for), the update waits until they leave it, so their choice is not wiped out under them.

(() => {
  const view = document.getElementById('live');
  const status = document.getElementById('live-status');
  if (!view?.dataset.stream || !window.EventSource) return;
  let held = null;
  let source = null;

  function setStatus(state, text) {
    if (!status) return;
    status.dataset.state = state;
    status.querySelector('.label').textContent = text;
  }

  function busy() {
    const a = document.activeElement;
    if (!a || !view.contains(a)) return false;
    if (a.matches('input, select, textarea')) return true;
    // An open confirmation (details) inside the view is a decision in progress too.
    return view.querySelector('details[open]') !== null;
  }

  function apply(html) {
    if (busy()) {
      held = html;
      setStatus('paused', 'Update waiting');
      return;
    }
    held = null;
    view.innerHTML = html;
    view.dataset.updated = String(Number(view.dataset.updated || '0') + 1);
    setStatus('live', 'Live');
  }

  view.addEventListener('focusout', () => {
    // focusout fires before the next element has focus; look once the move is done.
    setTimeout(() => {
      if (held !== null && !busy()) apply(held);
    }, 0);
  });

  function connect() {
    source = new EventSource(view.dataset.stream);
    source.addEventListener('open', () => setStatus(held === null ? 'live' : 'paused', held === null ? 'Live' : 'Update waiting'));
    source.addEventListener('html', (ev) => {
      let data;
      try {
        data = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (typeof data.html === 'string') apply(data.html);
    });
    source.addEventListener('unavailable', (ev) => {
      let message = 'coordination service unavailable';
      try {
        message = JSON.parse(ev.data).message || message;
      } catch {}
      setStatus('connecting', `Retrying: ${message}`);
    });
    source.addEventListener('end', () => {
      source.close();
      setStatus('ended', 'Session ended');
      if (status) {
        const link = document.createElement('a');
        link.href = `/console/login?next=${encodeURIComponent(location.pathname + location.search)}`;
        link.textContent = 'Sign in again';
        status.append(' · ', link);
      }
    });
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) setStatus('ended', 'Disconnected — reload the page');
      else setStatus('connecting', 'Reconnecting…');
    });
  }
  connect();
})();

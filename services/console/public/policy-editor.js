// The policy editor on Access controls: line numbers beside the textarea (the lines the last check found errors on
// marked), and every "line N, column M" link on the page — the problems, the tests, a #L<n> link from a machine's
// "who may reach it" — puts the caret there and scrolls the line into view. The textarea does not wrap lines, so
// one text line is one gutter line. Without this script the page still lists each error with its lines printed around
// it; nothing here is needed to edit, check or save.

(() => {
  const foundArea = document.getElementById('policy-text');
  const foundGutter = document.querySelector('.editor .gutter');
  if (!(foundArea instanceof HTMLTextAreaElement) || !(foundGutter instanceof HTMLElement)) return;
  const area = foundArea;
  const gutter = foundGutter;
  const bad = new Set(
    (area.dataset.errorLines || '')
      .split(',')
      .filter(Boolean)
      .map((n) => Number(n)),
  );
  let shown = 0;

  function render() {
    const count = area.value.split('\n').length;
    if (count === shown) return;
    shown = count;
    const frag = document.createDocumentFragment();
    for (let i = 1; i <= count; i++) {
      const span = document.createElement('span');
      span.textContent = String(i);
      if (bad.has(i)) span.className = 'bad';
      frag.append(span, '\n');
    }
    gutter.replaceChildren(frag);
  }

  function sync() {
    gutter.scrollTop = area.scrollTop;
  }

  function lineHeight() {
    const lh = Number.parseFloat(getComputedStyle(area).lineHeight);
    return Number.isFinite(lh) ? lh : 20;
  }

  /** Caret to line/column (1-based), the line in view, a third of the way down. */
  function jump(line, column) {
    const lines = area.value.split('\n');
    const l = Math.min(Math.max(1, line), lines.length);
    let offset = 0;
    for (let i = 0; i < l - 1; i++) offset += lines[i].length + 1;
    const col = Math.min(Math.max(1, column || 1), lines[l - 1].length + 1);
    area.focus({ preventScroll: true });
    area.setSelectionRange(offset + col - 1, offset + lines[l - 1].length);
    area.scrollTop = Math.max(0, (l - 1) * lineHeight() - area.clientHeight / 3);
    area.scrollIntoView({ block: 'nearest' });
    sync();
  }

  gutter.hidden = false;
  render();
  area.addEventListener('input', render);
  area.addEventListener('scroll', sync);

  document.addEventListener('click', (ev) => {
    const target = ev.target instanceof Element ? ev.target.closest('a[data-line]') : null;
    if (!(target instanceof HTMLElement)) return;
    ev.preventDefault();
    jump(Number(target.dataset.line), Number(target.dataset.column));
  });

  const m = /^#L(\d+)$/.exec(location.hash);
  if (m) jump(Number(m[1]), 1);
})();

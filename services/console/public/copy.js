// Copy buttons: <button data-copy="<id>"> copies the text of the element with that id. Buttons stay hidden (CSS)
// until this script marks the page, so a browser without scripts shows no button that does nothing. Uses the
// clipboard API where the page is a secure context, else selects the text and asks the browser to copy it.

(() => {
  document.documentElement.classList.add('can-copy');

  function fallback(el) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {}
    return ok;
  }

  function done(button, ok) {
    const label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    button.textContent = ok ? 'Copied' : 'Select and copy';
    button.classList.toggle('copied', ok);
    setTimeout(() => {
      button.textContent = label;
      button.classList.remove('copied');
    }, 2000);
  }

  document.addEventListener('click', (ev) => {
    const button = ev.target instanceof Element ? ev.target.closest('button[data-copy]') : null;
    if (!(button instanceof HTMLButtonElement)) return;
    const el = document.getElementById(button.dataset.copy);
    if (!el) return;
    const text = el.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        () => done(button, true),
        () => done(button, fallback(el)),
      );
    } else {
      done(button, fallback(el));
    }
  });
})();

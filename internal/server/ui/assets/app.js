// The dashboard's own script (the pages allow no inline script): copy
// buttons, <button data-copy="#id"> copying the text of #id.
document.addEventListener('click', function (e) {
  var b = e.target.closest('[data-copy]');
  if (!b) return;
  var el = document.querySelector(b.getAttribute('data-copy'));
  if (!el || !navigator.clipboard) return;
  navigator.clipboard.writeText(el.textContent.trim()).then(function () { b.textContent = 'Copied'; });
});

(function () {
  var panel = document.getElementById('detail');
  function add(parent, tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    parent.appendChild(node);
    return node;
  }
  function show(cell) {
    var d = JSON.parse(cell.getAttribute('data-detail'));
    var old = document.querySelector('td.cell.selected');
    if (old) old.classList.remove('selected');
    cell.classList.add('selected');
    panel.replaceChildren();
    var close = add(panel, 'button', '\u00d7', 'close');
    close.title = 'close';
    close.onclick = function () { panel.hidden = true; cell.classList.remove('selected'); };
    add(panel, 'h2', d.policy + ' \u2014 ' + d.title);
    add(panel, 'p', d.run + ': ' + d.result +
        (d.seconds === null ? '' : ', ' + d.seconds.toFixed(1) + 's'));
    d.tests.forEach(function (t) {
      var p = add(panel, 'p', undefined, 'test');
      add(p, 'span', ' ' + t.result + ' ', 'word ' + t.css);
      add(p, 'span', ' ' + t.test + ' (' + t.seconds.toFixed(1) + 's)');
      if (t.layer) add(p, 'div', 'layer: ' + t.layer, 'layer');
      if (t.reason) add(p, 'div', t.reason, 'reason');
      if (t.link) {
        var a = add(p, 'a', 'diagnostics', 'diagnostics');
        a.href = t.link;
      }
    });
    panel.hidden = false;
  }
  document.querySelectorAll('td.cell').forEach(function (cell) {
    cell.addEventListener('click', function () {
      try { history.replaceState(null, '', '#' + cell.id); } catch (e) {}
      show(cell);
    });
  });
  var target = location.hash && document.getElementById(location.hash.slice(1));
  if (target && target.classList.contains('cell')) show(target);
})();

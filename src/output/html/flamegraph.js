/* flamegraph.js - taipan's interactive flame graph: merges the embedded
 * stacks into a call tree and draws it on a canvas, with zoom, search,
 * tooltips, a flame/icicle layout and a thread selector.
 *
 * Built for 100,000 distinct stacks: the tree is made once per view (thread
 * and merge mode) in flat typed arrays, and a frame narrower than a pixel is
 * skipped together with everything it called, so one draw costs at most
 * about (width in pixels x visible rows) boxes, whatever the profile's size.
 *
 * window.taipan is a small read-only view of what is on the screen, for
 * tests (a canvas has no DOM to query) and for the curious.
 */
'use strict';
(function () {
  var ROW = 18; /* CSS pixels per stack level */
  var FONT = '12px ui-monospace, Menlo, Consolas, "DejaVu Sans Mono", monospace';
  var MIN_WIDTH = 1; /* narrower frames are not drawn, nor their callees */
  /* By prof_frame_kind: Python, kernel, native (C, C++...), taipan's markers. */
  var KIND = ['Python', 'kernel', 'native', 'taipan marker'];
  /* Each kind has a family of colours (keyColor()); the legend shows the
   * middle of each. Warm for Python, green for native, blue for the kernel. */
  var KIND_SWATCH = ['hsl(28,85%,61%)', 'hsl(207,55%,68%)', 'hsl(115,45%,61%)', 'hsl(0,0%,75%)'];
  var LEGEND_ORDER = [0, 2, 1, 3];

  var timings = { start: performance.now() };
  var data = JSON.parse(document.getElementById('taipan-data').textContent);
  timings.parsed = performance.now();

  var S = data.strings;
  var F = data.frames; /* name, file, line, kind per frame id */
  var nframes = F.length / 4;
  var stacks = data.stacks; /* [thread, count, frame ids root first...] */

  var threads = data.threads.map(function (t, i) {
    return { index: i, pid: t[0], tid: t[1], name: S[t[2]], comm: S[t[3]], samples: 0 };
  });
  var grandTotal = 0;
  for (var si = 0; si < stacks.length; si++) {
    threads[stacks[si][0]].samples += stacks[si][1];
    grandTotal += stacks[si][1];
  }

  /* --- merge keys -------------------------------------------------------
   * A box stands for a function (name, file, kind) or, with "lines" on, for
   * one line of it. Keys are ranked by name, file and line once, so sorting
   * stacks by their keys' ranks puts siblings in alphabetical order. */
  var strRank = (function () {
    var order = S.map(function (_, i) { return i; });
    order.sort(function (a, b) { return S[a] < S[b] ? -1 : S[a] > S[b] ? 1 : 0; });
    var r = new Int32Array(S.length);
    for (var i = 0; i < order.length; i++) r[order[i]] = i;
    return r;
  })();

  function makeKeys(byLine) {
    var ids = new Map();
    var keyOf = new Int32Array(nframes);
    var name = [], file = [], line = [], kind = [];
    for (var f = 0; f < nframes; f++) {
      var n = F[4 * f], fl = F[4 * f + 1], ln = byLine ? F[4 * f + 2] : 0, k = F[4 * f + 3];
      var id = n + ',' + fl + ',' + ln + ',' + k;
      var key = ids.get(id);
      if (key === undefined) {
        key = name.length;
        ids.set(id, key);
        name.push(n);
        file.push(fl);
        line.push(ln);
        kind.push(k);
      }
      keyOf[f] = key;
    }
    var order = name.map(function (_, i) { return i; });
    order.sort(function (a, b) {
      return strRank[name[a]] - strRank[name[b]] || strRank[file[a]] - strRank[file[b]] ||
        line[a] - line[b] || kind[a] - kind[b];
    });
    var rank = new Int32Array(name.length);
    for (var i = 0; i < order.length; i++) rank[order[i]] = i;
    /* rkey: a frame's key's rank, the only thing the tree build compares */
    var rkey = new Int32Array(nframes);
    for (f = 0; f < nframes; f++) rkey[f] = rank[keyOf[f]];
    return { keyOf: keyOf, rkey: rkey, name: name, file: file, line: line, kind: kind,
             color: new Array(name.length), count: name.length };
  }
  var keySets = [null, null]; /* [by function, by line], made when first needed */
  function keys(byLine) {
    var i = byLine ? 1 : 0;
    if (!keySets[i]) keySets[i] = makeKeys(byLine);
    return keySets[i];
  }

  /* --- the call tree ------------------------------------------------------
   * Stacks sorted by their keys form the tree in preorder: each new node's
   * parent is the last node one level up, and a node's subtree is the node
   * range [i, i + size[i]). A node also covers a range of the sorted stacks,
   * [first, end), which is where the tooltip finds its lines. */
  function buildTree(sel, byLine) {
    var K = keys(byLine), rk = K.rkey;
    var order = [], cap = 1;
    for (var i = 0; i < stacks.length; i++) {
      var s = stacks[i];
      if (sel < 0 || s[0] === sel) {
        order.push(i);
        cap += s.length - 2;
      }
    }
    order.sort(function (a, b) {
      var A = stacks[a], B = stacks[b], n = Math.min(A.length, B.length);
      for (var k = 2; k < n; k++) {
        var d = rk[A[k]] - rk[B[k]];
        if (d) return d;
      }
      return A.length - B.length;
    });

    var key = new Int32Array(cap), parent = new Int32Array(cap), depth = new Int32Array(cap);
    var total = new Float64Array(cap), self = new Float64Array(cap);
    var first = new Int32Array(cap), end = new Int32Array(cap);
    var path = [0], n = 1, maxDepth = 0, prev = null;
    key[0] = -1;
    parent[0] = -1;
    for (var j = 0; j < order.length; j++) {
      s = stacks[order[j]];
      var cnt = s[1], shared = 0;
      if (prev) {
        var m = Math.min(prev.length, s.length), k = 2;
        while (k < m && rk[prev[k]] === rk[s[k]]) k++;
        shared = k - 2;
      }
      total[0] += cnt;
      end[0] = j + 1;
      for (k = 2; k < s.length; k++) {
        var d = k - 1, node;
        if (d <= shared) {
          node = path[d];
        } else {
          node = n++;
          key[node] = K.keyOf[s[k]];
          parent[node] = path[d - 1];
          depth[node] = d;
          first[node] = j;
          path[d] = node;
        }
        total[node] += cnt;
        end[node] = j + 1;
      }
      self[path[s.length - 2]] += cnt;
      if (s.length - 2 > maxDepth) maxDepth = s.length - 2;
      prev = s;
    }

    var size = new Int32Array(n), x0 = new Float64Array(n), next = new Float64Array(n);
    for (i = n - 1; i >= 0; i--) {
      size[i] += 1;
      if (i) size[parent[i]] += size[i];
    }
    for (i = 1; i < n; i++) {
      var p = parent[i];
      x0[i] = next[p];
      next[p] += total[i];
      next[i] = x0[i];
    }
    return { n: n, keys: K, key: key.subarray(0, n), parent: parent.subarray(0, n),
             depth: depth.subarray(0, n), total: total.subarray(0, n),
             self: self.subarray(0, n), first: first.subarray(0, n), end: end.subarray(0, n),
             size: size, x0: x0, order: order, maxDepth: maxDepth, sel: sel };
  }

  /* --- state --------------------------------------------------------------- */
  var el = {
    chart: document.getElementById('chart'),
    spacer: document.getElementById('spacer'),
    canvas: document.getElementById('fg'),
    thread: document.getElementById('thread'),
    layout: document.getElementById('layout'),
    bylines: document.getElementById('bylines'),
    reset: document.getElementById('reset'),
    search: document.getElementById('search'),
    match: document.getElementById('match'),
    info: document.getElementById('info'),
    legend: document.getElementById('legend'),
    title: document.getElementById('title'),
    tip: document.getElementById('tip'),
    empty: document.getElementById('empty'),
  };
  var ctx = el.canvas.getContext('2d');
  var st = {
    sel: -1,
    byLine: false,
    icicle: false,
    tree: null,
    zoom: 0,
    query: '',
    matcher: null,
    matchKey: null, /* Uint8Array over keys: 1 = matches the search */
    matched: 0,
    width: 0,
    height: 0,
    drawn: [], /* per depth: flat [node, x, w, ...] of the last draw */
    hover: -1,
  };
  var trees = new Map();

  function tree() {
    var id = st.sel + (st.byLine ? ':l' : ':f');
    var t = trees.get(id);
    if (!t) {
      if (trees.size >= 4) trees.clear(); /* a view is rebuilt in well under a second */
      t = buildTree(st.sel, st.byLine);
      trees.set(id, t);
    }
    return t;
  }

  /* --- names and colours ------------------------------------------------- */
  /* "worker (tid 101), python3 (pid 100)"; a thread never named carries
   * its process's name, which would only repeat it: "tid 101, python3 (pid 100)" */
  function threadLabel(t) {
    var named = t.name && t.name !== t.comm;
    return (named ? t.name + ' (tid ' + t.tid + ')' : 'tid ' + t.tid) + ', ' +
      (t.comm || '?') + ' (pid ' + t.pid + ')';
  }
  function rootName() {
    return st.sel < 0 ? 'all threads' : threadLabel(threads[st.sel]);
  }
  function nodeName(t, i) {
    return i === 0 ? rootName() : S[t.keys.name[t.key[i]]];
  }
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return h >>> 0;
  }
  function keyColor(K, k) {
    var c = K.color[k];
    if (c) return c;
    var h = hash(S[K.name[k]]), kind = K.kind[k];
    if (kind === 1) c = 'hsl(' + (195 + h % 25) + ',55%,' + (62 + (h >> 8) % 12) + '%)';
    else if (kind === 2) c = 'hsl(' + (95 + h % 40) + ',45%,' + (55 + (h >> 8) % 12) + '%)';
    else if (kind === 3) c = 'hsl(0,0%,' + (70 + h % 10) + '%)';
    else c = 'hsl(' + (h % 55) + ',' + (75 + (h >> 8) % 20) + '%,' + (55 + (h >> 16) % 12) + '%)';
    K.color[k] = c;
    return c;
  }
  var MATCH_COLOR = 'hsl(300,70%,62%)';
  var ROOT_COLOR = 'hsl(30,8%,78%)';

  function pct(n, of) {
    if (!of) return '0%';
    var p = 100 * n / of;
    return (p >= 10 || p === 0 ? p.toFixed(1) : p.toPrecision(2)) + '%';
  }
  /* A value as the profile counts it: samples, or (--mode wall, off-cpu)
   * microseconds of time. */
  function amount(n) {
    if (data.unit !== 'us') return plural(n, 'sample');
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 1 : 2) + ' s';
    if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 1 : 2) + ' ms';
    return n + ' \u00b5s';
  }

  function plural(n, word) {
    return n.toLocaleString('en-US') + ' ' + word + (n === 1 ? '' : 's');
  }

  /* --- geometry ------------------------------------------------------------ */
  function graphHeight() {
    return Math.max(st.height, (st.tree.maxDepth + 1) * ROW + ROW);
  }
  /* y of a depth's row in the spacer (content) coordinates */
  function rowY(d) {
    return st.icicle ? d * ROW : graphHeight() - (d + 1) * ROW;
  }

  function resize() {
    var w = el.chart.clientWidth, h = el.chart.clientHeight;
    var dpr = window.devicePixelRatio || 1;
    st.width = w;
    st.height = h;
    el.canvas.width = Math.max(1, Math.round(w * dpr));
    el.canvas.height = Math.max(1, Math.round(h * dpr));
    el.canvas.style.width = w + 'px';
    el.canvas.style.height = h + 'px';
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    if (st.tree) el.spacer.style.height = graphHeight() + 'px';
  }

  /* --- drawing ------------------------------------------------------------- */
  var charW = 7;
  function fitText(s, w) {
    var n = Math.floor((w - 6) / charW);
    if (n >= s.length) return s;
    if (n < 3) return '';
    return s.slice(0, n - 1) + '\u2026';
  }

  function render() {
    var t = st.tree, W = st.width, H = st.height;
    var scroll = el.chart.scrollTop;
    ctx.clearRect(0, 0, W, H);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    charW = ctx.measureText('mmmmmmmmmm').width / 10 || 7;
    st.drawn = [];
    if (!t || t.total[0] === 0) return;

    /* the rows on screen: depths whose row intersects [scroll, scroll + H) */
    var top = graphHeight();
    var dA = st.icicle ? Math.floor(scroll / ROW) : Math.floor((top - scroll - H) / ROW);
    var dB = st.icicle ? Math.floor((scroll + H) / ROW) : Math.floor((top - scroll) / ROW);
    var dmin = Math.max(0, Math.min(dA, dB)), dmax = Math.max(dA, dB);

    var z = st.zoom, zx = t.x0[z], scale = W / t.total[z];
    var K = t.keys, mk = st.matchKey;

    function box(i, x, w, faded) {
      var d = t.depth[i];
      if (d < dmin || d > dmax) return;
      var y = rowY(d) - scroll;
      var k = t.key[i];
      var matched = mk && i && mk[k];
      ctx.globalAlpha = faded ? 0.6 : 1;
      ctx.fillStyle = i === 0 ? ROOT_COLOR : matched ? MATCH_COLOR : keyColor(K, k);
      ctx.fillRect(x, y, w > 2 ? w - 1 : w, ROW - 1);
      if (w > 3 * charW) {
        var label = fitText(nodeName(t, i), w);
        if (label) {
          ctx.fillStyle = '#000';
          ctx.fillText(label, x + 3, y + ROW / 2);
        }
      }
      (st.drawn[d] || (st.drawn[d] = [])).push(i, x, w);
    }

    /* the zoomed frame's callers span the whole width, faded */
    for (var a = t.parent[z]; a >= 0; a = t.parent[a]) box(a, 0, W, true);
    box(z, 0, W, false);
    /* its subtree, in preorder; a frame too narrow or past the last
     * visible row is skipped with all of its callees */
    var end = z + t.size[z];
    for (var i = z + 1; i < end;) {
      var w = t.total[i] * scale;
      if (w < MIN_WIDTH || t.depth[i] > dmax) {
        i += t.size[i];
        continue;
      }
      box(i, (t.x0[i] - zx) * scale, w, false);
      i++;
    }
    ctx.globalAlpha = 1;
  }

  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      render();
    });
  }

  /* --- hit testing and the tooltip ----------------------------------------- */
  function nodeAt(cx, cy) {
    var t = st.tree;
    if (!t) return -1;
    var y = cy + el.chart.scrollTop;
    var d = st.icicle ? Math.floor(y / ROW) : Math.floor((graphHeight() - y) / ROW);
    var row = st.drawn[d];
    if (!row) return -1;
    for (var j = 0; j < row.length; j += 3)
      if (cx >= row[j + 1] && cx < row[j + 1] + row[j + 2]) return row[j];
    return -1;
  }

  /* Samples of node i by the line its frame was on, most first. */
  function linesOf(t, i) {
    var by = new Map(), d = t.depth[i];
    for (var j = t.first[i]; j < t.end[i]; j++) {
      var s = stacks[t.order[j]];
      if (s.length - 2 < d) continue;
      var line = F[4 * s[d + 1] + 2];
      by.set(line, (by.get(line) || 0) + s[1]);
    }
    return Array.from(by.entries()).sort(function (a, b) { return b[1] - a[1] || a[0] - b[0]; });
  }

  function tipLine(parent, cls, text) {
    var div = document.createElement('div');
    if (cls) div.className = cls;
    div.textContent = text; /* never innerHTML: names come from the profiled program */
    parent.appendChild(div);
  }

  function showTip(i, ev) {
    var t = st.tree, tip = el.tip, all = t.total[0];
    tip.textContent = '';
    if (i === 0) {
      tipLine(tip, 'fn', rootName());
      tipLine(tip, '', amount(all));
    } else {
      var K = t.keys, k = t.key[i], file = S[K.file[k]];
      tipLine(tip, 'fn', S[K.name[k]]);
      var lines = linesOf(t, i), where = file || '';
      if (lines.length && lines[0][0] > 0) {
        /* "app.py:12 (60%), line 13 (40%)": the busiest line first */
        var parts = lines.slice(0, 4).map(function (l, n) {
          return (n || !where ? 'line ' : where + ':') + l[0] +
            (lines.length > 1 ? ' (' + pct(l[1], t.total[i]) + ')' : '');
        });
        where = parts.join(', ') + (lines.length > 4 ? ', \u2026' : '');
      }
      if (where) tipLine(tip, '', where);
      tipLine(tip, '', amount(t.total[i]) + ' (' + pct(t.total[i], all) + ')' +
        (t.self[i] ? ', ' + t.self[i].toLocaleString('en-US') + ' self (' + pct(t.self[i], all) + ')' : ''));
      if (st.zoom && i !== st.zoom && t.depth[i] > t.depth[st.zoom])
        tipLine(tip, 'dim', pct(t.total[i], t.total[st.zoom]) + ' of ' + nodeName(t, st.zoom));
      if (K.kind[k]) tipLine(tip, 'dim', KIND[K.kind[k]] || '');
    }
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 16;
    var r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 4) x = Math.max(4, ev.clientX - r.width - 10);
    if (y + r.height > window.innerHeight - 4) y = Math.max(4, ev.clientY - r.height - 10);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }

  /* --- actions -------------------------------------------------------------- */
  function zoomTo(i) {
    st.zoom = i;
    el.reset.disabled = i === 0;
    redraw();
  }

  function setView() {
    st.tree = tree();
    st.zoom = 0;
    el.reset.disabled = true;
    el.spacer.style.height = graphHeight() + 'px';
    computeMatches();
    el.empty.hidden = st.tree.total[0] > 0;
  }

  function scrollToRoot() {
    el.chart.scrollTop = st.icicle ? 0 : el.chart.scrollHeight;
  }

  function makeMatcher(q) {
    if (!q) return null;
    var m = /^\/(.+)\/([a-z]*)$/.exec(q);
    if (m) {
      try {
        var re = new RegExp(m[1], m[2].replace(/[gy]/g, ''));
        return function (s) { return re.test(s); };
      } catch (e) {
        return 'bad';
      }
    }
    var lower = q.toLowerCase();
    return function (s) { return s.toLowerCase().indexOf(lower) >= 0; };
  }

  /* Marks matching keys and sums the samples under a match, counting a
   * stack once even when several of its frames match. */
  function computeMatches() {
    var t = st.tree, K = t.keys, fn = st.matcher;
    st.matchKey = null;
    st.matched = 0;
    if (typeof fn === 'function') {
      var mk = new Uint8Array(K.count), cache = new Map();
      for (var k = 0; k < K.count; k++) {
        var name = K.name[k], hit = cache.get(name);
        if (hit === undefined) cache.set(name, hit = fn(S[name]) ? 1 : 0);
        mk[k] = hit;
      }
      st.matchKey = mk;
      for (var i = 1; i < t.n;) {
        if (mk[t.key[i]]) {
          st.matched += t.total[i];
          i += t.size[i];
        } else {
          i++;
        }
      }
    }
    if (fn === 'bad') el.match.textContent = 'not a regular expression';
    else if (fn) el.match.textContent = 'matched ' + pct(st.matched, t.total[0]) + ' (' +
      amount(st.matched) + ')';
    else el.match.textContent = '';
  }

  var searchTimer = 0;
  function onSearch() {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () {
      st.query = el.search.value;
      st.matcher = makeMatcher(st.query);
      computeMatches();
      redraw();
    }, 60);
  }

  function fillThreads() {
    var opt = document.createElement('option');
    opt.value = '-1';
    opt.textContent = 'all threads (' + amount(grandTotal) + ')';
    el.thread.appendChild(opt);
    threads.slice().sort(function (a, b) { return b.samples - a.samples || a.index - b.index; })
      .forEach(function (t) {
        var o = document.createElement('option');
        o.value = String(t.index);
        o.textContent = threadLabel(t) + ' \u2014 ' + pct(t.samples, grandTotal);
        el.thread.appendChild(o);
      });
    el.thread.disabled = threads.length < 2;
  }

  /* The kinds of code in this profile, each with its colour. */
  var legend = (function () {
    var seen = [false, false, false, false];
    for (var f = 0; f < nframes; f++) seen[F[4 * f + 3]] = true;
    return LEGEND_ORDER.filter(function (k) { return seen[k]; })
      .map(function (k) { return { kind: KIND[k], color: KIND_SWATCH[k] }; });
  })();
  function fillLegend() {
    legend.forEach(function (l) {
      var item = document.createElement('span'), sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = l.color;
      item.appendChild(sw);
      item.appendChild(document.createTextNode(l.kind));
      el.legend.appendChild(item);
    });
    /* One kind says nothing: a Python-only profile looks as it always did. */
    el.legend.hidden = legend.length < 2;
  }

  function fillInfo() {
    var parts = [amount(grandTotal)];
    if (data.duration_ns) parts.push((data.duration_ns / 1e9).toFixed(1) + ' s');
    if (data.mode) parts.push(data.mode);
    if (data.period_ns) parts.push(Math.round(1e9 / data.period_ns) + ' Hz');
    if (data.start_ms) parts.push(new Date(data.start_ms).toLocaleString());
    el.info.textContent = parts.join(' \u00b7 ');
    var comms = Array.from(new Set(threads.map(function (t) { return t.comm; }).filter(Boolean)));
    var what = comms.slice(0, 3).join(', ') + (comms.length > 3 ? ', \u2026' : '');
    el.title.textContent = 'taipan' + (what ? ': ' + what : '');
    document.title = el.title.textContent + ' \u2014 flame graph';
  }

  /* --- events --------------------------------------------------------------- */
  function canvasPoint(ev) {
    var r = el.canvas.getBoundingClientRect();
    return [ev.clientX - r.left, ev.clientY - r.top];
  }
  el.canvas.addEventListener('mousemove', function (ev) {
    var p = canvasPoint(ev), i = nodeAt(p[0], p[1]);
    st.hover = i;
    if (i < 0) el.tip.hidden = true;
    else showTip(i, ev);
  });
  el.canvas.addEventListener('mouseleave', function () {
    st.hover = -1;
    el.tip.hidden = true;
  });
  el.canvas.addEventListener('click', function (ev) {
    var p = canvasPoint(ev), i = nodeAt(p[0], p[1]);
    if (i >= 0) zoomTo(i);
  });
  el.chart.addEventListener('scroll', function () {
    el.tip.hidden = true;
    redraw();
  });
  el.reset.addEventListener('click', function () { zoomTo(0); });
  el.layout.addEventListener('click', function () {
    st.icicle = !st.icicle;
    el.layout.textContent = st.icicle ? 'Flame' : 'Icicle';
    scrollToRoot();
    redraw();
  });
  el.bylines.addEventListener('change', function () {
    st.byLine = el.bylines.checked;
    setView();
    redraw();
  });
  el.thread.addEventListener('change', function () {
    st.sel = parseInt(el.thread.value, 10);
    setView();
    scrollToRoot();
    redraw();
  });
  el.search.addEventListener('input', onSearch);
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape') {
      if (document.activeElement === el.search && el.search.value) {
        el.search.value = '';
        onSearch();
      } else {
        zoomTo(0);
      }
    } else if (ev.key === '/' && document.activeElement !== el.search) {
      ev.preventDefault();
      el.search.focus();
    }
  });
  var resizeTimer = 0;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      resize();
      redraw();
    }, 50);
  });

  /* --- start ---------------------------------------------------------------- */
  fillThreads();
  fillLegend();
  fillInfo();
  resize();
  setView();
  timings.built = performance.now();
  scrollToRoot();
  render();
  timings.rendered = performance.now();

  /* --- the read-only API ---------------------------------------------------- */
  function frameInfo(t, i, x, w) {
    var r = el.canvas.getBoundingClientRect();
    var k = t.key[i], K = t.keys;
    return {
      node: i,
      name: nodeName(t, i),
      file: i ? S[K.file[k]] : '',
      line: i ? K.line[k] : 0,
      kind: i ? KIND[K.kind[k]] : 'root',
      color: i ? keyColor(K, k) : ROOT_COLOR, /* its own, whether or not it matched */
      depth: t.depth[i],
      samples: t.total[i],
      self: t.self[i],
      matched: !!(i && st.matchKey && st.matchKey[k]),
      x: r.left + x,
      y: r.top + rowY(t.depth[i]) - el.chart.scrollTop,
      width: w,
      height: ROW - 1,
    };
  }
  window.taipan = Object.freeze({
    /* Every frame drawn by the last draw, callers first, with its box in
     * viewport (clientX/clientY) coordinates. */
    visibleFrames: function () {
      var out = [], t = st.tree;
      st.drawn.forEach(function (row) {
        for (var j = 0; j < row.length; j += 3) out.push(frameInfo(t, row[j], row[j + 1], row[j + 2]));
      });
      return out;
    },
    /* The legend: [{kind, color}] for each kind of code in the profile. */
    legend: function () {
      return legend.map(function (l) { return { kind: l.kind, color: l.color }; });
    },
    threads: function () {
      return threads.map(function (t) {
        return { index: t.index, pid: t.pid, tid: t.tid, name: t.name, comm: t.comm,
                 samples: t.samples, label: threadLabel(t) };
      });
    },
    state: function () {
      var t = st.tree, r = el.canvas.getBoundingClientRect();
      return {
        thread: st.sel,
        layout: st.icicle ? 'icicle' : 'flame',
        byLine: st.byLine,
        total: t.total[0],
        allSamples: grandTotal,
        zoom: st.zoom ? { name: nodeName(t, st.zoom), samples: t.total[st.zoom] } : null,
        search: st.query,
        matchedSamples: st.matched,
        matchedPercent: t.total[0] ? 100 * st.matched / t.total[0] : 0,
        nodes: t.n,
        maxDepth: t.maxDepth,
        canvas: { x: r.left, y: r.top, width: st.width, height: st.height },
      };
    },
    timings: function () {
      return {
        parseMs: timings.parsed - timings.start,
        buildMs: timings.built - timings.parsed,
        renderMs: timings.rendered - timings.built,
        /* from the start of navigation: loading the page counts too */
        readyMs: timings.rendered,
      };
    },
    ready: true,
  });
})();

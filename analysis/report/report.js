(function () {
  'use strict';
  const { D, FONT, MONO, PATTERNS, el, sv, isNum, fixed, fmt, clamp, colorOf, chip, showTip, hideTip, saveButton,
    ticks, logTicks, fmtTick, section, footer } = headlab;
  const run = D.run, opt = D.options, extra = D.heads_extra, logLines = D.history || [];
  const heads = run.heads, L = run.layers, H = run.heads_per_layer;
  const ex = run.example, N = opt.max_positions, T = ex.tokens.length;
  const DEFS = [
    ...D.patterns.map((p) => [p.name, p.definition]),
    ['entropy', 'mean entropy of a query’s attention divided by log(keys it can see): 0 = one key, 1 = uniform.'],
    ['distance', 'mean |query − key| weighted by attention, in positions.'],
    ['JS divergence', 'mean Jensen–Shannon divergence between two heads’ attention rows, in bits: 0 = same, 1 = disjoint.'],
    ['ablation Δ', 'change in loss / accuracy when the head’s gate (before W_O) is 0.'],
    ['importance', 'mean |∂margin/∂gate| over the sequences with a target among the first 64 analyzed (importance_examples, 64 by default), divided by its layer’s Euclidean norm: heads.json’s importance_normalized (Michel et al., 2019, on the correct class’s logit margin, which does not saturate as the loss does; their loss gradient is heads.json’s importance).'],
    ['copying score', 'share of positive eigenvalue mass of the head’s OV circuit W_U W_O W_V W_E: 1 = attending to a token raises that token’s logit.'],
    ['composition', 'Q/K/V-composition ‖W_QK^T W_OV‖, ‖W_QK W_OV‖, ‖W_OV′ W_OV‖ over the product of norms: how much of an earlier head’s output a later head reads through its queries, keys or values.'],
    ['sink', 'a first-token head whose ablation barely changes the loss.'],
    ['diffuse / mixed', 'no pattern clears the threshold and margin; diffuse when entropy is high.']
  ];

  const pts = (v) => (isNum(v) ? (v > 0 ? '+' : '') + fixed(100 * v, 1) : '–');
  const signed = (v, d = 3) => (isNum(v) ? (v > 0 ? '+' : '') + fixed(v, d) : '–');
  // The normalized margin importance when measured; the raw loss gradient only for older files.
  const importanceText = (hd) => (isNum(hd.importance_normalized) ? fmt(hd.importance_normalized) : fmtImportance(hd.importance));
  const fmtImportance = (v) => (isNum(v) ? (v === 0 || Math.abs(v) >= 1e-3 ? fixed(v, 4) : v.toExponential(2)) : '–');
  const headName = (l, h) => 'L' + l + 'H' + h;
  const headAt = (l, h) => heads[l * H + h];
  // Categorical colours for lines, one per head (Tableau 10), cycling after ten.
  const HEAD_COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  function tokenLabel(i) {
    const t = ex.token_labels;
    return t && i < t.length ? String(t[i]) : String(ex.tokens[i]);
  }
  function clip(s, n) { const c = Array.from(s); return c.length <= n ? s : c.slice(0, n - 1).join('') + '…'; }
  function topPattern(hd) {
    let best = null;
    for (const [key, label, short] of PATTERNS) {
      const v = hd.scores[key];
      if (isNum(v) && (best === null || v > best.v)) best = { key, label, short, v };
    }
    return best;
  }
  // What a head card shows: its label's own score (a user pattern nested with
  // a built-in one may carry the label below the built-in's score), else the
  // top pattern's (mixed, diffuse, sink).
  function shownPattern(hd) {
    const own = PATTERNS.find((p) => p[1] === hd.label);
    if (own && isNum(hd.scores[own[0]])) return { key: own[0], label: own[1], short: own[2], v: hd.scores[own[0]] };
    return topPattern(hd);
  }

  // Attention colour: white to deep blue, linear in probability.
  const RAMP = [[0, [255, 255, 255]], [0.1, [224, 236, 248]], [0.3, [160, 200, 228]], [0.55, [70, 143, 199]],
    [0.8, [32, 98, 168]], [1, [10, 47, 107]]];
  function ramp(p, stops) {
    stops = stops || RAMP;
    p = clamp(isNum(p) ? p : 0, 0, 1);
    for (let i = 1; i < stops.length; ++i) {
      if (p <= stops[i][0]) {
        const [a, ca] = stops[i - 1], [b, cb] = stops[i], t = (p - a) / (b - a);
        return 'rgb(' + ca.map((c, j) => Math.round(c + t * (cb[j] - c))).join(',') + ')';
      }
    }
    return 'rgb(' + stops[stops.length - 1][1].join(',') + ')';
  }
  const JS_RAMP = [[0, [255, 255, 255]], [0.25, [233, 226, 247]], [0.5, [188, 168, 229]], [0.75, [124, 89, 196]],
    [1, [67, 32, 140]]];
  const gradientCss = (stops) => 'linear-gradient(90deg,' + stops.map(([p, c]) => 'rgb(' + c.join(',') + ') ' + (100 * p) + '%').join(',') + ')';

  // --- attention heatmap of one head: queries down, keys across ---
  function heatmap(l, h, cell, withValues) {
    const A = ex.attention[l][h];
    const n = Math.min(N, A.length);
    const fs = clamp(Math.round(cell * 0.62), 9, 13);
    const maxChars = cell >= 30 ? 10 : 6;
    const labels = [];
    for (let i = 0; i < n; ++i) labels.push(clip(tokenLabel(i), maxChars));
    const longest = Math.max(1, ...labels.map((s) => Array.from(s).length));
    const charW = fs * 0.62;
    // Cells too small for text get no axis labels (hover still names them).
    const axes = cell >= 8;
    const rotate = longest * charW > cell - 2;
    const left = axes ? Math.ceil(longest * charW + 10) : 1;
    const top = !axes ? 1 : rotate ? left : fs + 10;
    const W = left + n * cell + 2, Hh = top + n * cell + 2;
    const svg = sv('svg', { class: 'heatmap', viewBox: '0 0 ' + W + ' ' + Hh, width: W, height: Hh,
      'font-family': FONT, 'font-size': fs, role: 'img', 'aria-label': 'attention of ' + headName(l, h) });
    svg.append(sv('rect', { x: left, y: top, width: n * cell, height: n * cell, fill: '#eef1f5' }));
    const cells = sv('g', { stroke: cell >= 10 ? '#ffffff' : 'none', 'stroke-width': cell >= 10 ? 1 : 0 });
    const values = sv('g', { 'text-anchor': 'middle', 'dominant-baseline': 'central', 'font-size': clamp(cell * 0.34, 8, 12) });
    for (let q = 0; q < n; ++q) {
      for (let k = 0; k < n; ++k) {
        if (run.causal && k > q) continue;
        const p = A[q][k];
        cells.append(sv('rect', { x: left + k * cell, y: top + q * cell, width: cell, height: cell, fill: ramp(p),
          'data-q': q, 'data-k': k, 'data-p': p }));
        if (withValues && cell >= 26 && p >= 0.005)
          values.append(sv('text', { x: left + k * cell + cell / 2, y: top + q * cell + cell / 2,
            fill: p > 0.45 ? '#ffffff' : '#334155', 'pointer-events': 'none', text: p.toFixed(2).replace(/^0/, '') }));
      }
    }
    svg.append(cells, values);
    const axis = sv('g', { fill: '#475569', 'font-family': MONO });
    for (let i = 0; i < n && axes; ++i) {
      axis.append(sv('text', { x: left - 5, y: top + i * cell + cell / 2, 'text-anchor': 'end', 'dominant-baseline': 'central', text: labels[i] }));
      if (rotate)
        axis.append(sv('text', { transform: 'translate(' + (left + i * cell + cell / 2) + ',' + (top - 5) + ') rotate(-90)',
          'text-anchor': 'start', 'dominant-baseline': 'central', text: labels[i] }));
      else
        axis.append(sv('text', { x: left + i * cell + cell / 2, y: top - 5, 'text-anchor': 'middle', text: labels[i] }));
    }
    svg.append(axis);
    svg.addEventListener('mousemove', (ev) => {
      const t = ev.target;
      if (!t.dataset || t.dataset.q === undefined) return hideTip();
      const q = +t.dataset.q, k = +t.dataset.k;
      showTip(ev, headName(l, h) + '  ' + (+t.dataset.p).toFixed(3),
        ['query ' + q + '  “' + tokenLabel(q) + '”', 'key   ' + k + '  “' + tokenLabel(k) + '”']);
    });
    svg.addEventListener('mouseleave', hideTip);
    return svg;
  }

  // --- line chart over training steps ---
  // cfg: {series: [{name, color, dash, points: [[x, y]]}], yMin, yMax, log, yFmt, hlines: [{y, label}], marks: [{x, y, color}], height, xLabel}
  function lineChart(cfg) {
    const W = cfg.width || 600, Ht = cfg.height || 240, m = { l: 50, r: 14, t: 12, b: 30 };
    const legendRows = [];
    let row = [], used = 0;
    for (const s of cfg.series) {
      const w = 26 + s.name.length * 6.6 + 14;
      if (row.length && used + w > W - m.l - m.r) { legendRows.push(row); row = []; used = 0; }
      row.push({ s, x: used }); used += w;
    }
    if (row.length) legendRows.push(row);
    m.t += legendRows.length * 16;
    const svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + Ht, width: W, height: Ht, 'font-family': FONT, 'font-size': 11, role: 'img' });
    const all = cfg.series.flatMap((s) => s.points);
    if (!all.length) return null;
    const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs) > x0 ? Math.max(...xs) : x0 + 1;
    let y0 = cfg.yMin !== undefined ? cfg.yMin : Math.min(0, ...ys);
    let y1 = cfg.yMax !== undefined ? cfg.yMax : Math.max(...ys) * 1.05;
    const log = cfg.log && Math.min(...ys) > 0;
    if (log) { y0 = Math.min(...ys) / 1.3; y1 = Math.max(...ys) * 1.3; }
    if (!(y1 > y0)) y1 = y0 + 1;
    const X = (x) => m.l + (x - x0) / (x1 - x0) * (W - m.l - m.r);
    const Y = log ? (y) => m.t + (Math.log(y1) - Math.log(y)) / (Math.log(y1) - Math.log(y0)) * (Ht - m.t - m.b)
      : (y) => m.t + (y1 - y) / (y1 - y0) * (Ht - m.t - m.b);
    const yFmt = cfg.yFmt || fmtTick;
    const grid = sv('g', {});
    // A label every 16 px at most, however many decades a log axis spans.
    for (const t of (log ? logTicks(y0, y1, Math.floor((Ht - m.t - m.b) / 16)) : ticks(y0, y1, 5))) {
      grid.append(sv('line', { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t), stroke: '#e2e8f0' }));
      grid.append(sv('text', { x: m.l - 6, y: Y(t), 'text-anchor': 'end', 'dominant-baseline': 'central', fill: '#64748b', text: yFmt(t) }));
    }
    for (const t of ticks(x0, x1, 6).filter((v) => !cfg.integerX || Number.isInteger(v))) {
      grid.append(sv('line', { x1: X(t), x2: X(t), y1: Ht - m.b, y2: Ht - m.b + 4, stroke: '#94a3b8' }));
      grid.append(sv('text', { x: X(t), y: Ht - m.b + 16, 'text-anchor': 'middle', fill: '#64748b', text: fmtTick(t) }));
    }
    grid.append(sv('line', { x1: m.l, x2: W - m.r, y1: Ht - m.b, y2: Ht - m.b, stroke: '#94a3b8' }));
    grid.append(sv('text', { x: W - m.r, y: Ht - 3, 'text-anchor': 'end', fill: '#94a3b8', text: cfg.xLabel || 'step' }));
    svg.append(grid);
    for (const hl of cfg.hlines || []) {
      svg.append(sv('line', { x1: m.l, x2: W - m.r, y1: Y(hl.y), y2: Y(hl.y), stroke: '#64748b', 'stroke-dasharray': '4 4' }));
      svg.append(sv('text', { x: W - m.r - 2, y: Y(hl.y) - 5, 'text-anchor': 'end', fill: '#64748b', text: hl.label }));
    }
    for (const s of cfg.series) {
      if (!s.points.length) continue;
      const d = s.points.map((p, i) => (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1)).join('');
      svg.append(sv('path', { d, fill: 'none', stroke: s.color, 'stroke-width': 2, 'stroke-linejoin': 'round', 'stroke-dasharray': s.dash || null }));
      if (s.points.length === 1) svg.append(sv('circle', { cx: X(s.points[0][0]), cy: Y(s.points[0][1]), r: 3, fill: s.color }));
    }
    for (const mk of cfg.marks || [])
      svg.append(sv('circle', { cx: X(mk.x), cy: Y(mk.y), r: 4.5, fill: '#fff', stroke: mk.color, 'stroke-width': 2 }));
    legendRows.forEach((r, i) => r.forEach(({ s, x }) => {
      const y = 10 + i * 16;
      svg.append(sv('line', { x1: m.l + x, x2: m.l + x + 18, y1: y, y2: y, stroke: s.color, 'stroke-width': 2.5, 'stroke-dasharray': s.dash || null }));
      svg.append(sv('text', { x: m.l + x + 23, y, 'dominant-baseline': 'central', fill: '#334155', text: s.name }));
    }));
    // Hover: a guide at the nearest logged step and every series' value there.
    const guide = sv('line', { y1: m.t, y2: Ht - m.b, stroke: '#0f172a', 'stroke-opacity': 0.35, visibility: 'hidden' });
    svg.append(guide);
    const hit = sv('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: Ht - m.t - m.b, fill: 'transparent' });
    svg.append(hit);
    const steps = [...new Set(xs)].sort((a, b) => a - b);
    hit.addEventListener('mousemove', (ev) => {
      const box = svg.getBoundingClientRect();
      const sx = (ev.clientX - box.left) * W / box.width;
      const xv = x0 + (sx - m.l) / (W - m.l - m.r) * (x1 - x0);
      let best = steps[0];
      for (const s of steps) if (Math.abs(s - xv) < Math.abs(best - xv)) best = s;
      guide.setAttribute('x1', X(best)); guide.setAttribute('x2', X(best)); guide.setAttribute('visibility', 'visible');
      const lines = [];
      for (const s of cfg.series) {
        const p = s.points.find((q) => q[0] === best);
        if (p) lines.push(s.name + '  ' + (cfg.tipFmt || yFmt)(p[1]));
      }
      showTip(ev, (cfg.xLabel || 'step') + ' ' + best, lines);
    });
    hit.addEventListener('mouseleave', () => { hideTip(); guide.setAttribute('visibility', 'hidden'); });
    return svg;
  }
  function chartBox(title, svg, file, wide, caption) {
    return el('div', { class: 'chart' + (wide ? ' wide' : '') },
      el('div', { class: 'chart-head' }, el('h3', { text: title }), svg ? saveButton(() => svg, file) : null),
      svg || el('p', { class: 'empty', text: 'Not in the metrics history.' }),
      caption ? el('div', { class: 'caption', text: caption }) : null);
  }
  function seriesOf(key) {
    const pts = [];
    for (const line of logLines) if (line && isNum(line.step) && isNum(line[key])) pts.push([line.step, line[key]]);
    return pts;
  }

  // --- sections ---
  const app = document.getElementById('app');
  app.replaceChildren();

  // What identifies a run first (task or data file, model shape, steps,
  // seed, optimizer, lr), with the values in effect rather than the "0:
  // default" sentinels; every other setting folded below.
  function header() {
    const c = D.config || {};
    const has = (k) => c[k] !== undefined && c[k] !== null && c[k] !== '';
    const kv = (k, v) => el('span', { class: 'kv', 'data-key': k }, k + ' ', el('b', { text: String(v) }));
    const dff = c['attn-only'] ? 'none (attention only)' : has('d-ff') && c['d-ff'] > 0 ? c['d-ff'] : has('d-model') ? 4 * c['d-model'] : null;
    const shape = L + ' layer' + (L > 1 ? 's' : '') + ' × ' + H + ' head' + (H > 1 ? 's' : '') +
      (has('d-model') ? ', d_model ' + c['d-model'] : '') + (dff !== null ? ', d_ff ' + dff : '') +
      ', ' + (run.causal ? 'causal' : 'bidirectional');
    const first = [];
    // A --data run trained on its file: its config's "task" is the unused default's.
    if (has('data')) first.push(kv('data', c.data));
    else if (has('task')) first.push(kv('task', c.task));
    first.push(kv('model', shape));
    for (const k of ['steps', 'seed', 'optimizer', 'lr']) if (has(k)) first.push(kv(k, c[k]));
    const shown = new Set(['task', 'data', 'd-model', 'd-ff', 'layers', 'heads', 'attn-only', 'bidirectional', 'steps', 'seed', 'optimizer', 'lr']);
    const rest = Object.entries(c).filter(([k, v]) => !shown.has(k) && v !== null && v !== '' && typeof v !== 'object')
      .map(([k, v]) => kv(k, v));
    return el('header', {},
      el('div', { class: 'brand', text: 'headlab · attention-head analysis' }),
      el('h1', { text: D.title }),
      el('div', { class: 'chips' }, ...first),
      rest.length ? el('details', { class: 'more-config' }, el('summary', { text: 'all settings (' + rest.length + ' more)' }),
        el('div', { class: 'chips' }, ...rest)) : null);
  }

  function verdict() {
    const v = run.verdict, good = v.specialized || v.roles_found;
    // The verdict's counted heads (a loss rise or a set they add to counts
    // them too); a heads.json from before lists none: then by accuracy alone.
    const counted = v.counted ? heads.filter((hd) => v.counted.includes(headName(hd.layer, hd.head)))
      : heads.filter((hd) => !['mixed', 'diffuse', 'sink'].includes(hd.label) &&
        !(isNum(hd.ablation_delta_accuracy) && -hd.ablation_delta_accuracy < opt.min_ablation_acc_drop));
    const roles = [...new Set(counted.map((hd) => hd.label))];
    const headline = v.specialized
      ? 'Heads took distinct roles: ' + roles.join(', ') + '.'
      : v.roles_found ? 'The task\u2019s expected roles are there: ' + roles.join(', ') + '.'
        : 'No clear division of labour between heads under the thresholds below.';
    const stat = (k, val) => el('div', { class: 'stat' }, el('div', { class: 'v', text: val }), el('div', { class: 'k', text: k }));
    return el('section', { class: 'card verdict' + (good ? ' good' : '') },
      el('div', {},
        el('div', { class: 'status' }, el('span', { class: 'badge', text: 'verdict' }), v.specialized ? 'Heads specialized' : v.roles_found ? 'Every expected role found' : 'Heads did not specialize'),
        el('p', { class: 'headline', text: headline }),
        el('ul', { class: 'reasons' }, ...(v.reasons || []).map((r) => el('li', { text: r })))),
      el('div', { class: 'stats' },
        stat('loss', fmt(run.loss, 4)),
        stat('accuracy', isNum(run.accuracy) ? fixed(100 * run.accuracy, 1) + '%' : '–'),
        stat('heads with a role', v.counted_heads + ' / ' + heads.length),
        stat('min JS between roles', isNum(v.min_js) ? fixed(v.min_js, 2) + ' bits' : '–')));
  }

  function gridSection() {
    const seq = el('div', { class: 'seq', 'aria-label': 'the example' });
    for (let i = 0; i < T; ++i) seq.append(el('span', { class: 'tok', title: 'position ' + i + ', token id ' + ex.tokens[i] }, el('i', { text: String(i) }), tokenLabel(i)));
    const n = Math.min(N, T);
    // Compact: a layer's heads side by side. Large: maps at least LARGE px
    // wide, wrapping; the default on wide screens when a map has more than
    // 12 positions, too many to read at a compact size.
    const LARGE = 520;
    const wide = window.innerWidth >= 1200;
    let large = n > 12 && wide && H > 1;
    const grid = el('div', { class: 'grid' });
    const toggle = el('button', { class: 'btn', type: 'button', onclick: () => { large = !large; fill(); } });
    function fill() {
      grid.replaceChildren();
      grid.classList.toggle('large', large);
      toggle.textContent = large ? 'compact maps' : 'large maps';
      // Each map fills its card (the SVG scales to the card's width); the cell
      // size sets the proportions of its labels.
      const content = Math.max(320, (app.clientWidth || 1100) - 110);
      const perRow = large ? Math.max(1, Math.min(H, Math.floor(content / LARGE))) : H;
      const cardWidth = content / perRow - 26;
      const cell = clamp(Math.floor(cardWidth / (n + 3)), 5, 44);
      for (let l = 0; l < L; ++l) {
        grid.append(el('div', { class: 'rowhead', text: 'layer ' + l }));
        const row = el('div', { class: 'layer-heads', style: 'grid-template-columns: repeat(' + perRow + ', minmax(0, 1fr))' });
        for (let h = 0; h < H; ++h) row.append(headCard(l, h, cell));
        grid.append(row);
      }
    }
    function headCard(l, h, cell) {
      const hd = headAt(l, h), top = shownPattern(hd);
      const card = el('div', { class: 'head-card', tabindex: 0, role: 'button', 'aria-label': 'enlarge ' + headName(l, h),
        onclick: () => openModal(l * H + h), onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); openModal(l * H + h); } } },
        el('div', { class: 'head-top' }, el('span', { class: 'hname', text: headName(l, h) }), chip(hd.label),
          el('span', { class: 'score', title: top.label + ' score', text: top.short + ' ' + fmt(top.v) })),
        heatmap(l, h, cell, cell >= 26),
        el('div', { class: 'head-foot', text: 'entropy ' + fmt(hd.scores.entropy) + ' · distance ' + fmt(hd.scores.distance, 1) +
          (isNum(hd.ablation_delta_accuracy) ? ' · ablation Δacc ' + pts(hd.ablation_delta_accuracy) + ' pts' : '') }));
      return card;
    }
    fill();
    const legend = el('div', { class: 'legend-inline' }, 'attention', el('span', { text: '0' }),
      el('span', { class: 'ramp', style: 'background:' + gradientCss(RAMP) }), el('span', { text: '1' }),
      run.causal ? el('span', { text: '· grey: masked (a query never sees later keys)' }) : null,
      n < T ? el('span', { text: '· first ' + n + ' of ' + T + ' positions shown' }) : null,
      H > 1 ? toggle : null);
    return section('Attention on one example',
      'Each map is one head on the example below: queries down, keys across, darker = more attention. Hover a cell for its value; click a map for a large view with all of the head’s numbers.',
      seq, grid, legend);
  }

  function curvesSection() {
    const charts = el('div', { class: 'charts' });
    // With a fixed training set (train_* in the metrics): the model on the
    // training set and on the held-out set, instead of the batch averages.
    const fixedSet = seriesOf('train_accuracy').length > 0;
    const curves = (what) => (fixedSet ? [['train_' + what, '#15803d', 'train ' + what], ['eval_' + what, '#dc2626', 'held-out ' + what]]
      : [[what, what === 'loss' ? '#0f172a' : '#15803d', what], ['eval_' + what, what === 'loss' ? '#2563eb' : '#0891b2', 'eval ' + what]])
      .map(([k, c, name]) => ({ name: name, color: c, points: seriesOf(k) })).filter((s) => s.points.length);
    const loss = curves('loss');
    const lossPts = loss.flatMap((s) => s.points.map((p) => p[1]));
    const useLog = lossPts.length && Math.min(...lossPts) > 0 && Math.max(...lossPts) / Math.min(...lossPts) > 30;
    const lossSvg = loss.length ? lineChart({ series: loss, log: useLog, tipFmt: (v) => v.toFixed(4) }) : null;
    charts.append(chartBox('Loss' + (useLog ? ' (log scale)' : ''), lossSvg, 'loss.svg', false));
    const acc = curves('accuracy');
    const accSvg = acc.length ? lineChart({ series: acc, yMin: 0, yMax: 1, yFmt: (v) => Math.round(100 * v) + '%', tipFmt: (v) => (100 * v).toFixed(1) + '%' }) : null;
    charts.append(chartBox('Accuracy', accSvg, 'accuracy.svg', false));

    // Each head's score for the pattern it ends with, over training: one
    // colour per head, the label as the line's style (solid for the first
    // label, then dashes) and in the legend.
    const labelsSeen = [];
    const series = [], marks = [], emerged = [];
    heads.forEach((hd, i) => {
      const x = extra[i], name = x.name;
      const pts = [];
      for (const line of logLines) {
        const r = line && line.heads && line.heads[name];
        if (r && isNum(line.step) && isNum(r[x.pattern])) pts.push([line.step, r[x.pattern]]);
      }
      if (!pts.length) return;
      // The final analysis, of a last step off the --analyze-every grid, which
      // metrics.jsonl has no record of (its emergence counts it too).
      const last = hd.scores && hd.scores[x.pattern];
      if (isNum(run.step) && run.step > pts[pts.length - 1][0] && isNum(last)) pts.push([run.step, last]);
      const color = HEAD_COLORS[i % HEAD_COLORS.length];
      if (!labelsSeen.includes(hd.label)) labelsSeen.push(hd.label);
      const dash = [null, '7 4', '2 3', '9 3 2 3'][labelsSeen.indexOf(hd.label) % 4];
      series.push({ name: name + ' ' + hd.label + (hd.label === x.pattern_label ? '' : ' (' + x.pattern_label + ')'), color, dash, points: pts });
      if (isNum(x.emerged)) {
        const p = pts.find((q) => q[0] === x.emerged);
        if (p) marks.push({ x: p[0], y: p[1], color });
        emerged.push(name + ' ' + x.pattern_label + ' at step ' + x.emerged);
      }
    });
    const th = opt.score_threshold;
    const headSvg = series.length ? lineChart({ series, width: 1200, yMin: 0, yMax: 1, height: 320, marks, hlines: [{ y: th, label: 'label threshold ' + th.toFixed(2) }], tipFmt: (v) => v.toFixed(3) }) : null;
    const caption = series.length
      ? (emerged.length ? 'Emerged (score stays ≥ ' + th.toFixed(2) + ' from then on, circled): ' + emerged.join(' · ') + '.' : 'No head’s score stays above the threshold ' + th.toFixed(2) + '.')
      : logLines.length ? 'No per-head records in the metrics history (train with --analyze-every).'
        // No history: the analysis of a snapshot, of another task's or file's data, or of a checkpoint away from its run.
        : 'No training history in this folder: it holds an analysis of a checkpoint, whose run folder’s report.html has the curves.';
    charts.append(chartBox('Head scores over training (each head’s final top pattern)', headSvg, 'head-scores.svg', true, caption));
    progressCharts(charts);
    return section('Training', 'Loss and accuracy as logged, and when each head’s pattern appeared.', charts);
  }

  // Nanda et al.'s progress measures, logged by modular-addition runs at
  // each analysis step (docs/head-metrics.md): the key frequencies' losses,
  // their share of the embedding's norm and the heads' attention on a and b.
  function progressCharts(charts) {
    const lines = logLines.filter((l) => l && isNum(l.step) && l.progress && isNum(l.progress.restricted_loss));
    if (!lines.length) return;
    const of = (f) => lines.map((l) => [l.step, f(l.progress)]).filter((q) => isNum(q[1]) && q[1] > 0);
    const losses = [['full_loss', '#0f172a', 'full loss (all pairs)'], ['restricted_loss', '#15803d', 'restricted loss (key frequencies only, all pairs)'],
      ['excluded_loss', '#dc2626', 'excluded loss (key frequencies removed, training pairs)']]
      .map(([k, c, name]) => ({ name, color: c, points: of((g) => g[k]) })).filter((x) => x.points.length);
    const last = lines[lines.length - 1].progress;
    const keys = (last.key_frequencies || []).join(', ');
    charts.append(chartBox('Progress measures: losses (log scale)', losses.length ? lineChart({ series: losses, log: true, tipFmt: (v) => v.toExponential(3) }) : null,
      'progress-losses.svg', false, 'Key frequencies at step ' + lines[lines.length - 1].step + ': ' + keys + ' (the embedding’s ' + (last.key_frequencies || []).length + ' largest; Nanda et al. 2023).'));
    const share = [{ name: 'key frequencies’ share of the embedding', color: '#7c3aed', points: of((g) => g.key_share) }];
    (last.attention_a || []).forEach((_, i) => {
      const color = HEAD_COLORS[i % HEAD_COLORS.length], name = heads[i] ? headName(heads[i].layer, heads[i].head) : 'head ' + i;
      share.push({ name: name + ' on a', color, points: of((g) => g.attention_a && g.attention_a[i]) });
      share.push({ name: name + ' on b', color, dash: '7 4', points: of((g) => g.attention_b && g.attention_b[i]) });
    });
    charts.append(chartBox('Progress measures: embedding and attention', lineChart({ series: share, yMin: 0, yMax: 1, tipFmt: (v) => v.toFixed(3) }),
      'progress-shares.svg', false, 'Share of the token embedding’s squared norm in the key frequencies, and each head’s mean attention at ‘=’ on the operands a (solid) and b (dashed).'));
  }

  function jsSection() {
    const n = heads.length, M = run.js_divergence;
    const cell = clamp(Math.floor(440 / n), 14, 54), fs = 12;
    const names = heads.map((hd) => headName(hd.layer, hd.head));
    const left = 66, top = 60, W = left + n * cell + 2, Ht = top + n * cell + 2;
    const svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + Ht, width: W, height: Ht, 'font-family': FONT, 'font-size': fs, role: 'img', 'aria-label': 'JS divergence between heads' });
    for (let i = 0; i < n; ++i) {
      const c = colorOf(heads[i].label);
      svg.append(sv('text', { x: left - 8, y: top + i * cell + cell / 2, 'text-anchor': 'end', 'dominant-baseline': 'central', fill: '#334155', 'font-family': MONO, text: names[i] }));
      svg.append(sv('rect', { x: left - 5, y: top + i * cell + 2, width: 3, height: cell - 4, fill: c }));
      svg.append(sv('text', { transform: 'translate(' + (left + i * cell + cell / 2) + ',' + (top - 8) + ') rotate(-90)', 'dominant-baseline': 'central', fill: '#334155', 'font-family': MONO, text: names[i] }));
      svg.append(sv('rect', { x: left + i * cell + 2, y: top - 5, width: cell - 4, height: 3, fill: c }));
      for (let j = 0; j < n; ++j) {
        const v = M[i][j];
        svg.append(sv('rect', { x: left + j * cell, y: top + i * cell, width: cell, height: cell, fill: i === j ? '#eef1f5' : ramp(v, JS_RAMP), stroke: '#fff', 'data-i': i, 'data-j': j }));
        if (cell >= 30 && i !== j)
          svg.append(sv('text', { x: left + j * cell + cell / 2, y: top + i * cell + cell / 2, 'text-anchor': 'middle', 'dominant-baseline': 'central', 'font-size': 11, 'pointer-events': 'none', fill: v > 0.55 ? '#fff' : '#334155', text: v.toFixed(2) }));
      }
    }
    svg.addEventListener('mousemove', (ev) => {
      const t = ev.target;
      if (!t.dataset || t.dataset.i === undefined) return hideTip();
      const i = +t.dataset.i, j = +t.dataset.j;
      showTip(ev, names[i] + ' ↔ ' + names[j], ['JS divergence ' + M[i][j].toFixed(3) + ' bits', heads[i].label + ' / ' + heads[j].label]);
    });
    svg.addEventListener('mouseleave', hideTip);
    const pairs = [];
    for (let i = 0; i < n; ++i) for (let j = i + 1; j < n; ++j) pairs.push([M[i][j], i, j]);
    pairs.sort((a, b) => a[0] - b[0]);
    const list = el('ol', {}, ...pairs.slice(0, 6).map(([v, i, j]) => el('li', { text: names[i] + ' – ' + names[j] + ':  ' + v.toFixed(2) + ' bits  (' + heads[i].label + ', ' + heads[j].label + ')' })));
    return section('Head-to-head distance', 'Mean Jensen–Shannon divergence between two heads’ attention rows over the same queries, in bits: 0 = they attend alike, 1 = never to the same keys.',
      el('div', { class: 'row2' },
        el('div', {}, svg, el('div', { class: 'legend-inline' }, '0', el('span', { class: 'ramp', style: 'background:' + gradientCss(JS_RAMP) }), '1 bit', saveButton(() => svg, 'js-divergence.svg'))),
        el('div', { class: 'pairs' }, el('b', { text: 'Most similar pairs' }), pairs.length ? list : el('p', { class: 'empty', text: 'One head only.' }),
          el('p', { class: 'muted', text: 'Heads with different labels count as distinct roles when they differ by at least ' + opt.min_js.toFixed(2) + ' bits.' }))));
  }

  function tableSection() {
    const cols = ['head', 'label', ...PATTERNS.map((p) => p[2]), 'entropy', 'distance', 'Δ loss', 'Δ acc (pts)', 'importance', 'emerged at'];
    const body = el('tbody', {});
    heads.forEach((hd, i) => {
      const s = hd.scores, top = topPattern(hd);
      const score = (key) => {
        const isTop = key === top.key;
        return el('td', { class: isTop ? 'top' : null, style: isTop ? 'color:' + colorOf(PATTERNS.find((p) => p[0] === key)[1]) : null, text: fmt(s[key]) });
      };
      body.append(el('tr', { onclick: () => openModal(i) },
        el('td', { class: 'hname', text: headName(hd.layer, hd.head) }), el('td', {}, chip(hd.label)),
        ...PATTERNS.map((p) => score(p[0])),
        el('td', { text: fmt(s.entropy) }), el('td', { text: fmt(s.distance, 2) }),
        el('td', { text: signed(hd.ablation_delta_loss) }),
        el('td', { class: isNum(hd.ablation_delta_accuracy) && hd.ablation_delta_accuracy <= -opt.min_ablation_acc_drop ? 'neg' : null, text: pts(hd.ablation_delta_accuracy) }),
        el('td', { text: importanceText(hd) }),
        el('td', { text: isNum(extra[i].emerged) ? 'step ' + extra[i].emerged : '–' })));
    });
    const table = el('table', { class: 'heads' }, el('thead', {}, el('tr', {}, ...cols.map((c) => el('th', { text: c })))), body);
    return section('Heads', 'Pattern scores (bold: the highest), entropy, distance, and what ablating the head (gate 0, before W_O) does to loss and accuracy. Click a row for its attention map.',
      el('div', { class: 'table-wrap' }, table));
  }

  function defsSection() {
    const th = 'Labels: a pattern names a head when its score is ≥ ' + opt.score_threshold.toFixed(2) + ' and beats the runner-up by ≥ ' + opt.margin.toFixed(2) +
      ' (a user pattern may take the label within that margin from a built-in pattern it nests with: see the pattern list)' +
      '; otherwise diffuse (entropy ≥ ' + opt.diffuse_entropy.toFixed(2) + ') or mixed. Sink: first-token head with ablation Δ loss ≤ ' + opt.sink_max_delta_loss +
      '. Verdict: ≥ ' + opt.min_distinct_labels + ' distinct roles, ≥ ' + opt.min_js.toFixed(2) + ' bits apart, each costing ≥ ' + (100 * opt.min_ablation_acc_drop).toFixed(1) + ' pts accuracy when ablated.';
    return section('What the numbers mean', th,
      el('div', { class: 'defs' }, ...DEFS.map(([k, v]) => el('div', {}, el('b', { text: k }), ' — ' + v))),
      el('details', { class: 'config' }, el('summary', { text: 'Run configuration (config.json)' }), el('pre', { text: JSON.stringify(D.config, null, 2) })));
  }


  // --- circuits from the weights: composition graph, copying scores, pruning curve ---
  const COMP_KINDS = [['q', 'Q', '#2563eb'], ['k', 'K', '#dc2626'], ['v', 'V', '#16a34a']];
  function compositionGraph(comp, base) {
    const colW = 170, rowH = 46, W = 60 + (L - 1) * colW + 60 + 40, Ht = 40 + H * rowH;
    const svg = sv('svg', { class: 'composition', viewBox: '0 0 ' + W + ' ' + Ht, width: W, height: Ht, 'font-family': FONT, 'font-size': 12, role: 'img', 'aria-label': 'composition between heads' });
    const at = (l, h) => [50 + l * colW, 30 + h * rowH + rowH / 2];
    const b = isNum(base) ? base : 0;
    const edges = sv('g', { fill: 'none' });
    comp.forEach((c, i) => COMP_KINDS.forEach(([key, name, color], j) => {
      const v = c[key];
      if (!isNum(v) || v <= b) return;
      const wl = +c.writer.slice(1, c.writer.indexOf('H')), wh = +c.writer.slice(c.writer.indexOf('H') + 1);
      const rl = +c.reader.slice(1, c.reader.indexOf('H')), rh = +c.reader.slice(c.reader.indexOf('H') + 1);
      const [x1, y1] = at(wl, wh), [x2, y2] = at(rl, rh), bend = (j - 1) * 14;
      const strength = clamp((v - b) / Math.max(1e-9, 1 - b), 0, 1);
      edges.append(sv('path', { class: 'edge', d: 'M' + x1 + ' ' + y1 + ' C' + (x1 + colW / 2) + ' ' + (y1 + bend) + ' ' + (x2 - colW / 2) + ' ' + (y2 + bend) + ' ' + x2 + ' ' + y2,
        stroke: color, 'stroke-width': (1 + 9 * strength).toFixed(2), 'stroke-opacity': (0.25 + 0.7 * strength).toFixed(2), 'data-i': i, 'data-kind': key }));
    }));
    svg.append(edges);
    for (let l = 0; l < L; ++l) {
      svg.append(sv('text', { x: at(l, 0)[0], y: 14, 'text-anchor': 'middle', fill: '#64748b', text: 'layer ' + l }));
      for (let h = 0; h < H; ++h) {
        const [x, y] = at(l, h), hd = headAt(l, h);
        svg.append(sv('circle', { class: 'node', cx: x, cy: y, r: 15, fill: colorOf(hd.label), stroke: '#fff', 'stroke-width': 2 }));
        svg.append(sv('text', { x, y, 'text-anchor': 'middle', 'dominant-baseline': 'central', fill: '#fff', 'font-weight': 700, 'font-size': 10, 'pointer-events': 'none', text: 'H' + h }));
      }
    }
    svg.addEventListener('mousemove', (ev) => {
      const t = ev.target;
      if (!t.dataset || t.dataset.i === undefined) return hideTip();
      const c = comp[+t.dataset.i];
      showTip(ev, c.writer + ' → ' + c.reader, COMP_KINDS.map(([key, name]) => name + '-composition ' + fmt(c[key], 3)).concat(['random baseline ' + fmt(base, 3)]));
    });
    svg.addEventListener('mouseleave', hideTip);
    return svg;
  }
  function copyingChart() {
    const rowH = 22, left = 58, barW = 300, W = left + barW + 60, Ht = 10 + heads.length * rowH + 24;
    const svg = sv('svg', { class: 'copying', viewBox: '0 0 ' + W + ' ' + Ht, width: W, height: Ht, 'font-family': FONT, 'font-size': 12, role: 'img', 'aria-label': 'copying scores' });
    heads.forEach((hd, i) => {
      const y = 10 + i * rowH, v = hd.copying;
      svg.append(sv('text', { x: left - 8, y: y + rowH / 2, 'text-anchor': 'end', 'dominant-baseline': 'central', 'font-family': MONO, fill: '#334155', text: headName(hd.layer, hd.head) }));
      svg.append(sv('rect', { x: left, y: y + 4, width: barW, height: rowH - 8, fill: '#f1f5f9' }));
      if (isNum(v)) svg.append(sv('rect', { class: 'copy-bar', x: left, y: y + 4, width: (barW * clamp(v, 0, 1)).toFixed(1), height: rowH - 8, fill: colorOf(hd.label) }));
      svg.append(sv('text', { x: left + barW + 6, y: y + rowH / 2, 'dominant-baseline': 'central', fill: '#334155', text: fmt(v) }));
    });
    const y0 = 10 + heads.length * rowH;
    svg.append(sv('line', { x1: left + barW / 2, x2: left + barW / 2, y1: 6, y2: y0, stroke: '#94a3b8', 'stroke-dasharray': '3 3' }));
    for (const [v, a] of [[0, 'start'], [0.5, 'middle'], [1, 'end']])
      svg.append(sv('text', { x: left + barW * v, y: y0 + 14, 'text-anchor': a, fill: '#64748b', text: String(v) }));
    return svg;
  }
  function pruningChart(p) {
    const xs = p.loss.map((_, i) => i);
    const accSeries = [{ name: 'accuracy, importance order', color: '#15803d', points: xs.map((i) => [i, p.accuracy[i]]) }];
    const lossSeries = [{ name: 'loss, importance order', color: '#0f172a', points: xs.map((i) => [i, p.loss[i]]) }];
    if (p.random_accuracy.length) {
      accSeries.push({ name: 'accuracy, random (mean of ' + p.random_orders + ')', color: '#15803d', dash: '7 4', points: xs.map((i) => [i, p.random_accuracy[i]]) });
      lossSeries.push({ name: 'loss, random (mean of ' + p.random_orders + ')', color: '#0f172a', dash: '7 4', points: xs.map((i) => [i, p.random_loss[i]]) });
    }
    // Heads come whole: no tick at 0.5 heads.
    return [lineChart({ series: accSeries, yMin: 0, yMax: 1, xLabel: 'heads removed', integerX: true, yFmt: (v) => Math.round(100 * v) + '%', tipFmt: (v) => (100 * v).toFixed(1) + '%' }),
      lineChart({ series: lossSeries, xLabel: 'heads removed', integerX: true, tipFmt: (v) => v.toFixed(4) })];
  }
  function circuitSection() {
    const c = run.circuits || {}, comp = c.composition || [], base = c.composition_baseline;
    const charts = el('div', { class: 'charts' });
    if (comp.length) {
      const g = compositionGraph(comp, base);
      const top = comp.map((x) => COMP_KINDS.map(([key, name]) => [x[key], name, x])).flat().sort((a, b) => b[0] - a[0]).slice(0, 6);
      charts.append(chartBox('Composition between layers', g, 'composition.svg', false,
        'Edges: Q (blue), K (red), V (green) composition above the random baseline ' + fmt(base) + ', wider = stronger. Strongest: ' +
        top.map(([v, name, x]) => x.writer + '→' + x.reader + ' ' + name + ' ' + fmt(v)).join(' · ') + '.'));
    }
    if (heads.some((hd) => isNum(hd.copying))) {
      const svg = copyingChart();
      charts.append(chartBox('Copying score of each head’s OV circuit', svg, 'copying.svg', false,
        'Share of positive eigenvalue mass of W_U W_O W_V W_E: near 1, attending to a token raises that token’s logit (copying).'));
    }
    if (run.pruning) {
      const [acc, loss] = pruningChart(run.pruning);
      const order = run.pruning.order.join(', ');
      charts.append(chartBox('Pruning: accuracy', acc, 'pruning-accuracy.svg', false, 'Heads zero-ablated in order of normalized importance, least important first: ' + order + '; dashed: random orders.'));
      charts.append(chartBox('Pruning: loss', loss, 'pruning-loss.svg', false, null));
    }
    if (!charts.children.length) return null;
    const approx = c.layernorm_folded || c.mlp_ignored
      ? 'Approximation: ' + [c.layernorm_folded ? 'LayerNorm folded as its centering and scale' : null, c.mlp_ignored ? 'MLPs ignored' : null].filter(Boolean).join(', ') + '.'
      : 'Exact: an attention-only model without LayerNorm.';
    return el('div', { id: 'circuits' }, section('Circuits', 'What the weights say heads do together (Elhage et al., 2021) and what removing them costs. ' + approx, charts));
  }

  // --- behaviour over training: loss by position, in-context learning, task-position scores ---
  function behaviourSection() {
    const charts = el('div', { class: 'charts' });
    const withPos = logLines.filter((line) => line && isNum(line.step) && Array.isArray(line.position_loss));
    // At most five logged steps, spread from the first to the last, plus the final analysis.
    const picked = [];
    for (let k = 0; k < Math.min(5, withPos.length); ++k) {
      const line = withPos[Math.round(k * (withPos.length - 1) / Math.max(1, Math.min(5, withPos.length) - 1))];
      if (!picked.includes(line)) picked.push(line);
    }
    const POS_RAMP = [[0, [203, 213, 225]], [1, [15, 23, 42]]];
    const posSeries = picked.map((line, k) => ({
      name: 'step ' + line.step, color: ramp(picked.length > 1 ? k / (picked.length - 1) : 1, POS_RAMP),
      points: line.position_loss.map((v, t) => [t, v]).filter((p) => isNum(p[1]))
    })).filter((x) => x.points.length);
    if (!posSeries.length && Array.isArray(run.position_loss))
      posSeries.push({ name: 'final', color: '#0f172a', points: run.position_loss.map((v, t) => [t, v]).filter((p) => isNum(p[1])) });
    const posSvg = posSeries.length ? lineChart({ series: posSeries, xLabel: 'position', tipFmt: (v) => v.toFixed(4) }) : null;
    charts.append(chartBox('Loss by position', posSvg, 'position-loss.svg', false,
      'Mean loss at each position with a target' + (isNum(run.icl_score) ? '; in-context-learning score now ' + signed(run.icl_score) + ' nats (late minus early positions).' : '.')));
    const icl = seriesOf('icl_score');
    const iclSvg = icl.length ? lineChart({ series: [{ name: 'ICL score', color: '#7c3aed', points: icl }], hlines: [{ y: 0, label: '0' }], tipFmt: (v) => v.toFixed(4) }) : null;
    charts.append(chartBox('In-context-learning score', iclSvg, 'icl-score.svg', false,
      'Loss over the last quarter of the target positions minus over the first quarter: negative when later tokens are predicted better.'));

    // Scores at the positions the task needs, per head, with the loss drop as one event.
    const series = [], marks = [], events = [];
    const keys = [['task_induction', 'induction at targets', '#9333ea'], ['task_previous_token', 'previous-token at sources', '#2563eb']];
    const dashes = [null, '7 4', '2 3', '9 3 2 3'];
    heads.forEach((hd, i) => {
      const name = headName(hd.layer, hd.head), x = extra[i];
      keys.forEach(([key, label, color]) => {
        const pts = [];
        for (const line of logLines) {
          const r = line && line.heads && line.heads[name];
          if (r && isNum(line.step) && isNum(r[key])) pts.push([line.step, r[key]]);
        }
        if (!pts.length || Math.max(...pts.map((p) => p[1])) < 0.2) return;
        series.push({ name: name + ' ' + label, color, dash: dashes[i % 4], points: pts });
        const step = x.task_emerged && x.task_emerged[key];
        if (isNum(step)) {
          const p = pts.find((q) => q[0] === step);
          if (p) marks.push({ x: p[0], y: p[1], color });
          events.push(name + ' ' + label + ' at step ' + step);
        }
      });
    });
    const th = opt.score_threshold;
    const taskSvg = series.length ? lineChart({ series, width: 1200, height: 300, yMin: 0, yMax: 1, marks, hlines: [{ y: th, label: 'threshold ' + th.toFixed(2) }], tipFmt: (v) => v.toFixed(3) }) : null;
    const drop = isNum(D.loss_drop_step) ? 'Loss drop (eval loss first halfway from its first value to its lowest) at step ' + D.loss_drop_step : 'No loss drop in the history';
    charts.append(chartBox('Task-position scores over training', taskSvg, 'task-scores.svg', true,
      drop + (events.length ? '. Emerged (stays ≥ ' + th.toFixed(2) + '): ' + events.join(' · ') + '.' : '.')));
    const card = section('Behaviour over training', 'How the loss depends on the position and when the heads the task needs appeared: a phase change shows as the loss drop and the emergence at about the same step.', charts);
    card.id = 'behaviour';
    return card;
  }

  // --- interventions: ablating sets of heads, patching, direct logit attribution ---
  function interventionSection() {
    const sets = run.set_ablations || [], p = run.patching;
    const kids = [];
    if (sets.length) {
      kids.push(el('ul', { class: 'sets' }, ...sets.map((x) => el('li', {},
        el('b', { text: x.heads.join(' + ') }), ' (' + x.role + '): ablated together, Δ loss ' + signed(x.delta_loss) + ' nats, Δ accuracy ' + pts(x.delta_accuracy) + ' pts'))));
    }
    const cols = ['head', 'label', 'direct logit', 'Δ loss zero', 'Δ loss mean', 'Δ loss resample', 'patching restores'];
    const body = el('tbody', {}, ...heads.map((hd) => el('tr', {},
      el('td', { class: 'mono', text: headName(hd.layer, hd.head) }), el('td', {}, chip(hd.label)),
      el('td', { class: 'num', text: signed(hd.direct_logit) }), el('td', { class: 'num', text: signed(hd.ablation_delta_loss) }),
      el('td', { class: 'num', text: signed(hd.mean_ablation_delta_loss) }), el('td', { class: 'num', text: signed(hd.resample_ablation_delta_loss) }),
      el('td', { class: 'num', text: isNum(hd.patch_restored) ? (100 * hd.patch_restored).toFixed(1) + '%' : '–' }))));
    kids.push(el('div', { class: 'table-wrap' }, el('table', { class: 'heads patching' },
      el('thead', {}, el('tr', {}, ...cols.map((c) => el('th', { text: c })))), body)));
    const about = p
      ? 'Corrupted run: ' + p.corruption + ' Clean loss ' + fmt(p.clean_loss, 4) + ', corrupted ' + fmt(p.corrupted_loss, 4) +
        '; a head’s patching share is how much of that gap putting back its clean output closes.'
      : 'Mean and resample ablation and activation patching: run headlab analyze RUN --patch.';
    // Which rows the resample and patching columns are over, when not all of them.
    const r = run.resample;
    const covered = (r && r.with_donor < r.rows
      ? ' Resample ablation: ' + r.with_donor + ' of ' + r.rows + ' sequences have a donor (a later sequence, cyclically, ' +
        (run.causal ? 'at least as long' : 'as long') + '); its column is over ' + (r.with_donor ? 'those alone.' : 'none: it is empty.')
      : '') +
      (p && p.rows && p.corrupted_rows < p.rows
        ? ' The corruption changed ' + p.corrupted_rows + ' of ' + p.rows + ' sequences; the others keep their tokens and add nothing to the gap.'
        : '');
    const card = section('Interventions', 'Heads ablated together (a role or a circuit), direct logit attribution on the correct class, and what each head’s output restores when patched from the clean run into a corrupted one. ' + about + covered, ...kids);
    card.id = 'interventions';
    return card;
  }

  // --- large view of one head ---
  let modal = null;
  // The open head is in the address (#L0H1), so a view can be linked or reloaded.
  function setHash(hash) { try { window.history.replaceState(null, '', hash || location.pathname + location.search); } catch (e) { /* some viewers forbid it */ } }
  function closeModal() { if (modal) { modal.remove(); modal = null; hideTip(); setHash(''); } }
  function openModal(i) {
    closeModal();
    i = (i + heads.length) % heads.length;
    const hd = heads[i], l = hd.layer, h = hd.head, n = Math.min(N, T);
    const cell = clamp(Math.floor(700 / (n + 4)), 8, 44);
    const svg = heatmap(l, h, cell, true);
    svg.style.maxHeight = '74vh';
    const bars = el('div', { class: 'bars' });
    for (const [key, label] of PATTERNS) {
      const v = hd.scores[key];
      bars.append(el('div', { class: 'b' }, el('span', { text: label }),
        el('div', { class: 'track' }, el('div', { class: 'fill', style: 'width:' + (isNum(v) ? clamp(v, 0, 1) * 100 : 0) + '%;background:' + colorOf(label) })),
        el('span', { class: 'num', text: fmt(v) })));
    }
    const fact = (k, v) => [el('dt', { text: k }), el('dd', { text: v })];
    const facts = el('dl', { class: 'facts' },
      ...fact('entropy', fmt(hd.scores.entropy, 3)), ...fact('distance', fmt(hd.scores.distance, 2) + ' positions'),
      ...fact('ablation Δ loss', signed(hd.ablation_delta_loss)), ...fact('ablation Δ accuracy', isNum(hd.ablation_delta_accuracy) ? pts(hd.ablation_delta_accuracy) + ' pts' : '–'),
      ...fact('importance', importanceText(hd)),
      ...fact('copying score', fmt(hd.copying)),
      ...fact('emerged', isNum(extra[i].emerged) ? 'step ' + extra[i].emerged : '–'));
    modal = el('div', { class: 'modal', onclick: (e) => { if (e.target === modal) closeModal(); } },
      el('div', { class: 'panel', role: 'dialog', 'aria-modal': 'true', 'aria-label': headName(l, h) },
        el('div', { class: 'title' }, el('span', { class: 'hname', text: headName(l, h) }), chip(hd.label),
          el('div', { class: 'btns' },
            el('button', { class: 'btn', type: 'button', text: '← previous', onclick: () => openModal(i - 1) }),
            el('button', { class: 'btn', type: 'button', text: 'next →', onclick: () => openModal(i + 1) }),
            saveButton(() => svg, headName(l, h) + '-attention.svg'),
            el('button', { class: 'btn', type: 'button', text: 'close ✕', onclick: closeModal }))),
        el('div', { style: 'min-width:0;display:flex;justify-content:center' }, svg),
        el('div', {}, el('div', { class: 'muted', text: 'pattern scores' }), bars, facts,
          el('p', { class: 'muted', style: 'font-size:12px;margin-top:14px', text: 'Rows are queries, columns keys; each row sums to 1. Arrow keys: previous / next head; Esc: close.' }))));
    document.body.append(modal);
    setHash('#' + headName(l, h));
  }
  document.addEventListener('keydown', (e) => {
    if (!modal) return;
    const i = heads.findIndex((hd) => modal.querySelector('.panel').getAttribute('aria-label') === headName(hd.layer, hd.head));
    if (e.key === 'Escape') closeModal();
    else if (e.key === 'ArrowRight') openModal(i + 1);
    else if (e.key === 'ArrowLeft') openModal(i - 1);
  });

  app.append(header(), verdict(), gridSection(), curvesSection(), circuitSection() || '', behaviourSection(), jsSection(), tableSection(), interventionSection(), defsSection(),
    footer());
  const linked = /^#L(\d+)H(\d+)$/.exec(location.hash);
  if (linked && +linked[1] < L && +linked[2] < H) openModal(+linked[1] * H + +linked[2]);
})();

// report.html's "Attention over training": a slider over the run's snapshots
// (--snapshot-every) that steps every head's map of the example through
// training, ending at the final analysis. Runs after report.js; draws nothing
// when the run kept no snapshots.
(function () {
  'use strict';
  const { D, FONT, el, sv, clamp, chip, section } = headlab;
  const snaps = D.snapshots || [];
  const app = document.getElementById('app');
  if (!snaps.length || !app) return;
  const run = D.run, L = run.layers, H = run.heads_per_layer;
  const frames = snaps.map((s) => ({ step: s.step, attention: s.attention, labels: s.labels }));
  const finalStep = (D.history || []).reduce((m, line) => (line && typeof line.step === 'number' ? Math.max(m, line.step) : m), -1);
  frames.push({ step: finalStep >= 0 ? finalStep : null, attention: run.example.attention,
    labels: run.heads.map((hd) => hd.label), final: true });

  // White to deep blue, linear in probability (the grid's ramp, coarser).
  const shade = (p) => {
    const t = clamp(typeof p === 'number' ? p : 0, 0, 1);
    const c = [255 - 245 * t, 255 - 208 * t, 255 - 148 * t].map(Math.round);
    return 'rgb(' + c.join(',') + ')';
  };
  function map(A, cell) {
    const n = A.length, W = n * cell + 2;
    const svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + W, width: W, height: W, 'font-family': FONT, role: 'img' });
    for (let q = 0; q < n; ++q)
      for (let k = 0; k < A[q].length; ++k)
        svg.append(sv('rect', { x: 1 + k * cell, y: 1 + q * cell, width: cell, height: cell, fill: shade(A[q][k]) },
          sv('title', { text: 'query ' + q + ', key ' + k + ': ' + (+A[q][k]).toFixed(3) })));
    return svg;
  }

  const grid = el('div', { class: 'snapshot-grid', style: 'display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:12px' });
  const label = el('span', { class: 'snapshot-step' });
  const slider = el('input', { type: 'range', min: 0, max: frames.length - 1, step: 1, value: frames.length - 1,
    'aria-label': 'training step' });
  function show(i) {
    const f = frames[i];
    label.textContent = (f.step === null ? 'final' : 'step ' + f.step) + (f.final ? ' (final analysis)' : ' (snapshot)');
    grid.replaceChildren();
    const n = f.attention.length ? f.attention[0][0].length : 0;
    const cell = clamp(Math.floor(220 / Math.max(1, n)), 4, 28);
    for (let l = 0; l < L; ++l)
      for (let h = 0; h < H; ++h)
        grid.append(el('div', { class: 'head-card' },
          el('div', { class: 'head-top' }, el('span', { class: 'hname', text: 'L' + l + 'H' + h }), chip(f.labels[l * H + h])),
          map(f.attention[l][h], cell)));
  }
  slider.addEventListener('input', () => show(+slider.value));
  show(frames.length - 1);
  const card = section('Attention over training',
    'Each head’s map of the same example at every kept snapshot (--snapshot-every), and at the end. Drag the slider, or focus it and use the arrow keys.',
    el('div', { class: 'snapshot-controls', style: 'display:flex;gap:12px;align-items:center;margin:8px 0 12px' }, slider, label), grid);
  card.id = 'snapshots';
  // Right after the grid of the final maps.
  const after = Array.from(app.querySelectorAll('section.card')).find((s) => s.querySelector('h2') &&
    s.querySelector('h2').textContent === 'Attention on one example');
  if (after) after.after(card);
  else app.append(card);
})();

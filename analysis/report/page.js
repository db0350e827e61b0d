// What report.html and sweep.html share, loaded before the page's own script
// as one global, `headlab`: building the DOM (text only ever through text
// nodes), number formats, the tooltip, saving a chart as SVG, axis ticks, the
// label colours and the card of a section.
const headlab = (function () {
  'use strict';
  const D = JSON.parse(document.getElementById('headlab-data').textContent);
  // The SVG namespace, taken from the parser rather than spelled out.
  const SVGNS = (() => { const d = document.createElement('div'); d.innerHTML = '<svg></svg>'; return d.firstChild.namespaceURI; })();
  const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Liberation Sans", Arial, sans-serif';
  const MONO = 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace';

  // The patterns come from the C++ pattern table (analysis/patterns.h), in its order.
  const PATTERNS = D.patterns.map((p) => [p.key, p.name, p.short_name]);
  const LABEL_COLOR = Object.assign({ 'sink': '#a16207', 'diffuse': '#94a3b8', 'mixed': '#64748b' },
    Object.fromEntries(D.patterns.map((p) => [p.name, p.colour])));

  // --- DOM helpers: text goes through text nodes only ---
  function el(tag, attrs, ...kids) { return build(document.createElement(tag), attrs, kids); }
  function sv(tag, attrs, ...kids) { return build(document.createElementNS(SVGNS, tag), attrs, kids); }
  function build(e, attrs, kids) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') e.textContent = String(v);
      else if (k === 'class') e.setAttribute('class', v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) e.append(c);
    return e;
  }
  const isNum = (v) => typeof v === 'number' && isFinite(v);
  // `d` decimals rounded as the text report rounds them (printf's "%.*f",
  // analysis/fixed.h): the exact value, a tie to the even digit. toFixed
  // breaks ties upwards, so -56.25 would be -56.3 here and -56.2 there.
  function fixed(v, d) {
    const up = v.toFixed(d);
    if (Math.abs(v) >= 1e21) return up;
    const exact = Math.abs(v).toFixed(100);  // every digit of a double >= 1e-80
    const point = exact.indexOf('.');
    if (!/^50*$/.test(exact.slice(point + 1 + d))) return up;
    const kept = exact.slice(0, point + 1 + d).replace(/\.$/, '');
    return +kept.slice(-1) % 2 === 0 ? (v < 0 ? '-' : '') + kept : up;
  }
  const fmt = (v, d = 2) => (isNum(v) ? fixed(v, d) : '–');
  const clamp = (x, a, b) => Math.max(a, Math.min(b, x));
  const colorOf = (label) => LABEL_COLOR[label] || '#64748b';
  const chip = (label) => el('span', { class: 'chip', style: 'background:' + colorOf(label), text: label });

  // --- tooltip ---
  const tip = el('div', { class: 'tip', role: 'status' });
  document.body.append(tip);
  function showTip(ev, title, lines) {
    tip.replaceChildren(el('b', { text: title }), ...lines.map((l) => '\n' + l));
    tip.style.display = 'block';
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + w > window.innerWidth - 8) x = ev.clientX - w - 14;
    if (y + h > window.innerHeight - 8) y = ev.clientY - h - 14;
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  const hideTip = () => { tip.style.display = 'none'; };

  // --- export ---
  function saveSvg(svg, name) {
    const clone = svg.cloneNode(true);
    const text = new XMLSerializer().serializeToString(clone);
    const a = el('a', { download: name, href: URL.createObjectURL(new Blob([text], { type: 'image/svg+xml' })) });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 0);
  }
  const saveButton = (getSvg, name) => el('button', { class: 'btn', type: 'button', text: 'Save SVG', title: 'Download this chart as an SVG file',
    onclick: (e) => { e.stopPropagation(); saveSvg(getSvg(), name); } });

  // --- nice axis ticks ---
  function ticks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }
  // 1, 2, 5 per decade; at most `most` of them (labels that would overlap):
  // powers of ten only, then every k-th decade.
  function logTicks(lo, hi, most) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); ++e)
      for (const m of [1, 2, 5]) { const v = m * Math.pow(10, e); if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v); }
    if (!(most > 0) || out.length <= most) return out;
    const powers = out.filter((v) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9);
    const k = Math.ceil(powers.length / Math.max(1, most));
    return powers.filter((v) => Math.round(Math.log10(v)) % k === 0);
  }
  const fmtTick = (v) => (Math.abs(v) >= 1000 ? (v / 1000).toFixed(v % 1000 ? 1 : 0) + 'k' : String(+v.toPrecision(4)));

  const section = (title, sub, ...kids) => el('section', { class: 'card' }, el('h2', { text: title }), sub ? el('p', { class: 'sub', text: sub }) : null, ...kids);
  const footer = () => el('footer', { text: 'Generated by headlab · one self-contained file: no network, no external fonts or scripts.' });

  return { D, FONT, MONO, PATTERNS, LABEL_COLOR, el, sv, isNum, fixed, fmt, clamp, colorOf, chip, showTip, hideTip, saveButton,
    ticks, logTicks, fmtTick, section, footer };
})();

// sweep.html's script: the sweep.json of `headlab sweep` (D.sweep) drawn as
// rates with Wilson 95% intervals per configuration (a head count, or a cell
// of a grid) and per value of each varied flag (specialized, found the task's
// expected roles, reached the target accuracy), the head labels per
// configuration, emergence steps, final losses and a table linking every
// run's report.html. The shared helpers are page.js's.
(function () {
  'use strict';
  const { D, FONT, el, sv, isNum, fmt, clamp, colorOf, chip, showTip, hideTip, saveButton, ticks, logTicks, fmtTick,
    section, footer } = headlab;
  const S = D.sweep, configs = S.configs || [], runs = S.runs || [], config = S.config || {};
  const steps = isNum(config.steps) ? config.steps : null;
  const GOOD = '#15803d', TARGET = '#2563eb', ROLES = '#c2410c', OTHER = '#94a3b8';
  const pct = (v) => (isNum(v) ? (100 * v).toFixed(0) + '%' : '–');
  const ciText = (ci) => (Array.isArray(ci) && ci.length === 2 ? '[' + pct(ci[0]) + ', ' + pct(ci[1]) + ']' : '–');
  const flags = Array.isArray(S.flags) ? S.flags : [];
  // A sweep.json from before the expected roles' rate has none of its keys:
  // its page leaves the rate out rather than show 0%.
  const hasRoles = configs.some((c) => c && 'runs_expecting_roles' in c) || runs.some((r) => r && 'roles_found' in r);
  // The rate of the expected roles is n/a where no finished run expected any.
  const rolesNA = (c) => !(isNum(c.runs_expecting_roles) && c.runs_expecting_roles > 0);
  // A setting's value as a name: a switch is on or off (--attn-only true,false).
  const valueText = (v) => (typeof v === 'boolean' ? (v ? 'on' : 'off') : typeof v === 'object' ? JSON.stringify(v) : String(v));
  // A grid names its configurations ("layers 2, lr 0.001, h2"); a sweep of head counts only, by its heads.
  const grid = configs.some((c) => c.settings && typeof c.settings === 'object' && Object.keys(c.settings).length > 0);
  const cname = (c) => (grid && typeof c.name === 'string' ? c.name : c.heads + ' head' + (c.heads === 1 ? '' : 's'));
  const runsOf = (c) => runs.filter((r) => (grid ? r.config === c.name : r.heads === c.heads));
  // The left margin of a chart whose rows are named `names`.
  const margin = (names) => clamp(14 + 6.5 * Math.max(8, ...names.map((n) => String(n).length)), 74, 320);
  const done = (r) => r.status === 'done';
  const median = (xs) => {
    if (!xs.length) return null;
    const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  };
  // Only the sweep's own folder names become links: "h2-s4".
  const runLink = (r, text) => (/^[A-Za-z0-9._-]+$/.test(String(r.dir)) && r.dir !== '.' && r.dir !== '..'
    ? el('a', { href: r.dir + '/report.html', text }) : el('span', { text }));

  function header() {
    const kv = (k, v) => el('span', { class: 'kv' }, k + ' ', el('b', { text: String(v) }));
    return el('header', {},
      el('div', { class: 'brand', text: 'headlab · sweep' }),
      el('h1', { text: D.title }),
      // A --data sweep's runs train on its file, not on a task ("task": "data");
      // a --task list's tasks are the grid's chip.
      el('div', { class: 'chips' }, config.data ? kv('data', config.data) : S.grid && S.grid.task ? null : kv('task', S.task),
        kv('runs', runs.length + ' of ' + S.planned_runs),
        ...Object.entries(S.grid && typeof S.grid === 'object' ? S.grid : {}).map(([f, vs]) =>
          kv(f, Array.isArray(vs) ? vs.map(valueText).join(', ') : '')),
        kv('head counts', (S.heads || []).join(', ')), kv('seeds', (S.seeds || []).length),
        steps !== null ? kv('steps', steps) : null, kv('target accuracy', pct(S.target_accuracy)),
        isNum(S.seconds) ? kv('time', S.seconds.toFixed(1) + ' s') : null,
        S.interrupted ? el('span', { class: 'kv bad-kv', text: 'stopped by a signal' }) : null));
  }

  // One row per configuration (rows: configs or a flag's values, named by
  // nameOf): the rate as a dot, its Wilson interval as a bar.
  function intervalChart(rows, nameOf, label) {
    // [name, share key, interval key, colour, count key, denominator key]
    const series = [['specialized', 'specialized_share', 'specialized_ci', GOOD, 'specialized', 'runs'],
      ...(hasRoles ? [['roles found', 'roles_found_share', 'roles_found_ci', ROLES, 'roles_found', 'runs_expecting_roles']] : []),
      ['reached target', 'reached_target_share', 'reached_target_ci', TARGET, 'reached_target', 'runs']];
    const rowH = 6 + 14 * series.length, m = { l: margin(rows.map(nameOf)), r: 20, t: 24, b: 30 }, W = 1100, Ht = m.t + m.b + rowH * rows.length;
    const x = (v) => m.l + clamp(v, 0, 1) * (W - m.l - m.r);
    const svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + Ht, width: W, height: Ht, 'font-family': FONT, 'font-size': 11,
      role: 'img', 'aria-label': label });
    for (const t of ticks(0, 1, 5)) {
      svg.append(sv('line', { x1: x(t), x2: x(t), y1: m.t, y2: Ht - m.b, stroke: '#e2e8f0' }),
        sv('text', { x: x(t), y: Ht - m.b + 16, 'text-anchor': 'middle', fill: '#64748b', text: (100 * t).toFixed(0) + '%' }));
    }
    series.forEach(([name, , , color], i) => {
      svg.append(sv('circle', { cx: m.l + 8 + i * 130, cy: 10, r: 4, fill: color }),
        sv('text', { x: m.l + 16 + i * 130, y: 14, fill: '#334155', text: name }));
    });
    rows.forEach((c, row) => {
      const y0 = m.t + row * rowH;
      svg.append(sv('text', { x: m.l - 10, y: y0 + rowH / 2 + 4, 'text-anchor': 'end', fill: '#334155', 'font-weight': 600,
        text: nameOf(c) }));
      series.forEach(([name, share, ci, color, countKey, ofKey], i) => {
        const y = y0 + 10 + i * 14;
        // No rate to draw: no finished run (every share null), or no run that expected roles.
        const na = c.runs === 0 || !isNum(c[share]) && ofKey !== 'runs_expecting_roles' ? name + ': none finished'
          : ofKey === 'runs_expecting_roles' && rolesNA(c) ? 'roles found: n/a (no run expected roles)' : null;
        if (na !== null) {
          svg.append(sv('text', { class: 'na', x: m.l + 4, y: y + 4, fill: '#64748b', 'data-config': nameOf(c), 'data-series': name,
            text: na }));
          return;
        }
        const [lo, hi] = Array.isArray(c[ci]) ? c[ci] : [0, 1];
        const g = sv('g', { class: 'ci', 'data-config': nameOf(c), 'data-series': name });
        g.append(sv('line', { x1: x(lo), x2: x(hi), y1: y, y2: y, stroke: color, 'stroke-width': 3, 'stroke-linecap': 'round', opacity: 0.45 }),
          sv('circle', { cx: x(c[share]), cy: y, r: 5, fill: color }),
          sv('rect', { x: m.l, y: y - 7, width: W - m.l - m.r, height: 14, fill: 'transparent' }));
        g.addEventListener('mousemove', (ev) => showTip(ev, nameOf(c) + ' · ' + name,
          [c[countKey] + ' of ' + c[ofKey] + ' runs = ' + pct(c[share]), 'Wilson 95% interval ' + ciText(c[ci])]));
        g.addEventListener('mouseleave', hideTip);
        svg.append(g);
      });
    });
    return svg;
  }

  // A rate's cells: "none finished" and a dash where no run finished (a null share).
  const rate = (count, share) => isNum(share) ? count + ' (' + pct(share) + ')' : 'none finished';
  const interval = (ci) => Array.isArray(ci) ? ciText(ci) : '–';

  function ratesSection() {
    const rows = configs.map((c) => el('tr', {},
      el('td', { text: grid ? c.name : c.heads }), el('td', { text: c.runs }), el('td', { text: c.failed + c.interrupted }),
      el('td', { text: rate(c.reached_target, c.reached_target_share) }), el('td', { class: 'ci-cell', text: interval(c.reached_target_ci) }),
      el('td', { class: 'top', text: rate(c.specialized, c.specialized_share) }), el('td', { class: 'ci-cell', text: interval(c.specialized_ci) }),
      ...(hasRoles ? [el('td', { class: 'top', text: rolesNA(c) ? (c.runs === 0 ? 'none finished' : 'n/a') : c.roles_found + ' of ' + c.runs_expecting_roles + ' (' + pct(c.roles_found_share) + ')' }),
        el('td', { class: 'ci-cell', text: rolesNA(c) ? '–' : ciText(c.roles_found_ci) })] : []),
      el('td', { text: c.runs === 0 ? '–' : fmt(c.mean_seconds, 1) })));
    const svg = configs.length ? intervalChart(configs, cname, 'rates with Wilson 95% intervals') : null;
    return section(grid ? 'Rates per configuration' : 'Rates per head count',
      'The share of finished runs whose heads specialized (the verdict of heads.json), ' +
      (hasRoles ? 'that found every role the task expects (heads.json’s roles_found: a run can find its one expected role and not ' +
        'specialize, which wants two distinct roles; n/a when the task expects none), ' : '') +
      'and whose accuracy reached the target, ' +
      'each with its Wilson 95% interval: with this many seeds, the range of true rates the counts are consistent with.',
      el('div', { class: 'table-wrap' }, el('table', { class: 'heads rates' },
        el('thead', {}, el('tr', {}, ...[grid ? 'configuration' : 'heads', 'runs', 'not finished', 'reached ' + pct(S.target_accuracy), '95% CI',
          'specialized', '95% CI', ...(hasRoles ? ['roles found', '95% CI'] : []), 's / run'].map((t) => el('th', { text: t })))),
        el('tbody', {}, ...rows))),
      svg ? el('div', { class: 'chart' }, el('div', { class: 'chart-head' }, el('h3', { text: 'Rates and intervals' }),
        saveButton(() => svg, 'sweep-rates.svg')), svg) : null);
  }

  // One stacked bar per head count: the share of all its heads with each label.
  function labelsSection() {
    const names = configs.length ? Object.keys(configs[0].labels || {}) : [];
    const bars = configs.map((c) => {
      const total = names.reduce((s, n) => s + ((c.labels[n] || {}).heads || 0), 0);
      const parts = names.filter((n) => (c.labels[n] || {}).heads > 0).map((n) => {
        const k = c.labels[n].heads;
        const part = el('div', { class: 'seg', style: 'width:' + (100 * k / total) + '%;background:' + colorOf(n),
          'data-label': n, 'data-heads': k });
        part.addEventListener('mousemove', (ev) => showTip(ev, n, [k + ' of ' + total + ' heads (' + pct(k / total) + ')',
          'mean top score ' + fmt(c.labels[n].score)]));
        part.addEventListener('mouseleave', hideTip);
        return part;
      });
      return el('div', { class: 'stack-row' }, el('div', { class: 'stack-name', text: cname(c) }),
        el('div', { class: 'stack' }, ...(total ? parts : [el('span', { class: 'empty', text: 'no finished runs' })])),
        el('div', { class: 'stack-count', text: total + ' heads' }));
    });
    const used = names.filter((n) => configs.some((c) => (c.labels[n] || {}).heads > 0));
    return section(grid ? 'Head labels per configuration' : 'Head labels per head count',
      'Every head of every finished run, by its final label: a pattern when one score clears the threshold and the margin, ' +
      'otherwise diffuse or mixed; sink for a first-token head whose ablation barely matters.',
      el('div', { class: 'stacks' }, ...bars),
      el('div', { class: 'legend-inline' }, ...used.map((n) => chip(n))));
  }

  // Dots on a horizontal axis, one row per head count; jittered vertically by index.
  // rows: [{name, points: [{x, color, title, lines}]}]
  function stripChart(rows, cfg) {
    const all = rows.flatMap((r) => r.points.map((p) => p.x)).filter(isNum);
    if (!all.length) return null;
    const rowH = 34, m = { l: margin(rows.map((r) => r.name)), r: 20, t: 8, b: 34 }, W = cfg.width || 640, Ht = m.t + m.b + rowH * rows.length;
    const log = cfg.log && Math.min(...all) > 0;
    let x0 = cfg.x0 !== undefined ? cfg.x0 : Math.min(...all), x1 = cfg.x1 !== undefined ? cfg.x1 : Math.max(...all);
    if (log) { x0 = Math.min(...all) / 1.5; x1 = Math.max(...all) * 1.5; }
    if (!(x1 > x0)) x1 = x0 + 1;
    const f = log ? Math.log10 : (v) => v;
    const x = (v) => m.l + (f(v) - f(x0)) / (f(x1) - f(x0)) * (W - m.l - m.r);
    const svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + Ht, width: W, height: Ht, 'font-family': FONT, 'font-size': 11,
      role: 'img', 'aria-label': cfg.label });
    for (const t of log ? logTicks(x0, x1) : ticks(x0, x1, 6))
      svg.append(sv('line', { x1: x(t), x2: x(t), y1: m.t, y2: Ht - m.b, stroke: '#e2e8f0' }),
        sv('text', { x: x(t), y: Ht - m.b + 14, 'text-anchor': 'middle', fill: '#64748b', text: fmtTick(t) }));
    svg.append(sv('text', { x: (m.l + W - m.r) / 2, y: Ht - 4, 'text-anchor': 'middle', fill: '#64748b', text: cfg.xLabel }));
    rows.forEach((r, row) => {
      const yc = m.t + row * rowH + rowH / 2;
      svg.append(sv('text', { x: m.l - 10, y: yc + 4, 'text-anchor': 'end', fill: '#334155', 'font-weight': 600, text: r.name }));
      r.points.forEach((p, i) => {
        if (!isNum(p.x)) return;
        const dot = sv('circle', { class: 'dot', cx: x(p.x), cy: yc + ((i * 7) % 5 - 2) * 3, r: 4.5, fill: p.color,
          'fill-opacity': 0.8, stroke: '#fff', 'stroke-width': 1 });
        dot.addEventListener('mousemove', (ev) => showTip(ev, p.title, p.lines));
        dot.addEventListener('mouseleave', hideTip);
        svg.append(dot);
      });
    });
    return svg;
  }
  function chartBox(title, svg, file, caption, empty) {
    return el('div', { class: 'chart' },
      el('div', { class: 'chart-head' }, el('h3', { text: title }), svg ? saveButton(() => svg, file) : null),
      svg || el('p', { class: 'empty', text: empty }), caption ? el('div', { class: 'caption', text: caption }) : null);
  }
  const runTitle = (r) => (grid && typeof r.config === 'string' ? r.config : 'h' + r.heads) + ' s' + r.seed;

  function emergenceSection() {
    const runRows = configs.map((c) => ({ name: cname(c),
      points: runsOf(c).filter((r) => done(r) && isNum(r.specialized_step)).map((r) => ({ x: r.specialized_step, color: GOOD,
        title: runTitle(r), lines: ['specialized from step ' + r.specialized_step] })) }));
    const headRows = configs.map((c) => ({ name: cname(c),
      points: runsOf(c).filter(done).flatMap((r) => (r.head_results || []).filter((h) => isNum(h.emerged)).map((h) => ({
        x: h.emerged, color: colorOf(h.label), title: runTitle(r) + ' ' + h.name, lines: [h.label + ' from step ' + h.emerged] }))) }));
    const xr = steps !== null ? { x0: 0, x1: steps } : {};
    const none = 'No run logged a head analysis during training (the runs need --analyze-every N > 0).';
    const medians = configs.map((c) => {
      const st = runsOf(c).filter((r) => done(r) && isNum(r.specialized_step)).map((r) => r.specialized_step);
      const md = median(st);
      return el('li', { text: cname(c) + ': ' + st.length + ' of ' + c.runs +
        ' runs specialized during training' + (md !== null ? ', median step ' + md : '') });
    });
    return section('Emergence',
      'When the division of labour appeared: the first analysed step from which the verdict stayed “specialized” to the end, ' +
      'per run; and per head, the step from which its final label’s pattern score stayed at or above the label threshold.',
      el('ul', { class: 'reasons' }, ...medians),
      el('div', { class: 'charts' },
        chartBox('Runs: specialized from step', stripChart(runRows, Object.assign({ xLabel: 'training step', label: 'specialization steps' }, xr)),
          'sweep-specialization-steps.svg', 'One dot per run that ended specialized.', none),
        chartBox('Heads: pattern emerged at step', stripChart(headRows, Object.assign({ xLabel: 'training step', label: 'emergence steps' }, xr)),
          'sweep-emergence-steps.svg', 'One dot per head with a pattern label, coloured by label.', none)));
  }

  function lossSection() {
    const rows = configs.map((c) => ({ name: cname(c),
      points: runsOf(c).filter(done).map((r) => ({ x: r.loss, color: r.specialized ? GOOD : OTHER, title: runTitle(r),
        lines: ['loss ' + fmt(r.loss, 4), 'accuracy ' + (isNum(r.accuracy) ? (100 * r.accuracy).toFixed(1) + '%' : '–'),
          r.specialized ? 'specialized' : 'not specialized',
          ...(typeof r.roles_found === 'boolean' ? [r.roles_found ? 'expected roles found' : 'expected roles not found'] : [])] })) }));
    return section('Final losses',
      'The evaluation loss of each finished run at its last step (log scale); green dots are runs whose heads specialized.',
      chartBox('Final evaluation loss', stripChart(rows, { log: true, width: 1100, xLabel: 'loss (nats)', label: 'final losses' }),
        'sweep-losses.svg', null, 'No finished runs.'));
  }

  function runsSection() {
    const rows = runs.map((r) => el('tr', { class: 'run-row', 'data-dir': r.dir },
      el('td', {}, done(r) ? runLink(r, runTitle(r)) : el('span', { text: runTitle(r) })),
      el('td', { text: r.status + (r.error ? ': ' + r.error : '') }),
      el('td', { text: isNum(r.accuracy) ? (100 * r.accuracy).toFixed(1) + '%' : '–' }),
      el('td', { text: fmt(r.loss, 4) }),
      el('td', { text: done(r) ? (r.specialized ? 'yes' : 'no') : '–' }),
      ...(hasRoles ? [el('td', { text: !done(r) ? '–' : typeof r.roles_found === 'boolean' ? (r.roles_found ? 'yes' : 'no') : 'n/a' })] : []),
      el('td', { text: isNum(r.specialized_step) ? r.specialized_step : '–' }),
      el('td', { class: 'labels-cell' }, ...(r.head_results || []).map((h) => el('span', { class: 'head-label' },
        el('span', { class: 'hname', text: h.name }), ' ', chip(h.label)))),
      el('td', { text: fmt(r.seconds, 1) })));
    return section('Runs', 'Each run’s folder holds its report.html (linked), heads.json, metrics.jsonl and stdout.log.',
      el('div', { class: 'table-wrap' }, el('table', { class: 'heads runs' },
        el('thead', {}, el('tr', {}, ...['run', 'status', 'accuracy', 'loss', 'specialized', ...(hasRoles ? ['roles found'] : []),
          'from step', 'heads', 's']
          .map((t) => el('th', { text: t, class: t === 'heads' ? 'labels-cell' : null })))),
        el('tbody', {}, ...rows))));
  }

  function configSection() {
    return el('section', { class: 'card' }, el('details', { class: 'config' },
      el('summary', { text: 'The training settings every run shares (config.json; seed, heads' +
        (grid ? ' and the flags of the grid' : '') + ' vary)' }),
      el('pre', { text: JSON.stringify(config, null, 2) })));
  }

  // A chart per varied flag: the rates over all runs with each of its values.
  function flagsSection() {
    if (!flags.length) return null;
    const boxes = flags.filter((f) => f && Array.isArray(f.values) && f.values.length).map((f) => {
      const nameOf = (v) => String(f.flag) + ' ' + valueText(v.value);
      const svg = intervalChart(f.values, nameOf, 'rates per value of ' + f.flag);
      return el('div', { class: 'chart', 'data-flag': String(f.flag) },
        el('div', { class: 'chart-head' }, el('h3', { text: '--' + f.flag }), saveButton(() => svg, 'sweep-' + f.flag + '.svg')),
        svg, el('div', { class: 'caption', text: 'Every finished run with each value of --' + f.flag +
          ', whatever the other flags: ' + f.values.map((v) => nameOf(v) + ' ' + v.runs + ' runs').join(', ') + '.' }));
    });
    return section('Rates per varied flag',
      'For each flag the sweep varies, the share of runs that specialized, ' + (hasRoles ? 'that found the expected roles ' : '') +
      'and that reached the target per value, ' +
      'over every configuration with that value, each with its Wilson 95% interval.', ...boxes);
  }

  const app = document.getElementById('app');
  app.replaceChildren(...[header(), ratesSection(), flagsSection(), labelsSection(), emergenceSection(), lossSection(),
    runsSection(), configSection(), footer()].filter((s) => s !== null));
})();

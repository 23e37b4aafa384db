// Summarises benches/sql/compare.sh's runs: medians per binary (before / after) and worker
// count, printed as a Markdown table; with a second argument, draws tx/s and p99 latency against
// workers as a self-contained SVG (after solid, before dashed).
import { readFileSync, writeFileSync } from 'node:fs';

const [file, plotPath, residents = '0'] = process.argv.slice(2);
const rows = readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((line) => {
  const [label, round, workers, tx, p50, p99, lost, dup] = line.split('\t');
  return { label, round: +round, workers: +workers, tx: +tx, p50: +p50, p99: +p99, lost: +lost, dup: +dup };
});
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const groups = new Map();
for (const r of rows) {
  const key = `${r.label}/${r.workers}`;
  if (!groups.has(key)) groups.set(key, []);
  groups.get(key).push(r);
}
const summary = {};
for (const [key, rs] of groups) {
  summary[key] = {
    tx: median(rs.map((r) => r.tx)),
    txs: rs.map((r) => r.tx),
    p50: median(rs.map((r) => r.p50)),
    p99: median(rs.map((r) => r.p99)),
    lost: rs.reduce((a, r) => a + r.lost, 0),
    dup: rs.reduce((a, r) => a + r.dup, 0),
    runs: rs.length,
  };
}
const workers = [...new Set(rows.map((r) => r.workers))].sort((a, b) => a - b);
const labels = ['before', 'after'].filter((l) => rows.some((r) => r.label === l));
console.log(`durable PostgreSQL, ${residents} hosts resident on the target; medians of ${Math.max(...rows.map((r) => r.round))} rounds`);
console.log('');
console.log('| workers | ' + labels.map((l) => `tx/s ${l} (runs)`).join(' | ') + ' | ' +
  labels.map((l) => `p50 ms ${l}`).join(' | ') + ' | ' + labels.map((l) => `p99 ms ${l}`).join(' | ') + ' | lost | duplicated |');
console.log('|---:|' + labels.map(() => '---:').join('|') + '|' + labels.map(() => '---:').join('|') + '|' +
  labels.map(() => '---:').join('|') + '|---:|---:|');
for (const w of workers) {
  const s = labels.map((l) => summary[`${l}/${w}`]);
  const cell = (f) => s.map((x) => (x ? f(x) : '–')).join(' | ');
  const lost = s.reduce((a, x) => a + (x ? x.lost : 0), 0);
  const dup = s.reduce((a, x) => a + (x ? x.dup : 0), 0);
  console.log(`| ${w} | ${cell((x) => `${Math.round(x.tx)} (${x.txs.map(Math.round).join(', ')})`)} | ${cell((x) => x.p50.toFixed(2))} | ${cell((x) => x.p99.toFixed(2))} | ${lost} | ${dup} |`);
}

if (plotPath) {
  const W = 820, H = 380, panel = 300, top = 50, bottom = 50, left = 70, gap = 90;
  const log2 = Math.log2;
  const xMax = Math.max(...workers);
  const x = (p, w) => +(left + p * (panel + gap) + (log2(w) / Math.max(1, log2(xMax))) * panel).toFixed(1);
  const series = (metric) => labels.map((l) => ({ l, pts: workers.filter((w) => summary[`${l}/${w}`]).map((w) => [w, summary[`${l}/${w}`][metric]]) }));
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${left}" y="22" font-size="14">Durable PostgreSQL handoff transactions against workers: after solid, before dashed</text>`,
  ];
  const colours = { after: '#e76f51', before: '#264653' };
  [['tx', 'committed handoffs per second', 0], ['p99', 'p99 latency (ms)', 1]].forEach(([metric, title, p]) => {
    const vals = series(metric).flatMap((s) => s.pts.map((pt) => pt[1]));
    // A round step (1, 2 or 5 times a power of ten), four of them to the top.
    const raw = Math.max(...vals) / 4;
    const pow = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 5, 10].map((m) => m * pow).find((v) => v >= raw);
    const yMax = step * 4;
    const y = (v) => +(H - bottom - (v / yMax) * (H - top - bottom)).toFixed(1);
    const x0 = left + p * (panel + gap);
    out.push(`<text x="${x0}" y="${top - 10}">${title}</text>`);
    for (let k = 0; k <= 4; k++) {
      const v = (yMax * k) / 4;
      out.push(`<line x1="${x0}" x2="${x0 + panel}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
        `<text x="${x0 - 6}" y="${y(v) + 4}" text-anchor="end">${Math.round(v)}</text>`);
    }
    for (const w of workers) {
      out.push(`<text x="${x(p, w)}" y="${H - bottom + 18}" text-anchor="middle">${w}</text>`);
    }
    out.push(`<text x="${x0 + panel / 2}" y="${H - 12}" text-anchor="middle">workers (log scale)</text>`);
    for (const s of series(metric)) {
      const d = s.pts.map(([w, v], i) => `${i ? 'L' : 'M'}${x(p, w)},${y(v)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${colours[s.l]}" stroke-width="2"${s.l === 'before' ? ' stroke-dasharray="6 4"' : ''}/>`);
      for (const [w, v] of s.pts) {
        out.push(`<circle cx="${x(p, w)}" cy="${y(v)}" r="3" fill="${colours[s.l]}"/>`,
          `<text x="${x(p, w) + 5}" y="${y(v) - 6}" font-size="10">${Math.round(v)}</text>`);
      }
    }
  });
  labels.forEach((l, k) => {
    out.push(`<line x1="${left + 20}" x2="${left + 50}" y1="${top + 10 + k * 18}" y2="${top + 10 + k * 18}" stroke="${colours[l]}" stroke-width="2"${l === 'before' ? ' stroke-dasharray="6 4"' : ''}/>`,
      `<text x="${left + 55}" y="${top + 14 + k * 18}">${l}</text>`);
  });
  out.push('</svg>');
  writeFileSync(plotPath, out.join('\n') + '\n');
  console.log(`\nwrote ${plotPath}`);
}

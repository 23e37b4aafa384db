// Draws tick cost against the number of candidates, log-log, as a self-contained SVG: one
// colour per path, the core solid, the JavaScript port dashed. Used by compare.mjs.

const W = 720;
const H = 460;
const M = { left: 70, right: 200, top: 40, bottom: 50 };
const COLOURS = { no_switch: '#2a9d8f', clean_switch: '#e76f51', exemption: '#264653' };

const log10 = Math.log10;

function ticks(lo, hi) {
  const out = [];
  for (let e = Math.floor(log10(lo)); e <= Math.ceil(log10(hi)); e++) out.push(10 ** e);
  return out;
}

const label = (ns) =>
  ns >= 1e6 ? `${ns / 1e6} ms` : ns >= 1e3 ? `${ns / 1e3} µs` : `${ns} ns`;

export function plot(summary, paths, sizes) {
  const values = Object.values(summary).flatMap((r) => [r.core_ns, r.js_ns]);
  const yLo = 10 ** Math.floor(log10(Math.min(...values)));
  const yHi = 10 ** Math.ceil(log10(Math.max(...values)));
  const xLo = 2;
  const xHi = 8192;
  const x = (n) => +(M.left + ((log10(n) - log10(xLo)) / (log10(xHi) - log10(xLo))) * (W - M.left - M.right)).toFixed(1);
  const y = (ns) => +(H - M.bottom - ((log10(ns) - log10(yLo)) / (log10(yHi) - log10(yLo))) * (H - M.top - M.bottom)).toFixed(1);
  const parts = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${M.left}" y="22" font-size="14">Failover tick cost against candidates (log-log): core solid, JS port dashed</text>`,
  );
  for (const t of ticks(yLo, yHi)) {
    parts.push(
      `<line x1="${M.left}" x2="${W - M.right}" y1="${y(t)}" y2="${y(t)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${y(t) + 4}" text-anchor="end">${label(t)}</text>`,
    );
  }
  for (const n of sizes) {
    parts.push(
      `<line x1="${x(n)}" x2="${x(n)}" y1="${M.top}" y2="${H - M.bottom}" stroke="#ddd"/>`,
      `<text x="${x(n)}" y="${H - M.bottom + 16}" text-anchor="middle">${n}</text>`,
    );
  }
  parts.push(
    `<text x="${(M.left + W - M.right) / 2}" y="${H - 12}" text-anchor="middle">candidates (about half of them cooling)</text>`,
    `<rect x="${M.left}" y="${M.top}" width="${W - M.left - M.right}" height="${H - M.top - M.bottom}" fill="none" stroke="#444"/>`,
  );
  let legendY = M.top + 10;
  for (const [path, name] of paths) {
    for (const side of ['core', 'js']) {
      const points = sizes.map((n) => `${x(n).toFixed(1)},${y(summary[`${path}/${n}`][`${side}_ns`]).toFixed(1)}`);
      const dash = side === 'js' ? ' stroke-dasharray="6 4"' : '';
      parts.push(
        `<polyline points="${points.join(' ')}" fill="none" stroke="${COLOURS[path]}" stroke-width="2"${dash}/>`,
      );
      for (const p of points) {
        const [px, py] = p.split(',');
        parts.push(`<circle cx="${px}" cy="${py}" r="3" fill="${COLOURS[path]}"/>`);
      }
      const lx = W - M.right + 12;
      parts.push(
        `<line x1="${lx}" x2="${lx + 28}" y1="${legendY}" y2="${legendY}" stroke="${COLOURS[path]}" stroke-width="2"${dash}/>`,
        `<text x="${lx + 34}" y="${legendY + 4}">${name}, ${side === 'js' ? 'JS port' : 'core'}</text>`,
      );
      legendY += 20;
    }
  }
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

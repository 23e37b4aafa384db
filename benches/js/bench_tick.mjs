// The tick of the JavaScript port (seed_supervisor.mjs) on the fixture shape of the criterion
// `tick` bench (benches/src/lib.rs `tick_fixture`): n candidates, about half of them cooling;
// paths: nothing to do (healthy), a clean switch, the one-hop exemption (everything cooling).
//
// Prints one JSON object: { "<path>/<n>": median ns per tick, ... } plus the samples.
//
//   node --expose-gc benches/js/bench_tick.mjs [--sizes 3,16,256,4096] [--samples 21] [--sample-ms 40]

import { RelayFailoverSupervisor, relayFailoverThresholds } from './seed_supervisor.mjs';

function arg(name, fallback) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : fallback;
}
const SIZES = arg('--sizes', '3,16,256,4096').split(',').map(Number);
const SAMPLES = Number(arg('--samples', '21'));
const SAMPLE_MS = Number(arg('--sample-ms', '40'));

function urls(n) {
  const list = [];
  for (let i = 0; i < n; i++) list.push(`wss://relay-${String(i).padStart(5, '0')}.example/dshs-relay`);
  return list;
}

// Takes the outputs one by one, in order, as the core's `poll_output` loop does. (Not
// `outputs.length = 0`: on V8 that costs about 20 ns even on an empty array, which would
// inflate the JavaScript figures.)
function drain(sup) {
  const outputs = sup.outputs;
  let n = 0;
  while (outputs.length > 0) {
    outputs.shift();
    n += 1;
  }
  return n;
}

// The same inputs as `tick_fixture` in benches/src/lib.rs, as the seed takes them (no chain
// continuation within one tick: each failed open is followed by the next tick).
function fixture(n) {
  const list = urls(n);
  const sup = new RelayFailoverSupervisor(relayFailoverThresholds({}));
  sup.directory(list, 'signed', 0);
  sup.openSucceeded(list[0], 0);
  drain(sup);
  // The first half of the candidates fail to open; the chain then lands in the middle.
  let now = 1000;
  sup.channelState(list[0], 'backoff', 3, now);
  const middle = Math.floor(n / 2);
  for (;;) {
    sup.tick(now);
    const op = sup.opening;
    if (op === null) throw new Error('the chain stopped before the middle');
    const index = list.indexOf(op.url);
    if (index < middle) {
      sup.openFailed(op.url, now);
    } else {
      sup.openSucceeded(op.url, now);
      break;
    }
  }
  drain(sup);
  now += 2000;
  const current = sup.current.url;
  sup.channelState(current, 'healthy', 0, now);
  const healthy = sup.clone();

  const cleanSwitch = sup.clone();
  cleanSwitch.channelState(current, 'backoff', 3, now);

  // Every remaining candidate fails too: now all of them cool (none exempted yet).
  const exemption = cleanSwitch.clone();
  const clean = (s) =>
    list.some((u) => u !== current && !(s.cooling.has(u) && s.cooling.get(u).untilMs > now));
  while (clean(exemption)) {
    exemption.tick(now);
    exemption.openFailed(exemption.opening.url, now);
  }
  drain(exemption);
  return { now: now + 2000, healthy, cleanSwitch, exemption };
}

const hr = () => process.hrtime.bigint();
// Run with --expose-gc (compare.sh does); without it, the switching figures include the cost of
// moving the freshly built clones out of the young generation.
const collect = typeof globalThis.gc === 'function' ? globalThis.gc : () => {};

// Nothing to do: the same long-lived machine every tick.
function sampleHealthy(f, iters) {
  const sup = f.healthy;
  let outputs = 0;
  const start = hr();
  for (let i = 0; i < iters; i++) {
    sup.tick(f.now);
    outputs += drain(sup);
  }
  const ns = Number(hr() - start) / iters;
  if (outputs !== 0) throw new Error('a healthy tick decided something');
  return ns;
}

// A switching path: a fresh clone per tick, cloned before the clock starts (as criterion's
// `iter_batched_ref`).
function sampleSwitch(f, start, batch, exempt) {
  const machines = [];
  for (let i = 0; i < batch; i++) machines.push(start.clone());
  // The machines are collected into the old generation first, so a young-generation collection
  // in the timed loop does not copy them (criterion's clones sit still in the heap too).
  collect();
  let outputs = 0;
  const t0 = hr();
  for (let i = 0; i < batch; i++) {
    const sup = machines[i];
    sup.tick(f.now);
    outputs += drain(sup);
  }
  const ns = Number(hr() - t0) / batch;
  if (outputs !== batch) throw new Error('every switching tick queues one open');
  const op = machines[0].opening;
  if (op === null || (op.exemption !== null) !== exempt) throw new Error('wrong path');
  return ns;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// Sizes a sample to about SAMPLE_MS of ticks, warms up, then takes SAMPLES samples.
function measure(run) {
  let iters = 1;
  for (;;) {
    const ns = run(iters);
    if (ns * iters >= SAMPLE_MS * 1e6 || iters >= 1 << 26) break;
    iters = Math.max(iters * 2, Math.ceil((SAMPLE_MS * 1e6) / Math.max(ns, 0.1)));
    iters = Math.min(iters, 1 << 26);
  }
  for (let i = 0; i < 3; i++) run(iters); // warm-up at the final size
  const samples = [];
  for (let i = 0; i < SAMPLES; i++) samples.push(run(iters));
  return { median: median(samples), samples, iters };
}

const results = {};
for (const n of SIZES) {
  const f = fixture(n);
  // Switching batches are capped: each clone copies the cooling map.
  const cap = Math.max(16, Math.floor(200_000 / n));
  results[`no_switch/${n}`] = measure((iters) => sampleHealthy(f, iters));
  results[`clean_switch/${n}`] = measure((iters) =>
    sampleSwitch(f, f.cleanSwitch, Math.min(iters, cap), false),
  );
  results[`exemption/${n}`] = measure((iters) => sampleSwitch(f, f.exemption, Math.min(iters, cap), true));
  for (const path of ['no_switch', 'clean_switch', 'exemption']) {
    process.stderr.write(`js ${path}/${n}: ${results[`${path}/${n}`].median.toFixed(1)} ns\n`);
  }
}
const out = { node: process.version, ns: {}, samples: {} };
for (const [key, r] of Object.entries(results)) {
  out.ns[key] = r.median;
  out.samples[key] = r.samples;
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');

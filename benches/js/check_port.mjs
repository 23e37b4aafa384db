// The seed's own cases F12–F17 (hand-over note "切流冷却语义" §5–§6) against the JavaScript port,
// so the peer the core is measured against decides as the seed does. compare.sh runs it first.
//
//   node benches/js/check_port.mjs

import assert from 'node:assert/strict';
import { RelayFailoverSupervisor, relayFailoverThresholds } from './seed_supervisor.mjs';

const A1 = 'wss://alotbuy.com/dshs-relay';
const A2 = 'wss://relay-direct.alotbuy.com/dshs-relay';
const B = 'wss://106.54.21.172/dshs-relay';

// Production topology: two URLs on host A, one on host B; attached to A1.
function rig(env = {}) {
  const sup = new RelayFailoverSupervisor(relayFailoverThresholds(env));
  sup.directory([A1, A2, B], 'signed', 0);
  assert.equal(sup.openSucceeded(A1, 0), true);
  sup.outputs.length = 0;
  return sup;
}

const opens = (sup) => sup.outputs.filter((o) => o.action === 'open');
const lines = (sup, prefix) => sup.outputs.filter((o) => o.log?.startsWith(prefix));

// Host A dies: A2 fails, B comes up; A1 (switched-away) and A2 (open-failed) cool.
function drainedOnB(env) {
  const sup = rig(env);
  sup.channelState(A1, 'backoff', 3, 1000);
  sup.tick(1000);
  sup.openFailed(A2, 1000);
  sup.tick(3000);
  assert.equal(sup.opening.url, B);
  sup.openSucceeded(B, 3000);
  assert.equal(sup.stats(3000).cooldown.length, 2);
  sup.outputs.length = 0;
  return sup;
}

// F12: the directory path never passes the cooling gate.
{
  const sup = drainedOnB();
  sup.directory([A1, A2, B], 'signed', 4000);
  assert.equal(sup.opening, null);
  assert.equal(lines(sup, '[relay-skip]').length, 1);
  assert.match(lines(sup, '[relay-skip]')[0].log, /仍在冷却/);
}

// F13 / F14: no clean candidate: exempt, switched-away (A1) before open-failed (A2).
{
  const sup = drainedOnB();
  sup.channelState(B, 'backoff', 3, 5000);
  sup.tick(5000);
  assert.deepEqual(opens(sup), [{ action: 'open', url: A1, timeoutMs: 12000, exempt: true }]);
  sup.openSucceeded(A1, 6000);
  const line = lines(sup, '[relay-switch]')[0].log;
  assert.match(line, /｜豁免 kind=switched-away 剩 \d+ms$/);
  assert.equal(sup.switches, 2);
  assert.equal(sup.exemptSwitches, 1);
}

// F15: a clean candidate exists: no exemption.
{
  const sup = rig();
  sup.channelState(A1, 'backoff', 3, 1000);
  sup.tick(1000);
  assert.deepEqual(opens(sup), [{ action: 'open', url: A2, timeoutMs: 12000, exempt: false }]);
}

// F16: one exemption per URL per cooldown cycle; a failed exempt open spends it.
{
  const sup = drainedOnB();
  sup.channelState(B, 'backoff', 3, 5000);
  sup.tick(5000);
  sup.openFailed(A1, 5000); // the exemption of A1 is spent
  sup.outputs.length = 0;
  sup.tick(7000); // A2 (open-failed) is still exemptable
  assert.deepEqual(opens(sup), [{ action: 'open', url: A2, timeoutMs: 12000, exempt: true }]);
  sup.openFailed(A2, 7000);
  sup.outputs.length = 0;
  sup.tick(9000);
  assert.equal(sup.opening, null, 'no second exemption in the cycle');
  assert.equal(sup.noCandidateChecks, 1);
  assert.equal(sup.openFailedCount, 3);
}

// F17: RELAY_FAILOVER_EXEMPT=0: no exemption, the no-candidate line instead.
{
  const sup = drainedOnB({ RELAY_FAILOVER_EXEMPT: '0' });
  sup.channelState(B, 'backoff', 3, 5000);
  sup.tick(5000);
  assert.equal(sup.opening, null);
  assert.match(lines(sup, '[relay-skip]')[0].log, /无其他候选（候选 3 条，排除 3 条）/);
}

// Thresholds: digits only.
assert.throws(() => relayFailoverThresholds({ RELAY_FAILOVER_COOLDOWN_MS: '20000 (drill)' }));
assert.equal(relayFailoverThresholds({ RELAY_FAILOVER_COOLDOWN_MS: '0' }).cooldownMs, 0);

console.log('seed cases F12-F17: the port decides as the seed');

// The seed's relay-failover supervisor (`src/net/relay/switcher.ts`, RelayFailoverSupervisor,
// after the seed's hand-over note "切流冷却语义" (cooldown semantics, order 8)), ported plainly
// to JavaScript as the performance peer of the Rust core (`core/src/failover`).
//
// What the seed documents and this port keeps:
// - thresholds from the environment, each value `/^\d+$/` (`num()`), production defaults
//   300000 / 30000 / 15000 / 3 / 2000 / 12000, `RELAY_FAILOVER_EXEMPT` default 1;
// - `cooling: Map<url, {kind, sinceMs, untilMs, exemptedAtMs}>`, keyed by URL, in memory;
// - `tick()`: supervisor off when `minAttempts <= 0`; the channel is unhealthy only in backoff
//   with `attempts >= minAttempts` or `unhealthyForMs >= graceMs`; then the `blocked` set is
//   built from the cooling map (expired rows are dropped), the target is the first candidate
//   that is neither current nor blocked; with none, the one-hop exemption (`pickExemptTarget`:
//   candidates ∩ cooling − current − exempted this cycle, `switched-away` first, then earliest
//   `untilMs`, then list order); with none either, `noCandidateChecks += 1` and a skip line
//   throttled to one per `graceMs`;
// - `replace(targetUrl, reason, origin)`, the single way to switch: the cooling gate, which
//   only the health path may pass, once per URL per cooldown cycle (`exemptedAtMs`); the
//   reason is free text built from the health numbers; targets come from the signed list only;
// - an open that fails cools its URL (`open-failed`; a failed exempt open spends the cycle's
//   exemption); a switch cools the old URL (`switched-away`), counts `switches` (and
//   `exemptSwitches`), closes the old channel after the new one is up, and logs one
//   `[relay-switch]` line, ending in `｜豁免 kind=… 剩 …ms` when exempt.
//
// What differs, and why: the seed's `tick()` and `replace()` are `async` and await the
// channel's open; here, as in the Rust core, the open is an output (`{action: 'open'}`) and its
// result comes back as an input (`openSucceeded` / `openFailed`), and time is passed in
// (`nowMs`). So both sides are measured doing the same work: decide, queue the open. Leaving the
// promises out only makes the JavaScript side faster. Log lines are queued as strings instead of
// printed. The Rust core's later additions (the chain continuing within one tick, the passed-over
// order, probe rounds) are not ported: the measured paths do not reach them.

const KIND_RANK = { 'switched-away': 0, 'open-failed': 1 };

function num(env, name, fallback) {
  const raw = env[name];
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new Error(`${name}=${JSON.stringify(raw)}: not a number`);
  return Number(raw);
}

export function relayFailoverThresholds(env = {}) {
  return {
    cooldownMs: num(env, 'RELAY_FAILOVER_COOLDOWN_MS', 300000),
    deadlineMs: num(env, 'RELAY_FAILOVER_DEADLINE_MS', 30000),
    graceMs: num(env, 'RELAY_FAILOVER_GRACE_MS', 15000),
    minAttempts: num(env, 'RELAY_FAILOVER_MIN_ATTEMPTS', 3),
    checkMs: num(env, 'RELAY_FAILOVER_CHECK_MS', 2000),
    upTimeoutMs: num(env, 'RELAY_FAILOVER_UP_TIMEOUT_MS', 12000),
    exempt: num(env, 'RELAY_FAILOVER_EXEMPT', 1) !== 0,
  };
}

function exemptedThisCycle(e) {
  return e.exemptedAtMs !== undefined && e.exemptedAtMs >= e.sinceMs;
}

export class RelayFailoverSupervisor {
  constructor(thresholds) {
    this.t = thresholds;
    this.list = [];
    this.cooling = new Map();
    this.current = null; // { url, state, attempts, leftHealthyAtMs }
    this.opening = null; // { url, reason, origin, exemption, startedAtMs }
    this.switches = 0;
    this.exemptSwitches = 0;
    this.openFailedCount = 0;
    this.noCandidateChecks = 0;
    this.lastSkipLogAtMs = -Infinity;
    this.outputs = [];
  }

  candidates() {
    return this.list;
  }

  log(line) {
    this.outputs.push({ log: line });
  }

  // The directory refresh (server.ts `refreshOverlay`): take the list; if its first URL is not
  // the current one, ask for it on the directory path (no exemption).
  directory(urls, source, nowMs) {
    this.list = [...new Set(urls)];
    const next = this.list[0];
    const cur = this.current === null ? '' : this.current.url;
    if (next === undefined || next === cur) return;
    this.replace(next, `目录地址变更（source=${source}）`, 'directory', nowMs);
  }

  channelState(url, state, attempts, nowMs) {
    const c = this.current;
    if (c === null || c.url !== url) return;
    if (state === 'backoff' && c.state === 'healthy') c.leftHealthyAtMs = nowMs;
    if (state === 'healthy') c.leftHealthyAtMs = null;
    c.state = state;
    c.attempts = attempts;
  }

  health(nowMs) {
    const c = this.current;
    return {
      state: c.state,
      attempts: c.attempts,
      unhealthyForMs: c.leftHealthyAtMs === null ? 0 : nowMs - c.leftHealthyAtMs,
    };
  }

  unhealthy(h) {
    if (this.t.minAttempts <= 0) return false;
    return h.state === 'backoff' && (h.attempts >= this.t.minAttempts || h.unhealthyForMs >= this.t.graceMs);
  }

  reasonOf(h) {
    if (h === null) {
      return `无通道（阈值 minAttempts=${this.t.minAttempts}/graceMs=${this.t.graceMs}）`;
    }
    return `当前通道不健康（state=${h.state} attempts=${h.attempts} unhealthyForMs=${h.unhealthyForMs} ≥ 阈值 minAttempts=${this.t.minAttempts}/graceMs=${this.t.graceMs}）`;
  }

  tick(nowMs) {
    if (this.t.minAttempts <= 0) return;
    if (this.opening !== null) return;
    const cur = this.current;
    const h = cur === null ? null : this.health(nowMs);
    if (h !== null && !this.unhealthy(h)) return;

    const blocked = new Set();
    for (const [url, e] of this.cooling) {
      if (e.untilMs > nowMs) blocked.add(url);
      else this.cooling.delete(url);
    }
    const curUrl = cur === null ? '' : cur.url;
    const list = this.candidates();
    const target = list.find((u) => u !== curUrl && !blocked.has(u));
    if (target !== undefined) {
      this.replace(target, this.reasonOf(h), 'health', nowMs);
      return;
    }
    // D6: the pool is drained by cooldown: the one-hop exemption.
    const exempt = this.pickExemptTarget(list, curUrl, nowMs);
    if (exempt !== undefined) {
      this.replace(exempt, this.reasonOf(h), 'health', nowMs);
      return;
    }
    this.noCandidateChecks += 1;
    if (nowMs - this.lastSkipLogAtMs >= this.t.graceMs) {
      this.lastSkipLogAtMs = nowMs;
      let excluded = 0;
      for (const u of list) if (u === curUrl || blocked.has(u)) excluded += 1;
      this.log(
        `[relay-skip] ⚠ ${this.reasonOf(h)} 但链里无其他候选（候选 ${list.length} 条，排除 ${excluded} 条）` +
          `⇒ 保持原地退避（⛔ 不切到空、不静默回退默认机）`,
      );
    }
  }

  // D5: switched-away before open-failed, then earliest untilMs (sort is stable: list order).
  pickExemptTarget(list, curUrl, nowMs) {
    if (!this.t.exempt) return undefined;
    const pool = [];
    for (const u of list) {
      if (u === curUrl) continue;
      const e = this.cooling.get(u);
      if (e === undefined || e.untilMs <= nowMs || exemptedThisCycle(e)) continue;
      pool.push({ url: u, e });
    }
    pool.sort((a, b) => KIND_RANK[a.e.kind] - KIND_RANK[b.e.kind] || a.e.untilMs - b.e.untilMs);
    return pool.length > 0 ? pool[0].url : undefined;
  }

  replace(targetUrl, reason, origin, nowMs) {
    if (this.opening !== null) {
      this.log(`[relay-skip] 切换到 ${targetUrl} 被拒：${this.opening.url} 正在建连`);
      return false;
    }
    const curUrl = this.current === null ? '' : this.current.url;
    if (targetUrl === curUrl) return false;
    if (!this.candidates().includes(targetUrl)) {
      this.log(`[relay-skip] ${origin} 路径：${targetUrl} 不在签名候选链内 ⇒ 不连`);
      return false;
    }
    const e = this.cooling.get(targetUrl);
    let exemption = null;
    if (e !== undefined && e.untilMs > nowMs) {
      if (origin !== 'health' || !this.t.exempt || exemptedThisCycle(e)) {
        this.log(
          `[relay-skip] ${origin} 路径：${targetUrl} 仍在冷却（剩 ${e.untilMs - nowMs}ms / 共 ${e.untilMs - e.sinceMs}ms）⇒ 不切`,
        );
        return false;
      }
      e.exemptedAtMs = nowMs;
      exemption = { kind: e.kind, remainingMs: e.untilMs - nowMs };
    }
    this.opening = { url: targetUrl, reason, origin, exemption, startedAtMs: nowMs };
    this.outputs.push({ action: 'open', url: targetUrl, timeoutMs: this.t.upTimeoutMs, exempt: exemption !== null });
    return true;
  }

  openSucceeded(url, nowMs) {
    const op = this.opening;
    if (op === null || op.url !== url) return false;
    this.opening = null;
    const old = this.current;
    this.current = { url, state: 'healthy', attempts: 0, leftHealthyAtMs: null };
    this.cooling.delete(url);
    if (old === null) {
      this.log(`[relay-attach] ${url}（首个通道，${op.origin} 路径）`);
      return true;
    }
    this.cooling.set(old.url, {
      kind: 'switched-away',
      sinceMs: nowMs,
      untilMs: nowMs + this.t.cooldownMs,
      exemptedAtMs: undefined,
    });
    this.switches += 1;
    if (op.exemption !== null) this.exemptSwitches += 1;
    this.outputs.push({ action: 'close', url: old.url });
    let line =
      `[relay-switch] #${this.switches} ${old.url} -> ${url}（原因：${op.reason}；` +
      `冷却 ${old.url} 至 +${this.t.cooldownMs}ms）`;
    if (op.exemption !== null) {
      line += `｜豁免 kind=${op.exemption.kind} 剩 ${op.exemption.remainingMs}ms`;
    }
    this.log(line);
    return true;
  }

  openFailed(url, nowMs) {
    const op = this.opening;
    if (op === null || op.url !== url) return false;
    this.opening = null;
    this.openFailedCount += 1;
    // D4: a failed exempt open restarts the cycle with its exemption spent.
    this.cooling.set(url, {
      kind: 'open-failed',
      sinceMs: nowMs,
      untilMs: nowMs + this.t.cooldownMs,
      exemptedAtMs: op.exemption !== null ? nowMs : undefined,
    });
    this.log(
      `[relay-skip] ⛔ ${op.exemption !== null ? '豁免尝试' : '新通道'}起不来（${url}）⇒ 保持原通道；` +
        `该候选进冷却 ${this.t.cooldownMs}ms`,
    );
    return true;
  }

  stats(nowMs) {
    const cooldown = [];
    for (const [url, e] of this.cooling) {
      if (e.untilMs > nowMs) cooldown.push({ url, untilMs: e.untilMs, kind: e.kind });
    }
    return {
      switches: this.switches,
      exemptSwitches: this.exemptSwitches,
      openFailed: this.openFailedCount,
      noCandidateChecks: this.noCandidateChecks,
      current: this.current === null ? null : this.current.url,
      cooldown,
    };
  }

  // For the bench only (the seed has no such thing): an independent copy with the same shapes,
  // as criterion's `iter_batched_ref` hands each iteration a fresh clone of the Rust machine.
  clone() {
    const c = new RelayFailoverSupervisor(this.t);
    c.list = this.list;
    for (const [url, e] of this.cooling) {
      c.cooling.set(url, { kind: e.kind, sinceMs: e.sinceMs, untilMs: e.untilMs, exemptedAtMs: e.exemptedAtMs });
    }
    const cur = this.current;
    c.current =
      cur === null ? null : { url: cur.url, state: cur.state, attempts: cur.attempts, leftHealthyAtMs: cur.leftHealthyAtMs };
    c.opening = this.opening;
    c.switches = this.switches;
    c.exemptSwitches = this.exemptSwitches;
    c.openFailedCount = this.openFailedCount;
    c.noCandidateChecks = this.noCandidateChecks;
    c.lastSkipLogAtMs = this.lastSkipLogAtMs;
    return c;
  }
}

//! CONF-1, the seed-format half: the TypeScript production system's `[relay-switch]` /
//! `[relay-skip]` lines (seed 000 quotes them; Chinese wording) judged against the spec.
//!
//! Only switches and skips are logged; every input between two lines (ticks, channel reports,
//! open results, directory refreshes) is unknown. [`judge`] searches, within a stated bound, for
//! inputs the spec allows that make the spec's record, the naive oracle [`FoOracle`], decide
//! exactly the observed lines, and reports the first line no input sequence it tried explains,
//! with the requirement ID the line breaks.
//!
//! Three parts: [`parse`] (lines into [`Observation`]s), [`judge`] (the bounded search), and the
//! verdict types ([`Verdict`], [`Departure`]).
//!
//! Liberal readings, where the seed is ambiguous (each is stated where it is used):
//! - the seed's author added markdown `**` emphasis inside quoted lines: removed before parsing;
//! - a switch line may be abbreviated to `#N FROM -> TO` (seed §8.6-③ quotes one so): what it
//!   leaves out is not checked;
//! - `unhealthyForMs=` is checked as a bound (at most the time since the channel was adopted), not
//!   as an equality: the instant the channel left healthy is not logged, and the seed (§8.8-5)
//!   records that the TypeScript clock starts early;
//! - the URL of a `仍在冷却` line is the first `ws://`/`wss://` token on it, if any (the seed quotes
//!   only the numbers); its path (`原因本为：目录地址变更` = directory) only when given;
//! - directory refreshes are optional inputs (their period is not logged), each with the list
//!   given on the command line.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde::Serialize;
use switchyard_core::failover::{ChannelState, CooldownKind, OpenFailure, Origin, Thresholds};
use switchyard_core::MonoMs;

use crate::failover_oracle::{Decision, FoOracle, OpenKind, RelayUrl, SkipKind};

// ===================================================================================== parser

/// The health numbers of a `当前通道不健康（…）` reason or no-candidate line.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct HealthObs {
    pub attempts: Option<u32>,
    pub unhealthy_for_ms: Option<u64>,
    /// The thresholds the line says it compared against (`≥ 阈值 minAttempts=M/graceMs=G`).
    pub min_attempts: Option<u32>,
    pub grace_ms: Option<u64>,
}

/// Why a switch line says it switched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ReasonObs {
    /// `当前通道不健康（…）`: the health path.
    Health(HealthObs),
    /// `目录地址变更（source=…）`: the directory path.
    Directory { source: String },
}

/// A `[relay-switch]` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwitchObs {
    pub seq: u64,
    pub from: String,
    pub to: String,
    /// `None`: the line is abbreviated (no `（原因：…）`).
    pub reason: Option<ReasonObs>,
    /// `D6 现场：…一跳豁免…` in the reason.
    pub d6_note: bool,
    /// `冷却 URL 至 +Cms`.
    pub cooled: Option<(String, u64)>,
    /// `｜豁免 kind=K 剩 Lms`.
    pub marker: Option<(CooldownKind, u64)>,
}

impl SwitchObs {
    /// The line claims an exemption (the marker or the D6 note).
    pub fn exempt(&self) -> bool {
        self.marker.is_some() || self.d6_note
    }
}

/// What one line says happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ObsKind {
    Switch(SwitchObs),
    /// `⚠ 当前通道不健康（…）但链里无其他候选（候选 N 条，排除 M 条）`.
    NoCandidate {
        health: HealthObs,
        candidates: Option<usize>,
        excluded: Option<usize>,
    },
    /// `⛔ 新通道起不来（URL）…该候选进冷却 Cms` / `⛔ 豁免尝试也起不来（URL）…重置该候选冷却 Cms`.
    OpenFailed {
        url: String,
        exempt: bool,
        cooldown_ms: Option<u64>,
    },
    /// `…仍在冷却（剩 Lms / 共 Cms）…`.
    StillCooling {
        url: Option<String>,
        left_ms: Option<u64>,
        of_ms: Option<u64>,
        origin: Option<Origin>,
    },
}

/// One `[relay-switch]` / `[relay-skip]` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// 1-based line number in the file.
    pub line_no: usize,
    /// The line as read (without the journalctl prefix, `**` removed).
    pub text: String,
    /// Seconds from the journalctl prefix (an arbitrary epoch; only differences are used).
    pub second: Option<i64>,
    pub kind: ObsKind,
}

/// A file read into observations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParsedLines {
    pub observations: Vec<Observation>,
    /// Lines not starting (after a prefix) with `[relay-switch]` / `[relay-skip]`.
    pub ignored: usize,
}

/// An unreadable line: its number, the line, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line_no: usize,
    pub line: String,
    pub expected: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}: unreadable: expected {}: {}",
            self.line_no, self.expected, self.line
        )
    }
}

pub const SWITCH_PREFIX: &str = "[relay-switch]";
pub const SKIP_PREFIX: &str = "[relay-skip]";

/// Reads a whole file. Lines with a `[relay-switch]` / `[relay-skip]` prefix must parse; every
/// other line is ignored and counted.
pub fn parse(text: &str) -> Result<ParsedLines, ParseError> {
    let mut observations = Vec::new();
    let mut ignored = 0;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        match parse_line(raw, line_no)? {
            Some(obs) => observations.push(obs),
            None => ignored += 1,
        }
    }
    Ok(ParsedLines {
        observations,
        ignored,
    })
}

/// One line: `Ok(None)` when it is not a switch/skip line.
pub fn parse_line(raw: &str, line_no: usize) -> Result<Option<Observation>, ParseError> {
    let cleaned = raw.replace("**", "");
    let trimmed = cleaned.trim();
    let (second, rest) = match split_prefix(trimmed) {
        Some((second, rest)) => (Some(second), rest),
        None => (None, trimmed),
    };
    let err = |expected: &str| ParseError {
        line_no,
        line: raw.to_owned(),
        expected: expected.to_owned(),
    };
    let kind = if let Some(body) = rest.strip_prefix(SWITCH_PREFIX) {
        ObsKind::Switch(parse_switch(body).map_err(|e| err(&e))?)
    } else if let Some(body) = rest.strip_prefix(SKIP_PREFIX) {
        parse_skip(body).map_err(|e| err(&e))?
    } else {
        return Ok(None);
    };
    Ok(Some(Observation {
        line_no,
        text: rest.to_owned(),
        second,
        kind,
    }))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Days from 1970-01-01 to `y-m-d` (proleptic Gregorian; Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn hms(s: &str) -> Option<i64> {
    let mut it = s.split(':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next()?.parse().ok()?;
    if it.next().is_some() || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some(h * 3600 + m * 60 + sec)
}

/// `host unit[pid]: rest` after the timestamp: returns `rest` (which must follow `": "`).
fn after_host_and_unit(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let (_host, s) = s.split_once(' ')?;
    let (unit, rest) = s.split_once(": ")?;
    if unit.is_empty() || unit.contains(' ') {
        return None;
    }
    Some(rest.trim_start())
}

/// journalctl `short-iso` (`2026-09-17T11:43:26+0800 host unit[123]: `) or `short`
/// (`Sep 17 11:43:26 host unit[123]: `). Returns the second (an arbitrary but consistent epoch:
/// `short` has no year, so it is taken as the year 2000; only differences are used) and the rest.
fn split_prefix(line: &str) -> Option<(i64, &str)> {
    // short-iso
    if let Some((stamp, rest)) = line.split_once(' ') {
        if stamp.len() >= 19 && stamp.as_bytes().get(10) == Some(&b'T') {
            let y: i64 = stamp.get(0..4)?.parse().ok()?;
            let mo: i64 = stamp.get(5..7)?.parse().ok()?;
            let d: i64 = stamp.get(8..10)?.parse().ok()?;
            let t = hms(stamp.get(11..19)?)?;
            let zone = stamp.get(19..).unwrap_or("");
            let offset = parse_zone(zone)?;
            let second = days_from_civil(y, mo, d) * 86_400 + t - offset;
            return Some((second, after_host_and_unit(rest)?));
        }
    }
    // short: `Mon DD HH:MM:SS` (DD may be space-padded)
    let month = MONTHS.iter().position(|m| line.starts_with(m))? as i64 + 1;
    let rest = line.get(3..)?.trim_start();
    let (day, rest) = rest.split_once(' ')?;
    let day: i64 = day.parse().ok()?;
    let rest = rest.trim_start();
    let (time, rest) = rest.split_once(' ')?;
    let t = hms(time)?;
    let second = days_from_civil(2000, month, day) * 86_400 + t;
    Some((second, after_host_and_unit(rest)?))
}

/// `+0800`, `+08:00`, `Z`, or nothing (UTC).
fn parse_zone(zone: &str) -> Option<i64> {
    if zone.is_empty() || zone == "Z" {
        return Some(0);
    }
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[0..2].parse().ok()?;
    let m: i64 = digits[2..4].parse().ok()?;
    Some(sign * (h * 3600 + m * 60))
}

/// The decimal number right after `key` (e.g. `attempts=`), if the key is present.
fn number_after(s: &str, key: &str) -> Result<Option<u64>, String> {
    let Some(at) = s.find(key) else {
        return Ok(None);
    };
    let tail = s[at + key.len()..].trim_start();
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return Err(format!("a number after `{key}`"));
    }
    digits
        .parse::<u64>()
        .map(Some)
        .map_err(|_| format!("a number that fits after `{key}`"))
}

fn u32_after(s: &str, key: &str) -> Result<Option<u32>, String> {
    match number_after(s, key)? {
        None => Ok(None),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| format!("a small number after `{key}`")),
    }
}

/// A URL token: up to whitespace or a (full- or half-width) bracket.
fn url_token(s: &str) -> &str {
    let end = s
        .find(|c: char| c.is_whitespace() || matches!(c, '（' | '）' | '(' | ')' | '；' | '｜'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The text inside the full-width parentheses right after `key`.
fn paren_after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let at = s.find(key)? + key.len();
    let tail = &s[at..];
    let end = tail.find('）').unwrap_or(tail.len());
    Some(tail[..end].trim())
}

fn health_of(s: &str) -> Result<HealthObs, String> {
    Ok(HealthObs {
        attempts: u32_after(s, "attempts=")?,
        unhealthy_for_ms: number_after(s, "unhealthyForMs=")?,
        min_attempts: u32_after(s, "minAttempts=")?,
        grace_ms: number_after(s, "graceMs=")?,
    })
}

const SWITCH_FORM: &str = "`[relay-switch] #N FROM -> TO （原因：当前通道不健康（…）|目录地址变更（source=…）；冷却 FROM 至 +Cms）[｜豁免 kind=K 剩 Lms]`";

fn parse_switch(body: &str) -> Result<SwitchObs, String> {
    let body = body.trim_start();
    let Some(after_hash) = body.strip_prefix('#') else {
        return Err(SWITCH_FORM.to_owned());
    };
    let digits: String = after_hash
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let seq: u64 = digits
        .parse()
        .map_err(|_| format!("a switch number after `#` in {SWITCH_FORM}"))?;
    let rest = after_hash[digits.len()..].trim_start();
    let from = url_token(rest);
    if from.is_empty() {
        return Err(format!("FROM after `#{seq}` in {SWITCH_FORM}"));
    }
    let rest = rest[from.len()..].trim_start();
    let Some(rest) = rest.strip_prefix("->") else {
        return Err(format!("`->` after FROM in {SWITCH_FORM}"));
    };
    let rest = rest.trim_start();
    let to = url_token(rest);
    if to.is_empty() {
        return Err(format!("TO after `->` in {SWITCH_FORM}"));
    }
    let tail = &rest[to.len()..];
    // The exemption marker (full-width `｜`; a half-width `|` is read too).
    let (reason_part, marker) = match tail.find("豁免 kind=") {
        Some(at) if tail[..at].ends_with('｜') || tail[..at].ends_with('|') => {
            let m = &tail[at + "豁免 kind=".len()..];
            let kind_text = m.split_whitespace().next().unwrap_or("");
            let kind = match kind_text {
                "switched-away" => CooldownKind::SwitchedAway,
                "open-failed" => CooldownKind::OpenFailed,
                _ => {
                    return Err(format!(
                        "`kind=switched-away` or `kind=open-failed` in the exemption marker, not `{kind_text}`"
                    ))
                }
            };
            let left = number_after(m, "剩")?
                .ok_or_else(|| "`剩 Lms` in the exemption marker".to_owned())?;
            (&tail[..at], Some((kind, left)))
        }
        _ => (tail, None),
    };
    let mut reason = None;
    if let Some(at) = reason_part.find("原因：") {
        let r = &reason_part[at + "原因：".len()..];
        if r.trim_start().starts_with("当前通道不健康") {
            reason = Some(ReasonObs::Health(health_of(r)?));
        } else if r.trim_start().starts_with("目录地址变更") {
            let source = paren_after(r, "source=").unwrap_or("").to_owned();
            reason = Some(ReasonObs::Directory { source });
        } else {
            return Err(
                "`当前通道不健康（…）` or `目录地址变更（source=…）` after `原因：`".to_owned(),
            );
        }
    } else if !reason_part.trim().is_empty() {
        return Err(format!(
            "`（原因：…）` after TO (or nothing: an abbreviated line) in {SWITCH_FORM}"
        ));
    }
    let d6_note = reason_part.contains("D6 现场") || reason_part.contains("一跳豁免");
    let cooled = match reason_part.rfind("冷却 ") {
        Some(at) => {
            let c = reason_part[at + "冷却 ".len()..].trim_start();
            let url = url_token(c);
            let after = &c[url.len()..];
            match after.find("至 +") {
                Some(_) => {
                    let ms = number_after(after, "至 +")?.unwrap_or(0);
                    Some((url.to_owned(), ms))
                }
                None => return Err("`冷却 URL 至 +Cms` in the reason".to_owned()),
            }
        }
        None => None,
    };
    Ok(SwitchObs {
        seq,
        from: from.to_owned(),
        to: to.to_owned(),
        reason,
        d6_note,
        cooled,
        marker,
    })
}

const SKIP_FORMS: &str = "one of the `[relay-skip]` forms: `…但链里无其他候选（候选 N 条，排除 M 条）…`, `⛔ 新通道起不来（URL）…该候选进冷却 Cms…`, `⛔ 豁免尝试也起不来（URL）…重置该候选冷却 Cms…`, `…仍在冷却（剩 Lms / 共 Cms）…`";

fn parse_skip(body: &str) -> Result<ObsKind, String> {
    if body.contains("链里无其他候选") {
        let health_part = match body.find("但链里") {
            Some(at) => &body[..at],
            None => body,
        };
        let candidates = number_after(body, "候选 ")?.map(|n| n as usize);
        let excluded = number_after(body, "排除 ")?.map(|n| n as usize);
        return Ok(ObsKind::NoCandidate {
            health: health_of(health_part)?,
            candidates,
            excluded,
        });
    }
    if let Some(url) = paren_after(body, "豁免尝试也起不来（") {
        let cooldown_ms = number_after(body, "重置该候选冷却")?;
        return Ok(ObsKind::OpenFailed {
            url: url.to_owned(),
            exempt: true,
            cooldown_ms,
        });
    }
    if let Some(url) = paren_after(body, "新通道起不来（") {
        let cooldown_ms = number_after(body, "该候选进冷却")?;
        return Ok(ObsKind::OpenFailed {
            url: url.to_owned(),
            exempt: false,
            cooldown_ms,
        });
    }
    if body.contains("仍在冷却") {
        let url = ["wss://", "ws://"]
            .iter()
            .filter_map(|scheme| body.find(scheme))
            .min()
            .map(|at| url_token(&body[at..]).to_owned());
        let origin = if body.contains("原因本为：目录地址变更") {
            Some(Origin::Directory)
        } else if body.contains("原因本为：当前通道不健康") {
            Some(Origin::Health)
        } else {
            None
        };
        return Ok(ObsKind::StillCooling {
            url,
            left_ms: number_after(body, "剩")?,
            of_ms: number_after(body, "共")?,
            origin,
        });
    }
    Err(SKIP_FORMS.to_owned())
}

// ===================================================================================== search

/// What [`judge`] is given besides the lines.
#[derive(Debug, Clone)]
pub struct SeedConfig {
    pub thresholds: Thresholds,
    /// The directory list, in directory order (every refresh delivers this list).
    pub candidates: Vec<RelayUrl>,
    /// The channel at the start of the file (default: the first switch line's FROM).
    pub current: Option<RelayUrl>,
    /// Bound: inputs searched between two lines.
    pub max_inputs: usize,
    /// Bound: states visited per line.
    pub max_states: usize,
    /// Bound: states carried from one line to the next.
    pub max_frontier: usize,
    /// The file is an excerpt: a switch or skip the spec would log may be missing from it.
    pub excerpt: bool,
}

impl SeedConfig {
    /// The bound as one sentence (printed with every verdict).
    pub fn bound(&self) -> String {
        format!(
            "at most {} inputs between two lines, {} states per line, {} states carried to the next line; {}",
            self.max_inputs,
            self.max_states,
            self.max_frontier,
            if self.excerpt {
                "excerpt: switches and skips the spec would log may be missing"
            } else {
                "complete: every switch and skip the spec would log must be in the file"
            }
        )
    }
}

/// The verdict of one explained line.
#[derive(Debug, Clone, Serialize)]
pub struct LineVerdict {
    pub line: usize,
    pub text: String,
    /// The inputs found before this line (one explanation; others may exist).
    pub inputs: Vec<String>,
    /// States visited while searching for this line.
    pub states: usize,
}

/// The first line no input sequence within the bound explains.
#[derive(Debug, Clone, Serialize)]
pub struct Departure {
    pub line: usize,
    pub text: String,
    pub requirement: &'static str,
    /// What the oracle decided instead, from the states the search reached (at most six).
    pub allowed: Vec<String>,
    pub states: usize,
    /// Whether the state bound was reached (otherwise the input bound ended the search).
    pub state_bound_hit: bool,
}

/// The verdict of one file.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub explained: Vec<LineVerdict>,
    pub departure: Option<Departure>,
    pub states: usize,
    pub bound: String,
}

/// A line inconsistent with the thresholds given (not a departure: the arguments are wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThresholdMismatch {
    pub line_no: usize,
    pub what: String,
}

impl std::fmt::Display for ThresholdMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line_no, self.what)
    }
}

/// Checks the thresholds a line prints against the ones given.
fn check_thresholds(obs: &Observation, t: &Thresholds) -> Result<(), ThresholdMismatch> {
    let mismatch = |what: String| ThresholdMismatch {
        line_no: obs.line_no,
        what,
    };
    let health = |h: &HealthObs| -> Result<(), ThresholdMismatch> {
        if let Some(m) = h.min_attempts {
            if m != t.min_attempts {
                return Err(mismatch(format!("the line logs minAttempts={m} but --min-attempts is {}: pass the thresholds the system ran with", t.min_attempts)));
            }
        }
        if let Some(g) = h.grace_ms {
            if g != t.grace_ms {
                return Err(mismatch(format!("the line logs graceMs={g} but --grace-ms is {}: pass the thresholds the system ran with", t.grace_ms)));
            }
        }
        Ok(())
    };
    let cooldown = |c: u64| -> Result<(), ThresholdMismatch> {
        if c != t.cooldown_ms {
            return Err(mismatch(format!("the line logs a cooldown of {c}ms but --cooldown-ms is {}: pass the thresholds the system ran with", t.cooldown_ms)));
        }
        Ok(())
    };
    match &obs.kind {
        ObsKind::Switch(s) => {
            if let Some(ReasonObs::Health(h)) = &s.reason {
                health(h)?;
            }
            if let Some((_, c)) = &s.cooled {
                cooldown(*c)?;
            }
        }
        ObsKind::NoCandidate { health: h, .. } => health(h)?,
        ObsKind::OpenFailed {
            cooldown_ms: Some(c),
            ..
        } => cooldown(*c)?,
        ObsKind::StillCooling { of_ms: Some(c), .. } => cooldown(*c)?,
        _ => {}
    }
    Ok(())
}

/// An open decided and not yet resolved: what the switch line will be checked against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Pending {
    decided_at: u64,
    attempts: Option<u32>,
    exempt: Option<(CooldownKind, u64)>,
    /// When the channel the open would replace was adopted.
    adopted: Option<u64>,
}

/// A search state: the oracle, the clock, and what the search knows beside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    oracle: FoOracle,
    now: u64,
    last_tick: Option<u64>,
    open_started: Option<u64>,
    /// When the current channel was adopted (`None`: before the file).
    adopted_at: Option<u64>,
    /// Mirror of the channel state fed to the oracle, and when it left healthy.
    chan: Option<ChannelState>,
    left_at: Option<u64>,
    pending: Option<Pending>,
    /// Whether the full list was delivered (it is not at the start when `--current` is not first).
    listed: bool,
    /// Observed `#N` minus the oracle's `switches`, fixed by the first switch line (FO-D7).
    seq_offset: Option<i64>,
}

/// An input the search may place between two lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    /// Time passes to the instant; every tick on the `CHECK_MS` grid before it runs.
    Wait(u64),
    Tick,
    Report(ChannelState),
    OpenOk,
    OpenFailed(OpenFailure),
    Directory,
    /// A macro the search tries first: time passes to `report_at`, the channel reports backoff
    /// with `attempts` (unless it already does), time passes to `decide_at`, and a tick runs
    /// there. Only the final tick's decisions count; a stretch that decides anything before
    /// (in a complete file) abandons the plan.
    Plan {
        report_at: u64,
        attempts: u32,
        decide_at: u64,
    },
}

/// One path element as printed.
fn describe(input: Input, node_before: &Node, node_after: &Node, clock: &Clock) -> String {
    let url = |n: &Node| {
        n.oracle
            .view(MonoMs(n.now))
            .opening
            .map(|o| o.0.to_string())
            .unwrap_or_default()
    };
    match input {
        Input::Wait(_) => format!("time passes to {}", clock.show(node_after.now)),
        Input::Tick => format!("tick at {}", clock.show(node_after.now)),
        Input::Report(ChannelState::Healthy) => "channel healthy".to_owned(),
        Input::Report(ChannelState::Backoff { attempts }) => {
            format!("channel in backoff, attempts={attempts}")
        }
        Input::OpenOk => format!("open of {} succeeds", url(node_before)),
        Input::OpenFailed(OpenFailure::Failed) => format!("open of {} fails", url(node_before)),
        Input::OpenFailed(OpenFailure::TimedOut) => {
            format!("open of {} times out", url(node_before))
        }
        Input::Directory => "directory refresh".to_owned(),
        Input::Plan {
            report_at,
            attempts,
            decide_at,
        } => format!(
            "channel in backoff (attempts={attempts}) from {}, tick at {}",
            clock.show(report_at.max(node_before.now)),
            clock.show(decide_at)
        ),
    }
}

/// Maps journal seconds onto the search's clock.
#[derive(Debug, Clone)]
struct Clock {
    first_second: Option<i64>,
}

/// The search's instant of the first prefixed line's second: room for history before it.
const BASE_MS: u64 = 1_000_000_000;

impl Clock {
    /// The window of instants a prefixed line's decision lies in.
    fn window(&self, obs: &Observation) -> Option<(u64, u64)> {
        let first = self.first_second?;
        let s = obs.second?;
        let start = BASE_MS as i64 + (s - first) * 1000;
        if start < 0 {
            return None;
        }
        Some((start as u64, start as u64 + 999))
    }

    fn show(&self, t: u64) -> String {
        match self.first_second {
            Some(first) if t >= BASE_MS / 2 => {
                let ms = (t as i64 - BASE_MS as i64) + first * 1000;
                let day_ms = ms.rem_euclid(86_400_000);
                format!(
                    "{:02}:{:02}:{:02}.{:03}",
                    day_ms / 3_600_000,
                    day_ms / 60_000 % 60,
                    day_ms / 1000 % 60,
                    day_ms % 1000
                )
            }
            _ => format!("t={t}ms"),
        }
    }
}

/// The decisions the TypeScript system logs as lines; the others (opens, closes, attaches, an
/// open already in flight, an unlisted open's close, a rejected list, a probe round) are free.
fn logged(d: &Decision) -> bool {
    matches!(
        d,
        Decision::Switched { .. }
            | Decision::Skip(SkipKind::NoCandidate { .. })
            | Decision::Skip(SkipKind::OpenFailed { .. })
            | Decision::Skip(SkipKind::StillCooling { .. })
    )
}

/// A logged decision in words (for "the spec allowed"), with a key without the instant (so
/// the list shows kinds of decisions, not the same one at every instant).
fn decision_words(d: &Decision, n: &Node, clock: &Clock) -> (String, String) {
    let w = decision_words_at(d, n, clock);
    let key: String = w.chars().filter(|c| !c.is_ascii_digit()).collect();
    (key, w)
}

fn decision_words_at(d: &Decision, n: &Node, clock: &Clock) -> String {
    let at = clock.show(n.now);
    let v = n.oracle.view(MonoMs(n.now));
    match d {
        Decision::Switched {
            from,
            to,
            origin,
            exempt,
            ..
        } => {
            let seq = n
                .seq_offset
                .map(|o| (v.counters.switches as i64 + o).to_string())
                .unwrap_or_else(|| "?".to_owned());
            format!(
                "switch #{seq} {from} -> {to} ({} path{}) at {at}",
                origin.as_str(),
                if *exempt { ", exempt" } else { "" }
            )
        }
        Decision::Skip(SkipKind::NoCandidate { .. }) => {
            format!("no other candidate, staying in backoff at {at}")
        }
        Decision::Skip(SkipKind::OpenFailed { url, exempt, .. }) => format!(
            "{} of {url} did not come up at {at}",
            if *exempt { "exempt open" } else { "open" }
        ),
        Decision::Skip(SkipKind::StillCooling { url, origin }) => {
            let left = v
                .cooldown
                .iter()
                .find(|r| &r.0 == url)
                .map(|r| r.3.since_ms(MonoMs(n.now)))
                .unwrap_or(0);
            format!(
                "{} path: {url} still cooling ({left} ms left of {} ms): not switching at {at}",
                origin.as_str(),
                n.oracle_cooldown_ms()
            )
        }
        other => format!("{other:?}"),
    }
}

impl Node {
    fn oracle_cooldown_ms(&self) -> u64 {
        self.oracle
            .view(MonoMs(self.now))
            .cooldown
            .first()
            .map(|r| r.3.since_ms(r.2))
            .unwrap_or(0)
    }

    fn current(&self) -> Option<RelayUrl> {
        self.oracle.view(MonoMs(self.now)).current
    }

    fn opening(&self) -> Option<(RelayUrl, Origin, OpenKind)> {
        self.oracle.view(MonoMs(self.now)).opening
    }

    /// The cooldown row of `url` at `now`: `(kind, since, until, exempted)`.
    fn row(&self, url: &str) -> Option<(CooldownKind, u64, u64, bool)> {
        self.oracle
            .view(MonoMs(self.now))
            .cooldown
            .into_iter()
            .find(|r| r.0.as_str() == url)
            .map(|r| (r.1, r.2.as_ms(), r.3.as_ms(), r.4))
    }
}

/// The search.
struct Search<'a> {
    cfg: &'a SeedConfig,
    obs: &'a [Observation],
    clock: Clock,
}

/// How a decision list compares with the lines from index `k` on.
enum Matched {
    /// It consumed this many lines (0: nothing logged, or every logged decision was skipped in an
    /// excerpt).
    Lines(usize),
    /// A logged decision is not the next line (and the file is complete), or a number differs.
    No,
}

impl<'a> Search<'a> {
    fn t(&self) -> &Thresholds {
        &self.cfg.thresholds
    }

    fn initial(&self) -> Node {
        let t = *self.t();
        let mut oracle = FoOracle::new(t, MonoMs(0));
        let list = &self.cfg.candidates;
        let current = self.cfg.current.clone().unwrap_or_else(|| list[0].clone());
        let listed = current == list[0];
        let first_list: Vec<RelayUrl> = if listed {
            list.clone()
        } else {
            vec![current.clone()]
        };
        oracle.directory(MonoMs(0), &first_list);
        oracle.open_succeeded(MonoMs(0), &current);
        Node {
            oracle,
            now: 0,
            last_tick: None,
            open_started: None,
            adopted_at: None,
            chan: Some(ChannelState::Healthy),
            left_at: None,
            pending: None,
            listed,
            seq_offset: None,
        }
    }

    /// Applies one non-wait input at `now`; mirrors what the oracle does not show.
    fn step(&self, n: &Node, input: Input) -> Option<(Node, Vec<Decision>)> {
        let mut m = n.clone();
        let now = MonoMs(n.now);
        let decisions = match input {
            Input::Wait(_) => return None,
            Input::Plan {
                report_at,
                attempts,
                decide_at,
            } => return self.plan(n, report_at, attempts, decide_at),
            Input::Tick => {
                if n.last_tick.is_some_and(|t| t >= n.now) {
                    return None;
                }
                m.last_tick = Some(n.now);
                m.oracle.tick(now)
            }
            Input::Report(state) => {
                let current = n.current()?;
                if n.chan == Some(state) {
                    return None;
                }
                match state {
                    ChannelState::Healthy => m.left_at = None,
                    ChannelState::Backoff { .. } => {
                        if n.chan == Some(ChannelState::Healthy) {
                            m.left_at = Some(n.now);
                        }
                    }
                }
                m.chan = Some(state);
                m.oracle.channel_state(now, &current, state)
            }
            Input::OpenOk | Input::OpenFailed(_) => {
                let (url, _, _) = n.opening()?;
                let started = n.open_started?;
                let deadline = started + self.t().up_timeout_ms;
                match input {
                    Input::OpenFailed(OpenFailure::TimedOut) if n.now != deadline => return None,
                    _ if n.now > deadline => return None,
                    _ => {}
                }
                m.open_started = None;
                match input {
                    Input::OpenOk => m.oracle.open_succeeded(now, &url),
                    Input::OpenFailed(f) => m.oracle.open_failed(now, &url, f),
                    _ => Vec::new(),
                }
            }
            Input::Directory => {
                let first = &self.cfg.candidates[0];
                if n.listed && n.current().as_ref() == Some(first) {
                    return None;
                }
                m.listed = true;
                m.oracle.directory(now, &self.cfg.candidates)
            }
        };
        self.after(&mut m, &decisions);
        Some((m, decisions))
    }

    /// Runs an [`Input::Plan`].
    fn plan(
        &self,
        n: &Node,
        report_at: u64,
        attempts: u32,
        decide_at: u64,
    ) -> Option<(Node, Vec<Decision>)> {
        let quiet_to = |from: &Node, to: u64| -> Option<Node> {
            if to <= from.now {
                return Some(from.clone());
            }
            let stops = self.wait(from, to, usize::MAX);
            match stops.as_slice() {
                [(m, d)] if d.is_empty() && m.now == to => Some(m.clone()),
                _ => None,
            }
        };
        let mut m = quiet_to(n, report_at)?;
        let state = ChannelState::Backoff { attempts };
        if m.chan != Some(state) {
            m = self.step(&m, Input::Report(state))?.0;
        }
        let m = quiet_to(&m, decide_at)?;
        self.step(&m, Input::Tick)
    }

    /// Updates the search's mirrors from the decisions of one input.
    fn after(&self, m: &mut Node, decisions: &[Decision]) {
        for d in decisions {
            match d {
                Decision::Open { url, kind, .. } => {
                    m.open_started = Some(m.now);
                    let exempt = match kind {
                        OpenKind::Exempt => m
                            .row(url.as_str())
                            .map(|(k, _, until, _)| (k, until.saturating_sub(m.now))),
                        _ => None,
                    };
                    let attempts = match m.chan {
                        Some(ChannelState::Backoff { attempts }) => Some(attempts),
                        _ => None,
                    };
                    m.pending = Some(Pending {
                        decided_at: m.now,
                        attempts,
                        exempt,
                        adopted: m.adopted_at,
                    });
                }
                Decision::Switched { .. } | Decision::Attached { .. } => {
                    m.adopted_at = Some(m.now);
                    m.chan = Some(ChannelState::Healthy);
                    m.left_at = None;
                    m.open_started = None;
                }
                Decision::Skip(SkipKind::OpenFailed { .. })
                | Decision::Skip(SkipKind::NotInList) => {
                    m.open_started = None;
                }
                _ => {}
            }
        }
    }

    /// Time passes to `to`: the ticks of the `CHECK_MS` grid before it run (quiet stretches are
    /// skipped to their last tick, which decides the same). Stops early at a tick that decides
    /// something (returned as its own stop). In an excerpt, a tick whose logged decisions are not
    /// the next line is passed over and time goes on.
    fn wait(&self, n: &Node, to: u64, k: usize) -> Vec<(Node, Vec<Decision>)> {
        let mut stops = Vec::new();
        if to <= n.now {
            return stops;
        }
        if let Some(started) = n.open_started {
            if to > started + self.t().up_timeout_ms {
                return stops; // the open's result comes first
            }
        }
        let check = self.t().check_ms.max(1);
        let mut m = n.clone();
        let mut budget: u32 = 200_000;
        loop {
            let next = m
                .last_tick
                .map_or(m.now + check, |t| t + check)
                .max(m.now + 1);
            if next >= to || budget == 0 {
                break;
            }
            budget -= 1;
            if m.open_started.is_some() {
                // The oracle ignores ticks while an open is in flight.
                let last = next + (to - 1 - next) / check * check;
                m.last_tick = Some(last);
                m.now = last;
                continue;
            }
            // Quiet: the channel cannot become unhealthy before `quiet_until`.
            let quiet_until = match m.chan {
                _ if self.t().min_attempts == 0 => to,
                Some(ChannelState::Healthy) => to,
                Some(ChannelState::Backoff { attempts }) if attempts < self.t().min_attempts => {
                    m.left_at.map_or(to, |at| (at + self.t().grace_ms).min(to))
                }
                _ => 0,
            };
            let at = if quiet_until > next {
                // The last grid tick before `quiet_until`: it decides what the skipped ones would.
                next + (quiet_until - 1 - next) / check * check
            } else {
                next
            };
            m.now = at;
            m.last_tick = Some(at);
            let decisions = m.oracle.tick(MonoMs(at));
            self.after(&mut m, &decisions);
            if decisions.is_empty() {
                continue;
            }
            let opened = decisions.iter().any(|d| matches!(d, Decision::Open { .. }));
            match self.matches(&m, &decisions, k) {
                Matched::Lines(0) if self.cfg.excerpt && !opened => continue,
                Matched::No => {
                    if !self.cfg.excerpt || opened {
                        stops.push((m, decisions));
                        return stops;
                    }
                    continue;
                }
                _ => {
                    stops.push((m.clone(), decisions));
                    if opened || !self.cfg.excerpt {
                        return stops;
                    }
                }
            }
        }
        m.now = to;
        stops.push((m, Vec::new()));
        stops
    }

    /// Compares the logged decisions with the lines from `k` on.
    fn matches(&self, n: &Node, decisions: &[Decision], k: usize) -> Matched {
        let mut consumed = 0;
        let mut offset = n.seq_offset;
        for d in decisions.iter().filter(|d| logged(d)) {
            let next = self.obs.get(k + consumed);
            let ok = match next {
                Some(o) => self.decision_is_line(n, d, o, &mut offset),
                None => false,
            };
            if ok {
                consumed += 1;
            } else if !self.cfg.excerpt {
                return Matched::No;
            }
        }
        Matched::Lines(consumed)
    }

    /// Whether decision `d` (taken in state `n`, after the input) is line `o`, numbers included.
    fn decision_is_line(
        &self,
        n: &Node,
        d: &Decision,
        o: &Observation,
        offset: &mut Option<i64>,
    ) -> bool {
        if let Some((start, end)) = self.clock.window(o) {
            if n.now < start || n.now > end {
                return false;
            }
        }
        let switches = n.oracle.view(MonoMs(n.now)).counters.switches as i64;
        match (d, &o.kind) {
            (
                Decision::Switched {
                    from,
                    to,
                    origin,
                    exempt,
                    ..
                },
                ObsKind::Switch(s),
            ) => {
                if from.as_str() != s.from || to.as_str() != s.to || *exempt != s.exempt() {
                    return false;
                }
                if let Some((cooled, _)) = &s.cooled {
                    if cooled != from.as_str() {
                        return false;
                    }
                }
                // FO-D7: `#N` follows the count of switches.
                // The first switch line fixes the count of switches before the file (never
                // negative: `#1` is the first switch the search's history makes).
                let expected = offset.unwrap_or(s.seq as i64 - switches);
                if s.seq as i64 - switches != expected || expected < 0 {
                    return false;
                }
                let pending = n.pending.as_ref();
                if let Some((kind, left)) = s.marker {
                    if pending.and_then(|p| p.exempt) != Some((kind, left)) {
                        return false;
                    }
                }
                match &s.reason {
                    None => {}
                    Some(ReasonObs::Directory { .. }) if *origin != Origin::Directory => {
                        return false;
                    }
                    Some(ReasonObs::Directory { .. }) => {}
                    Some(ReasonObs::Health(h)) => {
                        if *origin != Origin::Health {
                            return false;
                        }
                        let decided = pending.map_or(n.now, |p| p.decided_at);
                        let attempts = pending.and_then(|p| p.attempts);
                        if !self.health_fits(h, attempts, decided, pending.and_then(|p| p.adopted))
                        {
                            return false;
                        }
                    }
                }
                *offset = Some(expected);
                true
            }
            (
                Decision::Skip(SkipKind::NoCandidate { .. }),
                ObsKind::NoCandidate {
                    health,
                    candidates,
                    excluded,
                },
            ) => {
                let attempts = match n.chan {
                    Some(ChannelState::Backoff { attempts }) => Some(attempts),
                    _ => None,
                };
                if !self.health_fits(health, attempts, n.now, n.adopted_at) {
                    return false;
                }
                let list = &self.cfg.candidates;
                if candidates.is_some_and(|c| c != list.len()) {
                    return false;
                }
                if let Some(e) = excluded {
                    let current = n.current();
                    let out = list
                        .iter()
                        .filter(|u| Some(*u) == current.as_ref() || n.row(u.as_str()).is_some())
                        .count();
                    if *e != out {
                        return false;
                    }
                }
                true
            }
            (
                Decision::Skip(SkipKind::OpenFailed { url, exempt, .. }),
                ObsKind::OpenFailed {
                    url: u, exempt: e, ..
                },
            ) => url.as_str() == u && exempt == e,
            (
                Decision::Skip(SkipKind::StillCooling { url, origin }),
                ObsKind::StillCooling {
                    url: u,
                    left_ms,
                    origin: o_origin,
                    ..
                },
            ) => {
                if u.as_ref().is_some_and(|u| u != url.as_str()) {
                    return false;
                }
                if o_origin.is_some_and(|o| o != *origin) {
                    return false;
                }
                if let Some(left) = left_ms {
                    let Some((_, _, until, _)) = n.row(url.as_str()) else {
                        return false;
                    };
                    if until.saturating_sub(n.now) != *left {
                        return false;
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// The health numbers of a line against the state: `attempts` exactly, `unhealthyForMs` at
    /// most the time since the channel was adopted (FO-H-1; a bound, see the module doc).
    fn health_fits(
        &self,
        h: &HealthObs,
        attempts: Option<u32>,
        decided: u64,
        adopted: Option<u64>,
    ) -> bool {
        if let Some(a) = h.attempts {
            if attempts != Some(a) {
                return false;
            }
        }
        // The line's own claim: unhealthy by attempts or by grace (FO-H-1).
        if let (Some(a), Some(u)) = (h.attempts, h.unhealthy_for_ms) {
            if a < self.t().min_attempts && u < self.t().grace_ms {
                return false;
            }
        }
        if let (Some(u), Some(adopted)) = (h.unhealthy_for_ms, adopted) {
            if u > decided.saturating_sub(adopted) {
                return false;
            }
        }
        true
    }

    /// The instants a decision towards line `k` may be taken at, from `n`: the ones the line's
    /// numbers and second call for, the next grid tick, and the cooling expiries.
    fn decision_times(&self, n: &Node, k: usize) -> Vec<u64> {
        let t = self.t();
        let o = &self.obs[k];
        let window = self.clock.window(o);
        let mut decide: Vec<u64> = Vec::new();
        match &o.kind {
            ObsKind::Switch(s) => {
                if let (Some((_, left)), Some((_, _, until, _))) = (s.marker, n.row(&s.to)) {
                    decide.push(until.saturating_sub(left));
                }
            }
            ObsKind::StillCooling {
                url,
                left_ms: Some(left),
                ..
            } => {
                for r in n.oracle.view(MonoMs(n.now)).cooldown {
                    if url.as_ref().is_none_or(|u| u == r.0.as_str()) {
                        decide.push(r.3.as_ms().saturating_sub(*left));
                    }
                }
            }
            _ => {}
        }
        if let (Some(h), Some(adopted)) = (self.line_health(k), n.adopted_at) {
            if let Some(u) = h.unhealthy_for_ms {
                decide.push(adopted + u);
            }
        }
        if let Some((start, _)) = window {
            decide.push(start);
            decide.push(start.saturating_sub(t.up_timeout_ms));
        }
        decide.push(n.last_tick.unwrap_or(n.now) + t.check_ms);
        for r in n.oracle.view(MonoMs(n.now)).cooldown {
            decide.push(r.3.as_ms());
        }
        let end = window.map_or(u64::MAX, |w| w.1);
        let mut seen = HashSet::new();
        decide.retain(|x| *x >= n.now && *x <= end && seen.insert(*x));
        decide
    }

    /// The health numbers line `k` carries, or else the next line with health numbers after
    /// a run of open-failed lines (the chain's snapshot is taken at the tick that starts it).
    fn line_health(&self, k: usize) -> Option<HealthObs> {
        for o in self.obs.iter().skip(k).take(4) {
            match &o.kind {
                ObsKind::Switch(s) => {
                    return match &s.reason {
                        Some(ReasonObs::Health(h)) => Some(h.clone()),
                        _ => None,
                    }
                }
                ObsKind::NoCandidate { health, .. } => return Some(health.clone()),
                ObsKind::OpenFailed { .. } => continue,
                ObsKind::StillCooling { .. } => return None,
            }
        }
        None
    }

    /// The instants worth waiting for from `n`, towards line `k`.
    fn wait_targets(&self, n: &Node, k: usize) -> Vec<u64> {
        let t = self.t();
        let window = self.clock.window(&self.obs[k]);
        let decide = self.decision_times(n, k);
        let mut out = decide.clone();
        // A channel that turns unhealthy by grace at a decision instant left healthy GRACE_MS
        // before it.
        for d in &decide {
            out.push(d.saturating_sub(t.grace_ms));
        }
        if let Some(at) = n.left_at {
            out.push(at + t.grace_ms);
        }
        if let Some(started) = n.open_started {
            out.push(started + t.up_timeout_ms);
            out.push((n.now + t.check_ms).min(started + t.up_timeout_ms));
        }
        let end = window.map_or(u64::MAX, |w| w.1);
        let mut seen = HashSet::new();
        out.retain(|x| *x > n.now && *x <= end && seen.insert(*x));
        out
    }

    /// The plans tried first: the channel turns unhealthy just in time for a decision instant.
    fn plans(&self, n: &Node, k: usize) -> Vec<Input> {
        let t = self.t();
        if n.current().is_none() || n.opening().is_some() || t.min_attempts == 0 {
            return Vec::new();
        }
        let attempts = self
            .line_health(k)
            .and_then(|h| h.attempts)
            .unwrap_or(t.min_attempts);
        let mut out = Vec::new();
        for d in self.decision_times(n, k) {
            let report_at = if attempts >= t.min_attempts {
                d
            } else {
                d.saturating_sub(t.grace_ms)
            };
            if d <= n.last_tick.unwrap_or(0) && n.last_tick.is_some() {
                continue;
            }
            out.push(Input::Plan {
                report_at: report_at.max(n.now),
                attempts,
                decide_at: d,
            });
        }
        out
    }

    /// The successors of `n` towards line `k`, most promising first.
    fn successors(&self, n: &Node, k: usize) -> Vec<(Input, Node, Vec<Decision>)> {
        let mut out = Vec::new();
        let mut push = |input: Input, r: Option<(Node, Vec<Decision>)>| {
            if let Some((m, d)) = r {
                out.push((input, m, d));
            }
        };
        for plan in self.plans(n, k) {
            push(plan, self.step(n, plan));
        }
        if n.opening().is_some() {
            push(Input::OpenOk, self.step(n, Input::OpenOk));
            push(
                Input::OpenFailed(OpenFailure::Failed),
                self.step(n, Input::OpenFailed(OpenFailure::Failed)),
            );
            push(
                Input::OpenFailed(OpenFailure::TimedOut),
                self.step(n, Input::OpenFailed(OpenFailure::TimedOut)),
            );
        }
        push(Input::Tick, self.step(n, Input::Tick));
        let mut reports = Vec::new();
        let line_attempts = self.line_health(k).and_then(|h| h.attempts);
        if let Some(a) = line_attempts {
            reports.push(ChannelState::Backoff { attempts: a });
        }
        reports.push(ChannelState::Backoff {
            attempts: self.t().min_attempts,
        });
        reports.push(ChannelState::Healthy);
        for r in reports {
            push(Input::Report(r), self.step(n, Input::Report(r)));
        }
        push(Input::Directory, self.step(n, Input::Directory));
        for to in self.wait_targets(n, k) {
            for (m, d) in self.wait(n, to, k) {
                out.push((Input::Wait(to), m, d));
            }
        }
        out
    }
}

/// A frontier entry: a state and the inputs that led to it since the last line.
#[derive(Clone)]
struct Entry {
    node: Node,
    path: Vec<String>,
}

/// Judges the observations against the spec (see the module doc).
pub fn judge(cfg: &SeedConfig, parsed: &ParsedLines) -> Result<Verdict, ThresholdMismatch> {
    for o in &parsed.observations {
        check_thresholds(o, &cfg.thresholds)?;
    }
    let obs = &parsed.observations;
    let clock = Clock {
        first_second: obs.iter().find_map(|o| o.second),
    };
    let search = Search {
        cfg,
        obs,
        clock: clock.clone(),
    };
    let mut verdict = Verdict {
        explained: Vec::new(),
        departure: None,
        states: 0,
        bound: cfg.bound(),
    };
    if obs.is_empty() || cfg.candidates.is_empty() {
        return Ok(verdict);
    }
    // Frontiers by line index: states right after line k-1 (index 0: the start).
    let mut frontiers: Vec<Vec<Entry>> = vec![Vec::new(); obs.len() + 1];
    frontiers[0].push(Entry {
        node: search.initial(),
        path: Vec::new(),
    });
    for k in 0..obs.len() {
        let frontier = std::mem::take(&mut frontiers[k]);
        if frontier.is_empty() {
            continue;
        }
        let mut seen: HashSet<Node> = HashSet::new();
        let mut states = 0usize;
        let mut allowed: Vec<String> = Vec::new();
        let mut near_seq = false;
        let mut found_any = false;
        let mut first_path: Option<Vec<String>> = None;
        let mut first_found_at: Option<usize> = None;
        let mut allowed_in_window: Vec<String> = Vec::new();
        let mut keys_in_window: Vec<String> = Vec::new();
        let mut keys_other: Vec<String> = Vec::new();
        let window = clock.window(&obs[k]);
        // Iterative deepening: depth-first to a depth limit of 1, 2, … inputs, most promising
        // successor first, so the explanation found first is a shortest one.
        let mut state_bound_hit = false;
        let mut limit = 0;
        let mut stack: Vec<(Entry, usize)> = Vec::new();
        loop {
            if stack.is_empty() {
                if found_any || state_bound_hit || limit >= cfg.max_inputs {
                    break;
                }
                limit += 1;
                seen.clear();
                for e in &frontier {
                    seen.insert(e.node.clone());
                }
                stack = frontier.iter().rev().map(|e| (e.clone(), 0)).collect();
            }
            let Some((entry, depth)) = stack.pop() else {
                continue;
            };
            {
                if depth >= limit {
                    continue;
                }
                if states >= cfg.max_states {
                    state_bound_hit = true;
                    break;
                }
                // Once explained, go on for as many states again (alternative explanations are
                // carried to the next line), up to a full frontier.
                if let Some(at) = first_found_at {
                    if states >= 2 * at + 1000 || frontiers[k + 1].len() >= cfg.max_frontier {
                        break;
                    }
                }
                let mut children = Vec::new();
                for (input, m, decisions) in search.successors(&entry.node, k) {
                    // A state seen before is not searched again, but the decisions that led to it
                    // this time are still compared with the line (the same state can be reached by
                    // an input that logs something).
                    let fresh = seen.insert(m.clone());
                    if fresh {
                        states += 1;
                    } else if decisions.iter().all(|d| !logged(d)) {
                        continue;
                    }
                    let mut path = entry.path.clone();
                    path.push(describe(input, &entry.node, &m, &clock));
                    let m_seen = m.clone();
                    let verdict_here = search.matches(&m, &decisions, k);
                    let matched_line = matches!(verdict_here, Matched::Lines(c) if c > 0);
                    match verdict_here {
                        Matched::Lines(0) => {
                            if fresh {
                                children.push((Entry { node: m, path }, depth + 1));
                            }
                        }
                        Matched::Lines(c) => {
                            let mut m = m;
                            // Fix the `#N` offset at the first switch line.
                            if m.seq_offset.is_none() {
                                if let Some(s) = obs[k..k + c].iter().find_map(|o| match &o.kind {
                                    ObsKind::Switch(s) => Some(s.seq),
                                    _ => None,
                                }) {
                                    let switches = m.oracle.view(MonoMs(m.now)).counters.switches;
                                    m.seq_offset = Some(s as i64 - switches as i64);
                                }
                            }
                            if m.opening().is_none() {
                                m.pending = None;
                            }
                            found_any = true;
                            if first_path.is_none() {
                                first_path = Some(path.clone());
                                first_found_at = Some(states);
                            }
                            let target = &mut frontiers[k + c];
                            if target.len() < cfg.max_frontier
                                && !target.iter().any(|e| e.node == m)
                            {
                                target.push(Entry {
                                    node: m,
                                    path: Vec::new(),
                                });
                            }
                        }
                        Matched::No => {}
                    }
                    // What the oracle logged instead of line k (in an excerpt: skipped over).
                    if !matched_line {
                        for d in decisions.iter().filter(|d| logged(d)) {
                            if let (Decision::Switched { from, to, .. }, ObsKind::Switch(s)) =
                                (d, &obs[k].kind)
                            {
                                if from.as_str() == s.from && to.as_str() == s.to {
                                    near_seq |= seq_only_differs(&search, &m_seen, d, &obs[k]);
                                }
                            }
                            let (key, w) = decision_words(d, &m_seen, &clock);
                            let in_window = window.is_some_and(|(a, b)| {
                                m_seen.now + cfg.thresholds.up_timeout_ms >= a && m_seen.now <= b
                            });
                            let (list, keys) = if in_window {
                                (&mut allowed_in_window, &mut keys_in_window)
                            } else {
                                (&mut allowed, &mut keys_other)
                            };
                            if list.len() < 6 && !keys.contains(&key) {
                                keys.push(key);
                                list.push(w);
                            }
                        }
                    }
                }
                // Push in reverse so the first (most promising) is explored first.
                for c in children.into_iter().rev() {
                    stack.push(c);
                }
            }
        }
        verdict.states += states;
        if found_any {
            verdict.explained.push(LineVerdict {
                line: obs[k].line_no,
                text: obs[k].text.clone(),
                inputs: first_path.unwrap_or_default(),
                states,
            });
            continue;
        }
        // No later frontier reached from here: line k departs.
        if frontiers[k + 1..].iter().any(|f| !f.is_empty()) {
            continue;
        }
        let requirement = classify(&search, &frontier, &obs[k], near_seq);
        if !allowed_in_window.is_empty() {
            allowed = allowed_in_window;
        }
        verdict.departure = Some(Departure {
            line: obs[k].line_no,
            text: obs[k].text.clone(),
            requirement,
            allowed,
            states,
            state_bound_hit,
        });
        return Ok(verdict);
    }
    Ok(verdict)
}

/// Whether `d` would be line `o` but for its `#N`.
fn seq_only_differs(search: &Search<'_>, n: &Node, d: &Decision, o: &Observation) -> bool {
    let ObsKind::Switch(s) = &o.kind else {
        return false;
    };
    let Some(offset) = n.seq_offset else {
        return false;
    };
    let switches = n.oracle.view(MonoMs(n.now)).counters.switches as i64;
    let mut fixed = o.clone();
    if let ObsKind::Switch(f) = &mut fixed.kind {
        f.seq = (switches + offset).max(0) as u64;
    }
    let mut off = Some(offset);
    s.seq as i64 != switches + offset && search.decision_is_line(n, d, &fixed, &mut off)
}

/// The requirement a departing line breaks, judged in every state the line's search started from
/// (the first rule that holds in all of them; `FO-ORACLE` otherwise).
fn classify(
    search: &Search<'_>,
    frontier: &[Entry],
    o: &Observation,
    near_seq: bool,
) -> &'static str {
    let t = search.t();
    let list = &search.cfg.candidates;
    let all =
        |f: &dyn Fn(&Node) -> bool| !frontier.is_empty() && frontier.iter().all(|e| f(&e.node));
    let window = search.clock.window(o);
    // The earliest instant the line's decision can have been taken.
    let earliest =
        |n: &Node| window.map_or(n.now, |w| w.0.saturating_sub(t.up_timeout_ms).max(n.now));
    let cooling_at =
        |n: &Node, url: &str, at: u64| n.row(url).is_some_and(|(_, _, until, _)| until > at);
    match &o.kind {
        ObsKind::Switch(s) => {
            if !list.iter().any(|u| u.as_str() == s.to) {
                return "FO-R5";
            }
            if s.exempt() && !t.exempt {
                return "FO-D6-OFF";
            }
            if let Some(ReasonObs::Health(h)) = &s.reason {
                let by_attempts = h.attempts.is_some_and(|a| a >= t.min_attempts);
                let by_grace = h.unhealthy_for_ms.is_some_and(|u| u >= t.grace_ms);
                if t.min_attempts == 0
                    || (h.attempts.is_some()
                        && h.unhealthy_for_ms.is_some()
                        && !by_attempts
                        && !by_grace)
                {
                    return "FO-H-1";
                }
            }
            if near_seq {
                return "FO-D7";
            }
            if matches!(s.reason, Some(ReasonObs::Directory { .. }))
                && all(&|n| cooling_at(n, &s.to, window.map_or(n.now, |w| w.1)))
            {
                return "FO-D1";
            }
            if s.exempt() {
                let clean_exists = |n: &Node| {
                    let current = n.current();
                    list.iter().any(|u| {
                        Some(u) != current.as_ref() && !cooling_at(n, u.as_str(), earliest(n))
                    })
                };
                if all(&|n| n.row(&s.to).is_some_and(|r| r.3)) {
                    return "FO-D4";
                }
                if all(&clean_exists) {
                    return "FO-D3";
                }
                if all(&|n| {
                    let best = fo_d5_best(n, list);
                    best.is_some_and(|b| b != s.to)
                }) {
                    return "FO-D5";
                }
            }
            "FO-ORACLE"
        }
        ObsKind::NoCandidate { health, .. } => {
            let by_attempts = health.attempts.is_some_and(|a| a >= t.min_attempts);
            let by_grace = health.unhealthy_for_ms.is_some_and(|u| u >= t.grace_ms);
            if health.attempts.is_some()
                && health.unhealthy_for_ms.is_some()
                && !by_attempts
                && !by_grace
            {
                return "FO-H-1";
            }
            "FO-ORACLE"
        }
        ObsKind::OpenFailed { url, .. } => {
            if !list.iter().any(|u| u.as_str() == url) {
                return "FO-R5";
            }
            if all(&|n| n.oracle.passed_over().iter().any(|u| u.as_str() == url)) {
                return "FO-X2";
            }
            "FO-ORACLE"
        }
        ObsKind::StillCooling { .. } => "FO-ORACLE",
    }
}

/// FO-D5: among listed non-current URLs cooling and not yet exempted, `switched-away` first,
/// then earliest `until`, then directory order.
fn fo_d5_best(n: &Node, list: &[RelayUrl]) -> Option<String> {
    let current = n.current();
    let mut best: Option<(u8, u64, usize, String)> = None;
    for (i, u) in list.iter().enumerate() {
        if Some(u) == current.as_ref() {
            continue;
        }
        let Some((kind, _, until, exempted)) = n.row(u.as_str()) else {
            continue;
        };
        if exempted {
            continue;
        }
        let rank = match kind {
            CooldownKind::SwitchedAway => 0,
            CooldownKind::OpenFailed => 1,
        };
        let key = (rank, until, i, u.as_str().to_owned());
        if best
            .as_ref()
            .is_none_or(|b| (key.0, key.1, key.2) < (b.0, b.1, b.2))
        {
            best = Some(key);
        }
    }
    best.map(|b| b.3)
}

/// The verdict as text (one file).
pub fn render_text(name: &str, parsed: &ParsedLines, v: &Verdict, verbose: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{name}: {} lines judged, {} other lines ignored; bound: {}",
        parsed.observations.len(),
        parsed.ignored,
        v.bound
    );
    for l in &v.explained {
        let _ = writeln!(s, "  line {}: explained ({} states)", l.line, l.states);
        if verbose {
            for i in &l.inputs {
                let _ = writeln!(s, "      {i}");
            }
        }
    }
    match &v.departure {
        None => {
            let _ = writeln!(s, "{name}: conforms ({} states searched)", v.states);
        }
        Some(d) => {
            let _ = writeln!(
                s,
                "{name}: departs at line {}: {} breaks {}: the spec allowed: {}",
                d.line,
                d.text,
                d.requirement,
                if d.allowed.is_empty() {
                    "no logged decision in the states reached".to_owned()
                } else {
                    d.allowed.join("; ")
                }
            );
            let _ = writeln!(
                s,
                "  not explained within the bound ({} states searched for this line{})",
                d.states,
                if d.state_bound_hit {
                    ", state bound reached"
                } else {
                    ""
                }
            );
        }
    }
    s
}

//! The failover vocabulary: URLs, channel states, cooldown entries, outputs and events.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::MonoMs;

/// A relay URL as it appears in the signed directory. Cheap to clone: the checker copies states
/// by the million. Equality, order, hash and the serialised form are the string's, whichever way
/// it is held.
#[derive(Clone)]
pub struct RelayUrl(Held);

/// How the string is held: shared (a URL read at run time) or `'static` (a URL that lives as
/// long as the process, such as a model's universe: cloning it writes no reference count, which
/// two checker threads cloning the same few URLs would otherwise contend on).
#[derive(Clone)]
enum Held {
    Shared(Arc<str>),
    Static(&'static str),
}

impl RelayUrl {
    pub fn new(url: impl AsRef<str>) -> RelayUrl {
        RelayUrl(Held::Shared(Arc::from(url.as_ref())))
    }

    /// A URL that lives as long as the process.
    pub fn from_static(url: &'static str) -> RelayUrl {
        RelayUrl(Held::Static(url))
    }

    /// FO-X4: the URL's host, its failure domain: the authority between `scheme://` and the
    /// first `/`, `?` or `#`, without user information or port (`wss://relay-a:8443/r` and
    /// `wss://relay-a/alt` share the host `relay-a`; an IPv6 literal keeps its brackets).
    /// Compared without regard to ASCII case. A string without `://` is its own host. Two URLs
    /// of one machine under two different names are two hosts: the directory lists a host
    /// under one name for its URLs to fail together.
    pub fn host(&self) -> &str {
        let url = self.as_str();
        let Some((_, rest)) = url.split_once("://") else {
            return url;
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if host_port.starts_with('[') {
            return host_port
                .find(']')
                .map_or(host_port, |end| &host_port[..=end]);
        }
        host_port.split(':').next().unwrap_or(host_port)
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Held::Shared(url) => url,
            Held::Static(url) => url,
        }
    }
}

impl PartialEq for RelayUrl {
    fn eq(&self, other: &RelayUrl) -> bool {
        let (a, b) = (self.as_str(), other.as_str());
        // The same string (one interned list, one universe) is the common case.
        std::ptr::eq(a, b) || a == b
    }
}

impl Eq for RelayUrl {}

impl PartialOrd for RelayUrl {
    fn partial_cmp(&self, other: &RelayUrl) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RelayUrl {
    fn cmp(&self, other: &RelayUrl) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for RelayUrl {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::fmt::Debug for RelayUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RelayUrl").field(&self.as_str()).finish()
    }
}

impl Serialize for RelayUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RelayUrl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RelayUrl, D::Error> {
        let url = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(RelayUrl::new(url))
    }
}

impl From<&str> for RelayUrl {
    fn from(url: &str) -> RelayUrl {
        RelayUrl::new(url)
    }
}

impl std::fmt::Display for RelayUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state a channel reports about itself (FO-H-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ChannelState {
    Healthy,
    /// Reconnecting; `attempts` failed reconnects since the channel left `Healthy`.
    Backoff {
        attempts: u32,
    },
}

/// Why a URL is in cooldown (FO-D2). Only orders the exemption (FO-D5); never part of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CooldownKind {
    /// We left a channel that had worked. Exempted first: it was alive not long ago.
    SwitchedAway,
    /// Opening it just failed.
    OpenFailed,
}

impl CooldownKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CooldownKind::SwitchedAway => "switched-away",
            CooldownKind::OpenFailed => "open-failed",
        }
    }
}

/// One row of the cooldown table, keyed by URL (FO-D2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CooldownEntry {
    pub(super) kind: CooldownKind,
    pub(super) since: MonoMs,
    pub(super) until: MonoMs,
    /// Set when the exemption was used in the cycle that started at `since` (FO-D4).
    pub(super) exempted_at: Option<MonoMs>,
}

impl CooldownEntry {
    pub fn kind(&self) -> CooldownKind {
        self.kind
    }

    /// When the cycle started.
    pub fn since(&self) -> MonoMs {
        self.since
    }

    /// When the URL stops cooling.
    pub fn until(&self) -> MonoMs {
        self.until
    }

    /// When the exemption was used in the cycle that started at `since` (FO-D4); an earlier
    /// instant belongs to an earlier cycle.
    pub fn exempted_at(&self) -> Option<MonoMs> {
        self.exempted_at
    }

    pub fn is_cooling(&self, now: MonoMs) -> bool {
        self.until > now
    }

    /// FO-D4: one exemption per URL per cooldown cycle; a cycle starts at `since`.
    pub fn exempted_this_cycle(&self) -> bool {
        self.exempted_at.is_some_and(|at| at >= self.since)
    }
}

/// Which of the two paths asked for a switch (FO-D1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// The periodic tick found the current channel unhealthy (or no channel at all).
    Health,
    /// The directory refresh found a different first candidate. Never exempt from cooldown.
    Directory,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Health => "health",
            Origin::Directory => "directory",
        }
    }
}

/// Where the candidate list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectorySource {
    /// A freshly fetched, verified signed directory.
    Signed,
    /// The last good signed directory, from the local cache.
    Cache,
    /// Pinned by `DSHS_RELAY_URL` / `--url`: the list is that one URL.
    Env,
}

impl DirectorySource {
    pub fn as_str(self) -> &'static str {
        match self {
            DirectorySource::Signed => "signed",
            DirectorySource::Cache => "cache",
            DirectorySource::Env => "env",
        }
    }
}

/// The health numbers behind a decision, as an operator needs them in the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HealthSnapshot {
    /// `None` when there is no channel at all.
    pub state: Option<ChannelState>,
    pub unhealthy_for_ms: u64,
    pub min_attempts: u32,
    pub grace_ms: u64,
}

/// Why a switch was asked for. Structured so nothing ever parses the rendered text (FO-D2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "kebab-case")]
pub enum SwitchReason {
    /// Health path: the current channel is unhealthy, or there is none.
    Unhealthy { health: HealthSnapshot },
    /// Directory path: the first candidate differs from the current URL.
    DirectoryChanged { source: DirectorySource },
}

/// The exemption a switch used (FO-D6): the target's cooldown kind and how much was left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Exemption {
    pub kind: CooldownKind,
    pub remaining_ms: u64,
}

/// How an open attempt failed, as the adapter observed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenFailure {
    /// Refused, reset, handshake rejected: failed before the timeout.
    Failed,
    /// Not up within `UP_TIMEOUT_MS`.
    TimedOut,
}

/// Something the adapter must do to a channel: open one, close one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum ChannelAction {
    /// Open a new channel to `url`, giving up after `timeout_ms`; report the result with
    /// `handle_open_succeeded` / `handle_open_failed`. The old channel stays up meanwhile.
    Open {
        url: RelayUrl,
        timeout_ms: u64,
        exempt: bool,
        /// FO-X3: a probe of a cooling candidate after the exemption budget is spent.
        probe: bool,
    },
    /// Close the channel to `url` (the old one, after the new one is up: make-before-break).
    Close { url: RelayUrl },
}

/// A completed switch: one `[relay-switch]` line, one increment of `switches` (FO-D7).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SwitchRecord {
    /// `switches` after this switch: the `#n` of the log line.
    pub seq: u64,
    pub from: RelayUrl,
    pub to: RelayUrl,
    pub origin: Origin,
    pub reason: SwitchReason,
    /// How long `from` now stays in cooldown.
    pub cooldown_ms: u64,
    pub exemption: Option<Exemption>,
    /// FO-X3: the switch came from a probe.
    pub probe: bool,
    /// From the decision to the new channel being up.
    pub open_took_ms: u64,
}

/// Why something that could have happened did not. Each renders as a `[relay-skip]` line.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "skip", rename_all = "kebab-case")]
pub enum Skip {
    /// FO-D1: the target is cooling and the directory path has no exemption.
    StillCooling {
        url: RelayUrl,
        origin: Origin,
        left_ms: u64,
        of_ms: u64,
    },
    /// FO-D6: unhealthy, no clean candidate, nothing to exempt. Throttled to one per `GRACE_MS`.
    NoCandidate {
        health: HealthSnapshot,
        candidates: usize,
        excluded: usize,
        exempt_enabled: bool,
        /// FO-X3: when the next probe round is due (`None`: probing off or not yet scheduled).
        next_probe_in_ms: Option<u64>,
    },
    /// The new channel did not come up; the old one (if any) is kept and the target cools.
    OpenFailed {
        url: RelayUrl,
        failure: OpenFailure,
        exempt: bool,
        /// OPS-2: there is an old channel to keep (not at start, before the first attach).
        kept_channel: bool,
        /// FO-X3: a failed probe changes only the probe schedule, not the cooldown table.
        probe: bool,
        cooldown_ms: u64,
    },
    /// FO-X3: a probe round ended with every probed candidate failed; the next one is due at
    /// `next_round_at`. One line per round, so a fully dead pool logs at the probe interval.
    ProbeRoundFailed {
        probed: usize,
        next_round_at: MonoMs,
        interval_ms: u64,
    },
    /// A second switch request while an open is in flight: refused, the first one continues.
    OpenInFlight {
        requested: RelayUrl,
        in_flight: RelayUrl,
    },
    /// FO-R5a: an open whose URL left the list while it was in flight succeeded; it is closed
    /// and never becomes the channel.
    NotInList { url: RelayUrl, origin: Origin },
    /// The directory update was unusable; the last good list is kept.
    DirectoryRejected { why: DirectoryRejection },
}

/// EXPLAIN-1: a `[relay-skip]` no-candidate line names at most this many excluded URLs (the
/// first in list order) and counts the rest.
pub const MAX_EXPLAINED_EXCLUSIONS: usize = 8;

/// EXPLAIN-1: why the listed URLs are not candidates of the health chain at an instant
/// ([`Supervisor::exclusions`](super::Supervisor::exclusions)): the first
/// [`MAX_EXPLAINED_EXCLUSIONS`] excluded URLs in list order, and how many more are excluded.
/// Bounded, so the line that prints it does not grow with the list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Exclusions {
    pub named: Vec<Exclusion>,
    pub more: usize,
}

/// EXPLAIN-1: one listed URL the health path could not open, and the rule that excluded it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Exclusion {
    pub url: RelayUrl,
    pub rule: ExclusionRule,
}

/// EXPLAIN-1: the rule that kept a listed URL out of the health chain, decided by the core (the
/// last bar it met: a cooling URL with its exemption spent and probing on is excluded by the
/// probe schedule). `kind` and `left_ms` are its cooldown entry's kind and time left. There is
/// no "passed over" rule (FO-X2): the line comes from a tick, and a tick starts a new round of
/// the passed-over set, so a URL that is not cooling is opened, never excluded. Nor
/// "unlisted": the line explains the listed URLs (an open is never started on another, FO-R5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum ExclusionRule {
    /// The current channel: never its own candidate.
    Current,
    /// FO-D2 / FO-D6-OFF: cooling, and the exemption is off.
    Cooling { kind: CooldownKind, left_ms: u64 },
    /// FO-D4: cooling, and its one exemption of this cooldown cycle was used (probing off).
    ExemptionSpent { kind: CooldownKind, left_ms: u64 },
    /// FO-X3: cooling, exemption spent, and the next probe round is not due yet.
    ProbeNotDue {
        kind: CooldownKind,
        left_ms: u64,
        next_round_in_ms: u64,
    },
    /// FO-X3: cooling, exemption spent, and already probed (and failed) in the round under way
    /// (or by a probe whose answer came after the schedule was reset).
    ProbedThisRound { kind: CooldownKind, left_ms: u64 },
}

impl ExclusionRule {
    /// The rule's name as the `[relay-skip]` line prints it.
    pub fn name(&self) -> &'static str {
        match self {
            ExclusionRule::Current => "current",
            ExclusionRule::Cooling { .. } => "cooling",
            ExclusionRule::ExemptionSpent { .. } => "exemption-spent",
            ExclusionRule::ProbeNotDue { .. } => "probe-not-due",
            ExclusionRule::ProbedThisRound { .. } => "probed-this-round",
        }
    }
}

/// Why a directory update was refused by the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectoryRejection {
    Empty,
    TooMany { count: usize, max: usize },
}

/// A decision the operator should see.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    Switched(SwitchRecord),
    /// The first channel (there was none before): not a switch, not counted.
    Attached {
        url: RelayUrl,
        origin: Origin,
    },
    Skipped(Skip),
}

/// What the machine hands back: actions to execute and events to log, in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Output {
    Action(ChannelAction),
    Event(Event),
}

/// FO-D7: the failover counters (the cooldown list is beside them in [`Stats`]). Counters only
/// ever grow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FailoverCounters {
    pub switches: u64,
    pub exempt_switches: u64,
    pub open_failed: u64,
    pub no_candidate_checks: u64,
    /// FO-X3: probe opens started, and the switches they led to (also counted in `switches`).
    pub probe_opens: u64,
    pub probe_switches: u64,
}

/// One row of the cooldown list in [`Stats`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CooldownView {
    pub url: RelayUrl,
    pub kind: CooldownKind,
    pub until: MonoMs,
    pub left_ms: u64,
    pub exempted_this_cycle: bool,
}

/// FO-D7: what `stats()` returns. Readable only through the library API (FO-D11).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stats {
    pub counters: FailoverCounters,
    pub current: Option<RelayUrl>,
    pub cooldown: Vec<CooldownView>,
}

/// What a directory update led to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectoryOutcome {
    /// The list was taken; the first candidate is the current channel (or is being opened).
    Unchanged,
    /// The list was taken and an open of the new first candidate was started.
    Opening,
    /// The list was taken but the directory path may not switch now (see the `Skipped` event).
    Refused,
    /// The list was not taken (see the `Skipped` event); the last good list stays.
    Rejected,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, RandomState};

    #[test]
    fn a_static_url_is_the_same_url_as_a_shared_one_with_the_same_string() {
        let shared = RelayUrl::new("wss://a.example/relay");
        let fixed = RelayUrl::from_static("wss://a.example/relay");
        let other = RelayUrl::from_static("wss://b.example/relay");
        assert_eq!(shared, fixed);
        assert_eq!(fixed.clone(), shared.clone());
        assert_ne!(fixed, other);
        assert!(shared < other && fixed < other);
        assert_eq!(shared.cmp(&fixed), std::cmp::Ordering::Equal);
        let hasher = RandomState::new();
        assert_eq!(hasher.hash_one(&shared), hasher.hash_one(&fixed));
        // Hashed as the string itself: the model checker's fingerprints did not change.
        assert_eq!(
            hasher.hash_one(&fixed),
            hasher.hash_one("wss://a.example/relay")
        );
        assert_eq!(format!("{fixed:?}"), format!("{shared:?}"));
        assert_eq!(format!("{fixed:?}"), r#"RelayUrl("wss://a.example/relay")"#);
        assert_eq!(fixed.to_string(), "wss://a.example/relay");
    }

    #[test]
    fn fo_x4_a_urls_host_is_its_authority_without_user_or_port() {
        let host = |u: &str| RelayUrl::new(u).host().to_owned();
        assert_eq!(host("wss://relay-a:8443/r"), "relay-a");
        assert_eq!(host("wss://relay-a/alt?x=1"), "relay-a");
        assert_eq!(host("ws://127.0.0.2:4000/a1"), "127.0.0.2");
        assert_eq!(host("wss://user:pw@relay-b.example:443"), "relay-b.example");
        assert_eq!(host("wss://[::1]:9000/r"), "[::1]");
        assert_eq!(host("wss://a/1"), "a");
        assert_eq!(host("wss://a1"), "a1");
        assert_eq!(host("wss://h#frag"), "h");
        assert_eq!(host("not a url"), "not a url");
        assert_eq!(host("wss://"), "");
    }

    #[test]
    fn a_url_serialises_as_its_string_and_reads_back_equal() {
        let fixed = RelayUrl::from_static("wss://a.example/relay");
        let json = serde_json::to_string(&fixed).expect("serialises");
        assert_eq!(json, r#""wss://a.example/relay""#);
        let back: RelayUrl = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, fixed);
        let escaped: RelayUrl =
            serde_json::from_str(r#""wss://a.example/r\u0065lay""#).expect("parses");
        assert_eq!(escaped, fixed);
        assert!(serde_json::from_str::<RelayUrl>("7").is_err());
    }
}

//! What a trace records after each step (the projection), and how actions and hosts are
//! named in traces.

use std::fmt;

use super::*;

/// What a trace records after each step, and what a replay must reproduce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoProjection {
    pub now_ms: u64,
    pub host_up: Vec<bool>,
    pub current: Option<String>,
    pub opening: Option<(String, bool)>,
    pub counters: FailoverCounters,
    pub cooldown: Vec<(String, CooldownKind, u64)>,
}

impl FoState {
    pub fn project(&self) -> FoProjection {
        FoProjection {
            now_ms: self.now.as_ms(),
            host_up: self.host_up.to_vec(),
            current: self.sup.current().map(|u| u.to_string()),
            opening: self
                .sup
                .open_in_flight()
                .map(|o| (o.url().to_string(), o.exemption().is_some())),
            counters: self.sup.counters(),
            cooldown: self
                .sup
                .stats(self.now)
                .cooldown
                .into_iter()
                .map(|c| (c.url.to_string(), c.kind, c.until.as_ms()))
                .collect(),
        }
    }
}

impl fmt::Display for FoAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoAction::Tick => write!(f, "tick"),
            FoAction::LateTick => write!(f, "a late tick ({MODEL_TICK_LATENESS_MS} ms late)"),
            FoAction::HostDown { host } => write!(f, "host {} goes down", host_name(*host)),
            FoAction::HostUp { host } => write!(f, "host {} comes back", host_name(*host)),
            FoAction::OpenSucceeds => write!(f, "the open succeeds"),
            FoAction::OpenFails => write!(f, "the open fails"),
            FoAction::OpenTimesOut => write!(f, "the open times out"),
            FoAction::Directory { list } => write!(f, "directory update with list #{list}"),
            FoAction::SignedDirectory { list, signing } => {
                let how = match signing {
                    Signing::SameSequence => "the same sequence",
                    Signing::Replayed => "a lower sequence and a later expiry",
                    Signing::Expired => "the next sequence, expired",
                };
                write!(f, "directory update with list #{list}, signed with {how}")
            }
            FoAction::ChannelReport { report } => match report {
                Report::Healthy => write!(f, "the channel reports healthy"),
                Report::Backoff { attempts } => {
                    write!(f, "the channel reports backoff, {attempts} attempts")
                }
            },
            FoAction::OddTime { offset_ms } => {
                write!(
                    f,
                    "time steps to {offset_ms:+} ms around the next threshold"
                )
            }
        }
    }
}

pub fn host_name(host: u8) -> char {
    char::from(b'a' + host)
}

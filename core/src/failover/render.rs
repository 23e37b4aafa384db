//! Events rendered as the production log lines (FO-D7).
//!
//! Operators' scripts grep the prefixes and the exemption marker: they are verbatim from
//! production. The rest of the wording is English.

use std::fmt::Write;

use super::machine::Supervisor;
use super::types::*;
use crate::MonoMs;

pub const SWITCH_PREFIX: &str = "[relay-switch]";
pub const SKIP_PREFIX: &str = "[relay-skip]";
pub const ATTACH_PREFIX: &str = "[relay-attach]";
/// Ends every exempt `[relay-switch]` line: `｜豁免 kind=<kind> 剩 <ms>ms` ("exempt, kind, left").
pub const EXEMPT_MARKER: &str = "｜豁免";

/// The log line for an event. Exactly the `Switched` events start with [`SWITCH_PREFIX`].
pub fn render(event: &Event) -> String {
    let mut line = String::new();
    // Writing into a String cannot fail.
    let _ = write_event(&mut line, event);
    line
}

/// EXPLAIN-1: the log line for an event just drained from `sup`, decided at `now` (before the
/// next input): [`render`], and a no-candidate line followed by its per-URL explanation
/// ([`Supervisor::exclusions`]), `; excluded: URL (rule: details), …` with at most
/// [`MAX_EXPLAINED_EXCLUSIONS`] URLs and `, and N more`. Every other event renders as `render`.
pub fn render_explained(event: &Event, sup: &Supervisor, now: MonoMs) -> String {
    let mut line = render(event);
    if let Event::Skipped(Skip::NoCandidate { .. }) = event {
        let exclusions = sup.exclusions(now);
        // Writing into a String cannot fail.
        let _ = write_exclusions(&mut line, &exclusions.named, exclusions.more);
    }
    line
}

/// `render(event).starts_with(prefix)`, without building the line: the writer stops at the
/// first byte that decides. (The model checker asks it of every event of every state.)
pub fn renders_with_prefix(event: &Event, prefix: &str) -> bool {
    let mut check = PrefixCheck {
        rest: prefix.as_bytes(),
        differs: false,
    };
    // An `Err` here is the writer stopping early, not a failure.
    let _ = write_event(&mut check, event);
    !check.differs && check.rest.is_empty()
}

/// Compares what is written against the part of a prefix not yet matched; stops the writing
/// (`Err`) once the answer is known.
struct PrefixCheck<'a> {
    rest: &'a [u8],
    differs: bool,
}

impl Write for PrefixCheck<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.rest.len());
        if s.as_bytes()[..n] != self.rest[..n] {
            self.differs = true;
            return Err(std::fmt::Error);
        }
        self.rest = &self.rest[n..];
        if self.rest.is_empty() {
            return Err(std::fmt::Error);
        }
        Ok(())
    }
}

fn write_event(out: &mut impl Write, event: &Event) -> std::fmt::Result {
    match event {
        Event::Switched(record) => {
            write!(
                out,
                "{SWITCH_PREFIX} #{} {} -> {} (reason: ",
                record.seq, record.from, record.to
            )?;
            write_reason(out, &record.reason)?;
            if record.exemption.is_some() {
                out.write_str("; pool drained by cooldown: one-hop exemption, once per url per cooldown cycle")?;
            }
            if record.probe {
                out.write_str("; exemption budget spent: bounded-recovery probe")?;
            }
            write!(
                out,
                "; cooldown {} until +{} ms)",
                record.from, record.cooldown_ms
            )?;
            if let Some(exemption) = record.exemption {
                write!(
                    out,
                    "{EXEMPT_MARKER} kind={} 剩 {}ms",
                    exemption.kind.as_str(),
                    exemption.remaining_ms
                )?;
            }
        }
        Event::Attached { url, origin } => {
            write!(
                out,
                "{ATTACH_PREFIX} {url} (first channel, {} path)",
                origin.as_str()
            )?;
        }
        Event::Skipped(skip) => {
            write!(out, "{SKIP_PREFIX} ")?;
            write_skip(out, skip)?;
        }
    }
    Ok(())
}

fn write_reason(out: &mut impl Write, reason: &SwitchReason) -> std::fmt::Result {
    match reason {
        SwitchReason::Unhealthy { health } => {
            match health.state {
                None => out.write_str("no channel")?,
                Some(_) => out.write_str("current channel unhealthy")?,
            }
            write_health(out, health)
        }
        SwitchReason::DirectoryChanged { source } => {
            write!(
                out,
                "directory address changed (source={})",
                source.as_str()
            )
        }
    }
}

fn write_health(out: &mut impl Write, health: &HealthSnapshot) -> std::fmt::Result {
    match health.state {
        Some(ChannelState::Backoff { attempts }) => write!(
            out,
            " (state=backoff attempts={attempts} unhealthy_for_ms={} >= thresholds min_attempts={}/grace_ms={})",
            health.unhealthy_for_ms, health.min_attempts, health.grace_ms
        ),
        Some(ChannelState::Healthy) => write!(out, " (state=healthy)"),
        None => write!(
            out,
            " (thresholds min_attempts={}/grace_ms={})",
            health.min_attempts, health.grace_ms
        ),
    }
}

fn write_skip(out: &mut impl Write, skip: &Skip) -> std::fmt::Result {
    match skip {
        Skip::StillCooling {
            url,
            origin,
            left_ms,
            of_ms,
        } => write!(
            out,
            "{} path: {url} still cooling, {left_ms} ms left of {of_ms} ms: not switching",
            origin.as_str()
        ),
        Skip::NoCandidate {
            health,
            candidates,
            excluded,
            exempt_enabled,
            next_probe_in_ms,
        } => {
            out.write_str(match health.state {
                None => "no channel",
                Some(_) => "current channel unhealthy",
            })?;
            write_health(out, health)?;
            write!(
                out,
                " but no other candidate in the chain ({candidates} candidates, {excluded} excluded; exemption {}): staying in backoff (no switch to nothing, no fallback to a default host)",
                if *exempt_enabled { "spent" } else { "off" }
            )?;
            if let Some(in_ms) = next_probe_in_ms {
                write!(out, "; next probe round in {in_ms} ms")?;
            }
            Ok(())
        }
        Skip::OpenFailed {
            url,
            failure,
            exempt,
            kept_channel,
            probe,
            cooldown_ms,
        } => {
            let how = match failure {
                OpenFailure::Failed => "failed",
                OpenFailure::TimedOut => "timed out",
            };
            let kept = if *kept_channel {
                "keeping the old channel"
            } else {
                "no channel yet"
            };
            if *probe {
                return write!(
                    out,
                    "probe did not come up ({url}, {how}): {kept}; {url} keeps its cooldown"
                );
            }
            let what = if *exempt { "exempt open" } else { "new channel" };
            write!(
                out,
                "{what} did not come up ({url}, {how}): {kept}; {url} cools {cooldown_ms} ms"
            )?;
            if *exempt {
                out.write_str(" and gets no further exemption this cycle")?;
            }
            Ok(())
        }
        Skip::ProbeRoundFailed {
            probed,
            next_round_at: _,
            interval_ms,
        } => write!(
            out,
            "probe round failed ({probed} cooling candidates probed, none came up): next round in {interval_ms} ms"
        ),
        Skip::OpenInFlight {
            requested,
            in_flight,
        } => write!(
            out,
            "switch to {requested} refused: an open of {in_flight} is in flight"
        ),
        Skip::NotInList { url, origin } => write!(
            out,
            "{} path: {url} left the signed candidate list while its open was in flight: closed, never adopted (FO-R5a)",
            origin.as_str()
        ),
        Skip::DirectoryRejected { why } => match why {
            DirectoryRejection::Empty => {
                out.write_str("directory update rejected (empty list): keeping the last good list")
            }
            DirectoryRejection::TooMany { count, max } => write!(
                out,
                "directory update rejected ({count} candidates, at most {max}): keeping the last good list"
            ),
        },
    }
}

/// EXPLAIN-1: `; excluded: <url> (<rule>[: details]), ... and N more`: at most
/// [`MAX_EXPLAINED_EXCLUSIONS`] URLs, whatever the length of the list.
fn write_exclusions(
    out: &mut impl Write,
    exclusions: &[Exclusion],
    more: usize,
) -> std::fmt::Result {
    if exclusions.is_empty() && more == 0 {
        return Ok(());
    }
    out.write_str("; excluded:")?;
    for (i, exclusion) in exclusions.iter().enumerate() {
        let sep = if i == 0 { " " } else { ", " };
        write!(out, "{sep}{} ({}", exclusion.url, exclusion.rule.name())?;
        match exclusion.rule {
            ExclusionRule::Current => out.write_str(": the current channel")?,
            ExclusionRule::Cooling { kind, left_ms } => write!(
                out,
                ": {} {left_ms} ms left, exemption off",
                kind.as_str()
            )?,
            ExclusionRule::ExemptionSpent { kind, left_ms } => write!(
                out,
                ": {} {left_ms} ms left, exempted this cooldown cycle",
                kind.as_str()
            )?,
            ExclusionRule::ProbeNotDue {
                kind,
                left_ms,
                next_round_in_ms,
            } => write!(
                out,
                ": {} {left_ms} ms left, exemption spent, next probe round in {next_round_in_ms} ms",
                kind.as_str()
            )?,
            ExclusionRule::ProbedThisRound { kind, left_ms } => write!(
                out,
                ": {} {left_ms} ms left, exemption spent, probed this round",
                kind.as_str()
            )?,
        }
        out.write_str(")")?;
    }
    if more > 0 {
        let sep = if exclusions.is_empty() { " " } else { ", " };
        write!(out, "{sep}and {more} more")?;
    }
    Ok(())
}

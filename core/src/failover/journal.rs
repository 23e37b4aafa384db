//! The failover client's journal records (CONF-1): every input the driver gave the
//! [`Supervisor`](super::Supervisor), every output it polled, and what the driver did with them.

use serde::{Deserialize, Serialize};

use super::config::Thresholds;
use super::types::{ChannelState, DirectorySource, OpenFailure, Output, RelayUrl};

/// One failover journal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailoverRecord {
    /// The supervisor was created with these thresholds (the first record of a journal; a
    /// second one is a restart, FO-D10: the cooldown table starts empty).
    Start { thresholds: Thresholds },
    /// An input, given at the line's `at_ms`.
    Input(FailoverInput),
    /// An output the supervisor decided on the last input, in `poll_output` order.
    Output(Output),
    /// What the driver did.
    Effect(FailoverEffect),
}

/// An input of the supervisor, one per `handle_*` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailoverInput {
    /// `set_probe_jitter_ms(jitter_ms)` then `handle_tick`.
    Tick {
        jitter_ms: u64,
    },
    Directory {
        urls: Vec<RelayUrl>,
        source: DirectorySource,
    },
    ChannelState {
        url: RelayUrl,
        state: ChannelState,
    },
    OpenSucceeded {
        url: RelayUrl,
    },
    OpenFailed {
        url: RelayUrl,
        failure: OpenFailure,
    },
}

/// What the driver did to a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailoverEffect {
    /// An open of `url` was started.
    OpenStarted { url: RelayUrl },
    /// The channel to `url` now carries the client's traffic.
    Adopted { url: RelayUrl },
    /// The channel to `url` was closed.
    Closed { url: RelayUrl },
}

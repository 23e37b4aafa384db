//! The cell's and the director's journal records (CONF-1).

use serde::{Deserialize, Serialize};

/// One source cell journal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellRecord {
    /// The cell started (a second one is a restart).
    Start,
}

/// One director journal record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirectorRecord {
    /// The director started.
    Start,
}

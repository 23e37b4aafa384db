//! Identities: cells, hosts, the exact source authority, and the operation id (HO-S1).

use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};
use uuid::Uuid;

/// A relay cell (region). Integers, not strings: the model checker hashes these.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct CellId(pub u32);

/// A desktop host. The adapter maps the production host id onto this integer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct HostId(pub u64);

/// Assignment epoch of a host: bumped by every committed move.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Epoch(pub u64);

/// Process incarnation of the cell that owns the host's control (bumped by a cell restart).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Incarnation(pub u64);

/// Control-session generation of a host: bumped by every registration (replacement control,
/// source restart, target registration) and by an emergency-drain fence.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Generation(pub u64);

impl Epoch {
    #[must_use]
    pub fn next(self) -> Epoch {
        crate::invariant!(self.0 < u64::MAX, "epoch overflow");
        Epoch(self.0.saturating_add(1))
    }
}

impl Generation {
    #[must_use]
    pub fn next(self) -> Generation {
        crate::invariant!(self.0 < u64::MAX, "generation overflow");
        Generation(self.0.saturating_add(1))
    }
}

/// The exact source authority a handoff is about (HO-S1, HO-S4): the host, the cell that
/// holds it, and the three fencing counters. A handoff commits only if all five still match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceAuthority {
    pub cell: CellId,
    pub host: HostId,
    pub epoch: Epoch,
    pub incarnation: Incarnation,
    pub generation: Generation,
}

/// Which field of an authority differs (first difference in check order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AuthorityField {
    Host,
    Cell,
    Epoch,
    Incarnation,
    Generation,
}

/// Result of comparing a claimed authority against the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AuthorityCheck {
    Exact,
    /// The claim is older than the current authority (an older epoch, incarnation or
    /// generation): answered `Superseded`, never treated as a duplicate.
    Superseded(AuthorityField),
    /// The claim names another host or cell, or is newer than what we hold.
    Mismatch(AuthorityField),
}

impl SourceAuthority {
    /// Compare `self` (a claim) against `current`. Epoch is checked before the cell so that a
    /// request from before a committed move reads as `Superseded`, not as a cell mismatch.
    #[must_use]
    pub fn check_against(&self, current: &SourceAuthority) -> AuthorityCheck {
        use std::cmp::Ordering::{Equal, Greater, Less};
        if self.host != current.host {
            return AuthorityCheck::Mismatch(AuthorityField::Host);
        }
        match self.epoch.cmp(&current.epoch) {
            Less => return AuthorityCheck::Superseded(AuthorityField::Epoch),
            Greater => return AuthorityCheck::Mismatch(AuthorityField::Epoch),
            Equal => {}
        }
        if self.cell != current.cell {
            return AuthorityCheck::Mismatch(AuthorityField::Cell);
        }
        match self.incarnation.cmp(&current.incarnation) {
            Less => return AuthorityCheck::Superseded(AuthorityField::Incarnation),
            Greater => return AuthorityCheck::Mismatch(AuthorityField::Incarnation),
            Equal => {}
        }
        match self.generation.cmp(&current.generation) {
            Less => AuthorityCheck::Superseded(AuthorityField::Generation),
            Greater => AuthorityCheck::Mismatch(AuthorityField::Generation),
            Equal => AuthorityCheck::Exact,
        }
    }
}

/// HO-S1: fixed namespace of handoff operation ids. Never change it: ids derived by an old
/// director must equal ids derived by a new one.
pub const OP_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6a1d_4f0e_9b7c_4c55_8e2a_5d3b_1f60_c0de);

/// Version byte of the UUIDv5 name layout (so a future layout cannot collide with this one).
const OP_ID_LAYOUT_V1: u8 = 1;
const OP_ID_NAME_LEN: usize = 1 + 4 + 8 + 8 + 8 + 8 + 4;

/// HO-S1 / HO-A1: the stable operation id of one handoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OpId(pub Uuid);

impl OpId {
    /// HO-S1: UUIDv5 over the exact source authority (cell, host, epoch, incarnation,
    /// generation) and the target cell. Director retries and restarts derive the same id; a
    /// later legitimate move (any authority field changed) derives a new one.
    ///
    /// Name layout (big-endian): `[1u8, cell u32, host u64, epoch u64, incarnation u64,
    /// generation u64, target u32]`.
    #[must_use]
    pub fn derive(source: &SourceAuthority, target: CellId) -> OpId {
        let mut name = [0u8; OP_ID_NAME_LEN];
        name[0] = OP_ID_LAYOUT_V1;
        name[1..5].copy_from_slice(&source.cell.0.to_be_bytes());
        name[5..13].copy_from_slice(&source.host.0.to_be_bytes());
        name[13..21].copy_from_slice(&source.epoch.0.to_be_bytes());
        name[21..29].copy_from_slice(&source.incarnation.0.to_be_bytes());
        name[29..37].copy_from_slice(&source.generation.0.to_be_bytes());
        name[37..41].copy_from_slice(&target.0.to_be_bytes());
        // `Uuid::new_v5`, computed with `sha1` (hardware SHA extensions where the CPU has
        // them; uuid's own SHA-1 is portable code): the source re-derives the id of every
        // request it gets. `ho_s1_op_id_is_exactly_uuid_v5` holds the two equal.
        let digest = Sha1::new()
            .chain_update(OP_ID_NAMESPACE.as_bytes())
            .chain_update(name)
            .finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        OpId(uuid::Builder::from_sha1_bytes(bytes).into_uuid())
    }
}

impl std::fmt::Display for OpId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

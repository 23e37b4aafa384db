//! HO-A4 / SCALE-1: enrolment of an unknown host at the cell its desktop registers at, decided
//! here once; the cell only runs the store calls it asks for. A registration is one store call,
//! or, for an unknown host at a cell that enrols (`enrol_unknown_hosts`), three: register
//! (`UnknownHost`), insert the host at this cell, register again. Two desktops of one host may
//! run them interleaved, at one cell or at two: the insert of the one that comes second finds
//! the host (`HostExists`) and is not a refusal, it registers again (and at the other cell is
//! sent where the host is, `NotAssignedHere`). The second registration never asks to enrol
//! again, so no loop. `spec/src/enrol.rs` checks it with the reference store.

use serde::{Deserialize, Serialize};

use super::cell::{close_code, enrol_turn_away, register_turn_away, TurnAway, TurnAwayFrame};
use super::ids::SourceAuthority;
use super::store::{RegisterRefusal, StoreError};

/// Which registration of a desktop's session a store answer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegisterTry {
    /// The desktop's registration as it arrived.
    First,
    /// After this cell enrolled the host (or found it enrolled by another registration).
    AfterEnrolment,
}

/// SCALE-1: why an unknown host was not enrolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnrolRefusal {
    /// The cell does not enrol unknown hosts (`--enrol-unknown-hosts false`): hosts are
    /// provisioned ahead, and a desktop of a host the store does not know is refused.
    Disabled,
    /// The store refused the insert: `TooManyHosts` (the bound is reached), `UnknownCell`, …
    /// (never `HostExists`: that is a registration again).
    Store(StoreError),
}

impl EnrolRefusal {
    /// Stable name on the wire, in the cell's logs and its stats.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            EnrolRefusal::Disabled => "enrolment_disabled",
            EnrolRefusal::Store(e) => enrol_turn_away(e).name,
        }
    }

    /// What the desktop is told: a named, paced retry where it is (an operator may provision
    /// the host or raise the bound; the database is fine, so never `store_unavailable`).
    #[must_use]
    pub fn turn_away(self) -> TurnAway {
        match self {
            EnrolRefusal::Disabled => TurnAway {
                name: self.name(),
                frame: TurnAwayFrame::Retry,
                close_code: close_code::TRY_AGAIN,
            },
            EnrolRefusal::Store(e) => enrol_turn_away(e),
        }
    }
}

/// How a desktop's registration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Registered {
    Yes(SourceAuthority),
    /// HO-A4: the store refused the registration (e.g. the host is assigned elsewhere).
    Refused(RegisterRefusal),
    /// SCALE-1: the unknown host was not enrolled.
    NotEnrolled(EnrolRefusal),
}

impl Registered {
    /// What a desktop turned away is told (`None`: registered).
    #[must_use]
    pub fn turn_away(self) -> Option<TurnAway> {
        match self {
            Registered::Yes(_) => None,
            Registered::Refused(r) => Some(register_turn_away(r)),
            Registered::NotEnrolled(r) => Some(r.turn_away()),
        }
    }
}

/// The store call the cell runs next, or the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegistrationStep {
    /// Insert the host at this cell (`insert_host`), then feed the answer to [`after_insert`].
    InsertHost,
    /// Register again (`register_control`), then feed the answer to [`after_register`] with
    /// [`RegisterTry::AfterEnrolment`].
    RegisterAgain,
    Done(Registered),
}

/// HO-A4 / SCALE-1: a registration's answer. An unknown host at its first try is enrolled
/// here if the cell enrols, else refused `enrolment_disabled` (nothing is written); after an
/// enrolment every answer ends the registration.
#[must_use]
pub fn after_register(
    enrol_unknown_hosts: bool,
    attempt: RegisterTry,
    answer: Result<SourceAuthority, RegisterRefusal>,
) -> RegistrationStep {
    match (answer, attempt) {
        (Ok(authority), _) => RegistrationStep::Done(Registered::Yes(authority)),
        (Err(RegisterRefusal::UnknownHost), RegisterTry::First) if enrol_unknown_hosts => {
            RegistrationStep::InsertHost
        }
        (Err(RegisterRefusal::UnknownHost), RegisterTry::First) => {
            RegistrationStep::Done(Registered::NotEnrolled(EnrolRefusal::Disabled))
        }
        (Err(refusal), _) => RegistrationStep::Done(Registered::Refused(refusal)),
    }
}

/// SCALE-1: the insert's answer. Inserted, or inserted first by another registration of the
/// host (`HostExists`): register again. Any other refusal (a bound) ends the registration.
#[must_use]
pub fn after_insert(answer: Result<SourceAuthority, StoreError>) -> RegistrationStep {
    match answer {
        Ok(_) | Err(StoreError::HostExists) => RegistrationStep::RegisterAgain,
        Err(refusal) => {
            RegistrationStep::Done(Registered::NotEnrolled(EnrolRefusal::Store(refusal)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::ids::{CellId, Epoch, Generation, HostId, Incarnation};

    fn authority() -> SourceAuthority {
        SourceAuthority {
            host: HostId(7),
            cell: CellId(1),
            epoch: Epoch(1),
            incarnation: Incarnation(1),
            generation: Generation(2),
        }
    }

    #[test]
    fn ho_a4_scale_1_an_unknown_host_is_enrolled_only_where_the_cell_enrols() {
        let unknown = Err(RegisterRefusal::UnknownHost);
        assert_eq!(
            after_register(true, RegisterTry::First, unknown),
            RegistrationStep::InsertHost
        );
        let off = after_register(false, RegisterTry::First, unknown);
        assert_eq!(
            off,
            RegistrationStep::Done(Registered::NotEnrolled(EnrolRefusal::Disabled))
        );
        let RegistrationStep::Done(off) = off else {
            unreachable!()
        };
        let t = off.turn_away().expect("turned away");
        assert_eq!(
            (t.name, t.frame, t.close_code),
            (
                "enrolment_disabled",
                TurnAwayFrame::Retry,
                close_code::TRY_AGAIN
            )
        );
        // After an enrolment, an unknown host again is a refusal, never a second enrolment.
        assert_eq!(
            after_register(true, RegisterTry::AfterEnrolment, unknown),
            RegistrationStep::Done(Registered::Refused(RegisterRefusal::UnknownHost))
        );
        assert_eq!(
            after_register(false, RegisterTry::First, Ok(authority())),
            RegistrationStep::Done(Registered::Yes(authority()))
        );
    }

    #[test]
    fn scale_1_an_insert_that_finds_the_host_registers_again_and_a_bound_is_named() {
        assert_eq!(
            after_insert(Ok(authority())),
            RegistrationStep::RegisterAgain
        );
        assert_eq!(
            after_insert(Err(StoreError::HostExists)),
            RegistrationStep::RegisterAgain
        );
        let full = after_insert(Err(StoreError::TooManyHosts));
        assert_eq!(
            full,
            RegistrationStep::Done(Registered::NotEnrolled(EnrolRefusal::Store(
                StoreError::TooManyHosts
            )))
        );
        assert_eq!(
            EnrolRefusal::Store(StoreError::TooManyHosts).name(),
            "too_many_hosts"
        );
    }
}

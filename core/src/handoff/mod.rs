//! Idle handoff (HO). See `../shared/REQUIREMENTS.md` part HO.

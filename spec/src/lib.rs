//! The formal specification of Switchyard: stateright models that drive the real
//! `switchyard-core` machines, with one property per requirement ID.
//!
//! A model's actions are the core's inputs plus "time advances"; its state embeds the core's
//! state. Nothing here re-implements a decision: the core decides, the model explores every
//! interleaving of the environment around it, and the properties judge.

pub mod caught;
pub mod conform;
pub mod dispatch;
pub mod enrol;
pub mod failover;
pub mod failover_oracle;
pub mod halt;
pub mod handoff;
pub mod lease;
pub mod seed_lines;
pub mod share;
pub mod store_calls;
pub mod store_race;
pub mod sweep;
pub mod trace;

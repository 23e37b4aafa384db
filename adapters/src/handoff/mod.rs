//! Idle handoff over real sockets and a real database (see `docs/HANDOFF.md`).
//!
//! - [`store`]: the SQL assignment store (PostgreSQL, embedded SQLite).
//! - [`cell`]: the relay cell (client and desktop WebSockets, internal endpoint).
//! - [`director`]: periodic read-only selection and dispatch.
//! - [`client`]: small desktop and mobile clients (a library driver: tests, benches, and the
//!   `desktop` / `mobile` subcommands of `switchyard-tools`).
//!
//! The adapters decide nothing: admission, attempt outcomes, eligibility and op ids are
//! `switchyard_core::handoff`'s; these modules run its actions and feed results back.

pub mod auth;
pub mod cell;
pub mod client;
pub mod client_auth;
pub mod clock;
pub mod director;
/// Test seams, armable only with the `test-hooks` cargo feature (inert twins otherwise).
pub mod hooks;
pub mod http;
pub mod proto;
pub mod store;

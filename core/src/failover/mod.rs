//! Relay failover (FO).

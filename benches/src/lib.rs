//! Fixtures shared by the benches and the allocation test: machines prepared in the state a
//! measured path starts from.

use switchyard_core::failover::*;
use switchyard_core::MonoMs;

/// A failover supervisor over `n` candidates with about half of them in cooldown, in three
/// starting states.
#[derive(Debug, Clone)]
pub struct TickFixture {
    pub now: MonoMs,
    /// Current channel healthy: the tick has nothing to do.
    pub healthy: Supervisor,
    /// Current channel unhealthy, a clean candidate at the far end of the list.
    pub clean_switch: Supervisor,
    /// Current channel unhealthy, every other candidate cooling: the one-hop exemption.
    pub exemption: Supervisor,
}

fn drain(sup: &mut Supervisor) {
    while sup.poll_output().is_some() {}
}

pub fn urls(n: usize) -> Vec<RelayUrl> {
    (0..n)
        .map(|i| RelayUrl::new(format!("wss://relay-{i:05}.example/dshs-relay")))
        .collect()
}

pub fn tick_fixture(n: usize) -> TickFixture {
    assert!(n >= 3);
    let list = urls(n);
    let mut sup = Supervisor::new(Thresholds::default(), MonoMs::ZERO);
    sup.handle_directory(MonoMs::ZERO, &list, DirectorySource::Signed);
    sup.handle_open_succeeded(MonoMs::ZERO, &list[0]);
    drain(&mut sup);
    // The first half of the candidates fail to open; the chain then lands in the middle.
    let mut now = MonoMs(1_000);
    sup.handle_channel_state(now, &list[0], ChannelState::Backoff { attempts: 3 });
    sup.handle_tick(now);
    drain(&mut sup);
    let middle = n / 2;
    while let Some(open) = sup.open_in_flight().cloned() {
        let index = list.iter().position(|u| u == open.url()).unwrap_or(0);
        if index < middle {
            sup.handle_open_failed(now, open.url(), OpenFailure::Failed);
        } else {
            sup.handle_open_succeeded(now, open.url());
        }
        drain(&mut sup);
    }
    now = now.plus_ms(2_000);
    let current = sup.current().cloned().expect("switched to the middle");
    sup.handle_channel_state(now, &current, ChannelState::Healthy);
    drain(&mut sup);
    let healthy = sup.clone();

    let mut clean_switch = sup.clone();
    clean_switch.handle_channel_state(now, &current, ChannelState::Backoff { attempts: 3 });
    drain(&mut clean_switch);

    // Every remaining candidate fails too: now all of them cool.
    let mut exemption = clean_switch.clone();
    exemption.handle_tick(now);
    drain(&mut exemption);
    while let Some(open) = exemption.open_in_flight().cloned() {
        exemption.handle_open_failed(now, open.url(), OpenFailure::Failed);
        drain(&mut exemption);
    }
    let now = now.plus_ms(2_000);
    TickFixture {
        now,
        healthy,
        clean_switch,
        exemption,
    }
}

/// One tick and the draining of what it decided, as an adapter does it. (Inlined into the
/// bench like the adapter's own loop would be, so the bench does not time a call the adapter
/// does not make.)
#[inline]
pub fn tick_and_drain(sup: &mut Supervisor, now: MonoMs) -> usize {
    sup.handle_tick(now);
    let mut outputs = 0;
    while sup.poll_output().is_some() {
        outputs += 1;
    }
    outputs
}

pub mod handoff {
    //! A source cell's handoff machine and the reference store, ready for one attempt.

    use switchyard_core::handoff::store::{AssignmentStore, CellRow, StoreConfig};
    use switchyard_core::handoff::WorkKind;
    use switchyard_core::handoff::{CellId, HostId, Incarnation};
    use switchyard_core::handoff::{HandoffRequest, Measurement, PolicyConfig};
    use switchyard_core::handoff::{SourceConfig, SourceHandoff};
    use switchyard_core::MonoMs;

    pub const SOURCE: CellId = CellId(1);
    pub const TARGET: CellId = CellId(2);

    pub fn store_config() -> StoreConfig {
        StoreConfig {
            enabled: true,
            policy: PolicyConfig {
                freshness_window_ms: 60_000,
                host_cooldown_ms: 600_000,
            },
            max_in_flight_migrations: 1_000_000,
            rate_window_ms: 60_000,
            max_commits_per_window: 1_000_000,
            registration_timeout_ms: 30_000,
            bounds: switchyard_core::handoff::store::StoreBounds::FLEET,
        }
    }

    /// A store with `hosts` hosts on the source cell and room for all of them on the target,
    /// and one request per host.
    pub fn store_with_hosts(hosts: u64) -> (AssignmentStore, Vec<HandoffRequest>) {
        let mut store = AssignmentStore::new(store_config());
        let capacity = u32::try_from(hosts * 2).unwrap_or(u32::MAX);
        for cell in [SOURCE, TARGET] {
            store.upsert_cell(cell, cell_row(capacity)).expect("cell");
        }
        let requests = (0..hosts)
            .map(|h| {
                let authority = store.insert_host(HostId(h), SOURCE, true).expect("host");
                HandoffRequest::new(authority, TARGET, 100, measurement())
            })
            .collect();
        (store, requests)
    }

    /// A capable cell of the given capacity, as every bench store seeds it.
    pub fn cell_row(capacity: u32) -> CellRow {
        CellRow {
            capacity,
            handoff_capable: true,
            incarnation: Incarnation(1),
        }
    }

    pub fn measurement() -> Measurement {
        Measurement {
            measured_at: MonoMs(1_000),
            current_rtt_ms: 120,
            target_rtt_ms: 60,
        }
    }

    /// The source machine of host 0 with its request; `busy` leaves one client attached.
    pub fn source(busy: bool) -> (SourceHandoff, HandoffRequest) {
        let (_, requests) = store_with_hosts(1);
        let request = requests[0];
        let config = SourceConfig {
            request_timeout_ms: 5_000,
            reconcile_timeout_ms: 4_000,
            quarantine_retry_ms: 10_000,
            cell_capable: true,
            refusal_hold_ms: switchyard_core::handoff::DEFAULT_REFUSAL_HOLD_MS,
        };
        let mut source = SourceHandoff::new(config, request.source, true);
        if busy {
            source
                .handle_acquire(WorkKind::ClientConn)
                .expect("open gate");
        }
        (source, request)
    }
}

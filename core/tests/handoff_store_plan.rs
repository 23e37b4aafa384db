//! HO-S4 / HO-A1 / HO-A2 / HO-A4 / HO-A5: the store's plans (`switchyard_core::handoff::store`)
//! driven with arbitrary step results, including a failure at any step: a plan never writes
//! after it decided an early answer, never commits twice, never answers with rows written and
//! not committed, asks nothing after it ended, and ends within a bounded number of steps. And
//! HO-A2's reading of a failed store call (`durable_result_of`), one test per mapping.

use proptest::prelude::*;
use switchyard_core::handoff::escrow::{ShardRow, Split};
use switchyard_core::handoff::store::*;
use switchyard_core::handoff::*;
use switchyard_core::handoff::{Ambiguity, DurableResult};
use switchyard_core::MonoMs;

const NOW: MonoMs = MonoMs(1_000_000);

/// Arbitrary values drawn from proptest's words, biased towards the values that let a plan go
/// on (the exact authority, a known cell, a current window), so every path is reached.
struct Src {
    words: Vec<u64>,
    at: usize,
}

impl Src {
    fn next(&mut self) -> u64 {
        let w = self.words.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        w
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn fault(&mut self) -> Option<StoreFault> {
        // A failure at about one step in twelve.
        if !self.chance(8) {
            return None;
        }
        Some(
            [
                StoreFault::Unavailable,
                StoreFault::InTransaction,
                StoreFault::TimedOut,
                StoreFault::CommitLost,
                StoreFault::BadRow,
            ][usize::try_from(self.below(5)).unwrap_or(0)],
        )
    }
    fn config(&mut self) -> StoreConfig {
        StoreConfig {
            enabled: self.chance(90),
            policy: PolicyConfig {
                freshness_window_ms: 60_000,
                host_cooldown_ms: 20_000,
            },
            max_in_flight_migrations: u32::try_from(self.below(4)).unwrap_or(0),
            rate_window_ms: 60_000,
            max_commits_per_window: u32::try_from(self.below(4)).unwrap_or(0),
            registration_timeout_ms: 30_000,
            bounds: StoreBounds {
                max_hosts: 1 + self.below(4),
                max_cells: 4,
                max_attempt_rows: 1 + self.below(4),
            },
        }
    }
    fn cell_row(&mut self) -> CellRow {
        CellRow {
            capacity: u32::try_from(self.below(4)).unwrap_or(0),
            handoff_capable: self.chance(90),
            incarnation: Incarnation(1 + self.below(3)),
        }
    }
    fn maybe_cell(&mut self) -> Option<CellRow> {
        self.chance(85).then(|| self.cell_row())
    }
    fn row_of(&mut self, a: &SourceAuthority) -> Option<AssignmentRow> {
        if self.chance(10) {
            return None;
        }
        let exact = AssignmentRow {
            cell: a.cell,
            epoch: a.epoch,
            incarnation: a.incarnation,
            generation: a.generation,
            desktop_capable: self.chance(90),
        };
        Some(if self.chance(80) {
            exact
        } else {
            AssignmentRow {
                generation: Generation(a.generation.0 + 1),
                ..exact
            }
        })
    }
    fn shard(&mut self) -> ShardRow {
        let t = |s: &mut Src| if s.chance(70) { 1 + s.below(3) } else { 0 };
        ShardRow {
            window_start: NOW,
            commits: i64::try_from(self.below(3)).unwrap_or(0),
            in_flight: i64::try_from(self.below(3)).unwrap_or(0),
            attempt_rows: i64::try_from(self.below(3)).unwrap_or(0),
            commit_tokens: t(self),
            in_flight_tokens: t(self),
            attempt_tokens: t(self),
            hosts: i64::try_from(self.below(3)).unwrap_or(0),
            host_tokens: t(self),
        }
    }
    fn shards(&mut self) -> Vec<ShardRow> {
        let n = 1 + self.below(3);
        (0..n)
            .map(|_| ShardRow {
                window_start: NOW,
                ..self.shard()
            })
            .collect()
    }
    fn attempt(&mut self, a: &SourceAuthority, target: CellId) -> Option<AttemptRow> {
        self.chance(15).then(|| AttemptRow {
            source: *a,
            target,
            outcome: match self.below(3) {
                0 => AttemptOutcome::Committed {
                    new_epoch: Epoch(a.epoch.0 + 1),
                    registration: Registration::Pending,
                },
                1 => AttemptOutcome::FencedAbort,
                _ => AttemptOutcome::FencedRenewed,
            },
            recorded_at: NOW,
        })
    }
}

fn authority() -> SourceAuthority {
    SourceAuthority {
        cell: CellId(1),
        host: HostId(7),
        epoch: Epoch(3),
        incarnation: Incarnation(1),
        generation: Generation(2),
    }
}

fn request(src: &mut Src) -> HandoffRequest {
    let target = CellId(if src.chance(90) { 2 } else { 1 });
    let mut req = HandoffRequest::new(
        authority(),
        target,
        100,
        Measurement {
            measured_at: NOW,
            current_rtt_ms: 200,
            target_rtt_ms: 20,
        },
    );
    if src.chance(5) {
        req.target = CellId(9); // the op id no longer matches: answered before BEGIN
    }
    req
}

/// What a driver saw of a plan's steps, checked as they come.
#[derive(Debug, Default)]
struct Audit {
    steps: usize,
    /// Rows written and neither committed nor undone by a savepoint.
    dirty: bool,
    commits: usize,
    committed: bool,
    ended: bool,
}

impl Audit {
    fn write(&mut self) -> Result<(), TestCaseError> {
        prop_assert!(!self.committed, "a write after COMMIT");
        self.dirty = true;
        Ok(())
    }
    fn commit(&mut self) -> Result<(), TestCaseError> {
        self.commits += 1;
        prop_assert_eq!(self.commits, 1, "COMMIT asked twice");
        Ok(())
    }
    fn done(&mut self) -> Result<(), TestCaseError> {
        prop_assert!(
            !self.dirty || self.committed,
            "answered with rows written and not committed"
        );
        self.ended = true;
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn ho_s4_plan_commit_never_writes_after_an_answer_commits_once_and_ends(
        words in proptest::collection::vec(any::<u64>(), 96)
    ) {
        let mut src = Src { words, at: 0 };
        let req = request(&mut src);
        let shards = 1 + u32::try_from(src.below(4)).unwrap_or(0);
        let mut plan = CommitPlan::new(NOW, &req, shards);
        let mut audit = Audit::default();
        let mut spent_without_token = false;
        let mut wrote = false;
        let mut rebalanced_shards = 0;
        let mut recorded_commit = false;
        loop {
            audit.steps += 1;
            prop_assert!(audit.steps <= MAX_PLAN_STEPS, "more than {} steps", MAX_PLAN_STEPS);
            let step = plan.poll();
            if !matches!(step, CommitStep::Done(_) | CommitStep::Failed(_)) {
                if let Some(fault) = src.fault() {
                    plan.handle(CommitInput::Failed(fault));
                    prop_assert_eq!(plan.poll(), CommitStep::Failed(fault));
                    break;
                }
            }
            let input = match step {
                CommitStep::Begin => CommitInput::Begun,
                CommitStep::LockHost { host } => {
                    prop_assert_eq!(host, req.source.host);
                    CommitInput::Host(src.row_of(&req.source))
                }
                CommitStep::ReadFacts => CommitInput::Facts(CommitRead {
                    recorded: {
                        let a = src.attempt(&req.source, req.target);
                        recorded_commit = matches!(a, Some(AttemptRow { outcome: AttemptOutcome::Committed { .. }, .. }));
                        a
                    },
                    config: src.config(),
                    target_cell: src.maybe_cell(),
                    source_cell_capable: src.chance(90),
                    cooldown_until: src.chance(10).then_some(MonoMs(NOW.0 + 1)),
                    migration_pending: src.chance(15),
                }),
                CommitStep::LockAnyShard { hint } => {
                    prop_assert!(hint < shards);
                    let shard = src.below(u64::from(shards));
                    CommitInput::Shard(src.chance(90).then(|| {
                        (u32::try_from(shard).unwrap_or(0), src.shard())
                    }))
                }
                CommitStep::LockShard { shard } => {
                    prop_assert!(shard < shards);
                    CommitInput::Shard(Some((shard, src.shard())))
                }
                CommitStep::WriteCommit { writes, limits } => {
                    audit.write()?;
                    wrote = true;
                    prop_assert_eq!(writes.assignment.cell, req.target);
                    prop_assert_eq!(writes.assignment.epoch, req.source.epoch.next());
                    match limits {
                        LimitWrites::Spend { .. } => {
                            let target_tokens = src.below(3);
                            spent_without_token = target_tokens == 0;
                            CommitInput::Written { target_tokens }
                        }
                        LimitWrites::Rebalance { .. } => {
                            rebalanced_shards += 1;
                            CommitInput::Written { target_tokens: 0 }
                        }
                    }
                }
                CommitStep::ToSavepoint => {
                    // Everything written since the savepoint is undone.
                    audit.dirty = false;
                    spent_without_token = false;
                    CommitInput::AtSavepoint
                }
                CommitStep::LockAllShards => CommitInput::Shards(src.shards()),
                CommitStep::ReadSettings => CommitInput::Settings(src.config()),
                CommitStep::ReadTarget { cell } => {
                    prop_assert_eq!(cell, req.target);
                    CommitInput::Target(src.maybe_cell().map(|c| (c, i64::try_from(src.below(4)).unwrap_or(0))))
                }
                CommitStep::Commit => {
                    audit.commit()?;
                    prop_assert!(!spent_without_token, "a token commit without the target's token");
                    CommitInput::Committed
                }
                CommitStep::Done(answer) => {
                    audit.done()?;
                    // Committed now, or earlier (the record of a duplicate: nothing written).
                    prop_assert_eq!(answer.is_committed(), audit.committed || (recorded_commit && !wrote),
                        "Committed exactly when the plan committed: {:?}", answer);
                    break;
                }
                CommitStep::Failed(_) => break,
            };
            if matches!(input, CommitInput::Committed) {
                audit.committed = true;
            }
            plan.handle(input);
        }
        prop_assert!(rebalanced_shards <= 1);
        // A plan that ended asks for nothing more.
        let end = plan.poll();
        plan.handle(CommitInput::Failed(StoreFault::InTransaction));
        prop_assert!(matches!(end, CommitStep::Done(_) | CommitStep::Failed(_)));
        prop_assert_eq!(plan.poll(), end);
    }

    #[test]
    fn ho_s4_plan_reconcile_fences_once_and_ends(
        words in proptest::collection::vec(any::<u64>(), 64)
    ) {
        let mut src = Src { words, at: 0 };
        let req = request(&mut src);
        let mut plan = ReconcilePlan::new(NOW, &req, 1 + u32::try_from(src.below(4)).unwrap_or(0));
        let mut audit = Audit::default();
        let mut recorded = false;
        loop {
            audit.steps += 1;
            prop_assert!(audit.steps <= MAX_PLAN_STEPS);
            let step = plan.poll();
            if !matches!(step, ReconcileStep::Done(_) | ReconcileStep::Failed(_)) {
                if let Some(fault) = src.fault() {
                    plan.handle(ReconcileInput::Failed(fault));
                    prop_assert_eq!(plan.poll(), ReconcileStep::Failed(fault));
                    break;
                }
            }
            let input = match step {
                ReconcileStep::Begin => ReconcileInput::Begun,
                ReconcileStep::LockHost { .. } => ReconcileInput::Host(src.row_of(&req.source)),
                ReconcileStep::ReadAttempt { op } => {
                    prop_assert_eq!(op, req.op_id);
                    let a = src.attempt(&req.source, req.target);
                    recorded = a.is_some();
                    ReconcileInput::Attempt(a)
                }
                ReconcileStep::LockAllShards => {
                    prop_assert!(!recorded, "a recorded op id locks no shard");
                    ReconcileInput::Shards(src.shards())
                }
                ReconcileStep::ReadSettings => ReconcileInput::Settings(src.config()),
                ReconcileStep::WriteFence { writes, .. } => {
                    audit.write()?;
                    prop_assert!(!recorded, "a recorded op id is never fenced again");
                    prop_assert_eq!(writes.attempt.source, req.source);
                    ReconcileInput::Written
                }
                ReconcileStep::Commit => {
                    audit.commit()?;
                    ReconcileInput::Committed
                }
                ReconcileStep::Done(_) => {
                    audit.done()?;
                    break;
                }
                ReconcileStep::Failed(_) => break,
            };
            if matches!(input, ReconcileInput::Committed) {
                audit.committed = true;
            }
            plan.handle(input);
        }
    }

    #[test]
    fn ho_s4_plan_register_writes_only_after_the_decision_and_ends(
        words in proptest::collection::vec(any::<u64>(), 64)
    ) {
        let mut src = Src { words, at: 0 };
        let a = authority();
        let cell = CellId(if src.chance(80) { a.cell.0 } else { 2 });
        let incarnation = Incarnation(1 + src.below(3));
        let mut plan = RegisterPlan::new(a.host, cell, incarnation, src.chance(50));
        let mut audit = Audit::default();
        let mut reservations = 0;
        loop {
            audit.steps += 1;
            prop_assert!(audit.steps <= MAX_PLAN_STEPS + reservations);
            let step = plan.poll();
            if !matches!(step, RegisterStep::Done(_) | RegisterStep::Failed(_)) {
                if let Some(fault) = src.fault() {
                    plan.handle(RegisterInput::Failed(fault));
                    prop_assert_eq!(plan.poll(), RegisterStep::Failed(fault));
                    break;
                }
            }
            let input = match step {
                RegisterStep::Begin => RegisterInput::Begun,
                RegisterStep::LockHost { .. } => RegisterInput::Host(src.row_of(&a)),
                RegisterStep::ReadCell { .. } | RegisterStep::LockCell { .. } => {
                    RegisterInput::Cell(src.maybe_cell())
                }
                RegisterStep::WriteCellIncarnation { incarnation: i, .. } => {
                    audit.write()?;
                    prop_assert_eq!(i, incarnation);
                    RegisterInput::Written
                }
                RegisterStep::WriteAssignment { row, .. } => {
                    audit.write()?;
                    prop_assert_eq!(row.cell, cell);
                    RegisterInput::Written
                }
                RegisterStep::ReadReservations { .. } => {
                    reservations = usize::try_from(src.below(3)).unwrap_or(0);
                    let ops = (0..reservations)
                        .map(|k| OpId::derive(&SourceAuthority { epoch: Epoch(u64::try_from(k).unwrap_or(0)), ..a }, cell))
                        .collect();
                    RegisterInput::Reservations(ops)
                }
                RegisterStep::FinishReservation { registration, .. } => {
                    audit.write()?;
                    prop_assert_eq!(registration, Registration::Registered);
                    RegisterInput::Written
                }
                RegisterStep::Commit => {
                    audit.commit()?;
                    RegisterInput::Committed
                }
                RegisterStep::Done(answer) => {
                    audit.done()?;
                    prop_assert_eq!(answer.is_ok(), audit.committed);
                    break;
                }
                RegisterStep::Failed(_) => break,
            };
            if matches!(input, RegisterInput::Committed) {
                audit.committed = true;
            }
            plan.handle(input);
        }
    }

    #[test]
    fn ho_s4_plan_enrol_and_drain_never_write_after_an_answer(
        words in proptest::collection::vec(any::<u64>(), 64)
    ) {
        let mut src = Src { words, at: 0 };
        let a = authority();
        let shards = 1 + u32::try_from(src.below(4)).unwrap_or(0);
        let mut plan = EnrolPlan::new(a.host, a.cell, true, shards);
        let mut audit = Audit::default();
        loop {
            audit.steps += 1;
            prop_assert!(audit.steps <= MAX_PLAN_STEPS);
            let step = plan.poll();
            if !matches!(step, EnrolStep::Done(_) | EnrolStep::Failed(_)) {
                if let Some(fault) = src.fault() {
                    plan.handle(EnrolInput::Failed(fault));
                    prop_assert_eq!(plan.poll(), EnrolStep::Failed(fault));
                    break;
                }
            }
            let input = match step {
                EnrolStep::Begin => EnrolInput::Begun,
                EnrolStep::ReadCell { .. } => EnrolInput::Cell(src.maybe_cell()),
                EnrolStep::LockHost { .. } => {
                    EnrolInput::Host(src.chance(15).then(|| src.row_of(&a)).flatten())
                }
                EnrolStep::LockAnyShard { .. } => EnrolInput::Shard(
                    src.chance(90).then(|| (u32::try_from(src.below(u64::from(shards))).unwrap_or(0), src.shard())),
                ),
                EnrolStep::LockShard { shard } => EnrolInput::Shard(Some((shard, src.shard()))),
                EnrolStep::ReadCellTokens { .. } => EnrolInput::CellTokens {
                    own: i64::try_from(src.below(2)).unwrap_or(0),
                    others: i64::try_from(src.below(2)).unwrap_or(0),
                },
                EnrolStep::InsertHost { row, .. } => {
                    prop_assert_eq!(row.cell, a.cell);
                    let inserted = src.chance(90);
                    if inserted {
                        audit.write()?;
                    }
                    EnrolInput::Inserted(inserted)
                }
                EnrolStep::SpendEnrolment { .. } | EnrolStep::WriteEnrolExact { .. } => {
                    audit.write()?;
                    EnrolInput::Written
                }
                EnrolStep::ToSavepoint => {
                    audit.dirty = false;
                    EnrolInput::AtSavepoint
                }
                EnrolStep::LockAllShards => EnrolInput::Shards(src.shards()),
                EnrolStep::ReadSettings => EnrolInput::Settings(src.config()),
                EnrolStep::Commit => {
                    audit.commit()?;
                    EnrolInput::Committed
                }
                EnrolStep::Done(answer) => {
                    audit.done()?;
                    prop_assert_eq!(answer.is_ok(), audit.committed);
                    break;
                }
                EnrolStep::Failed(_) => break,
            };
            if matches!(input, EnrolInput::Committed) {
                audit.committed = true;
            }
            plan.handle(input);
        }

        // The drain fence: one write, only for the exact authority.
        let mut drain = DrainPlan::new(&a);
        let mut audit = Audit::default();
        loop {
            audit.steps += 1;
            prop_assert!(audit.steps <= MAX_PLAN_STEPS);
            let step = drain.poll();
            if !matches!(step, DrainStep::Done(_) | DrainStep::Failed(_)) {
                if let Some(fault) = src.fault() {
                    drain.handle(DrainInput::Failed(fault));
                    prop_assert_eq!(drain.poll(), DrainStep::Failed(fault));
                    break;
                }
            }
            let input = match step {
                DrainStep::Begin => DrainInput::Begun,
                DrainStep::LockHost { .. } => DrainInput::Host(src.row_of(&a)),
                DrainStep::WriteGeneration { generation, .. } => {
                    audit.write()?;
                    prop_assert_eq!(generation, a.generation.next());
                    DrainInput::Written
                }
                DrainStep::Commit => {
                    audit.commit()?;
                    audit.committed = true;
                    DrainInput::Committed
                }
                DrainStep::Done(answer) => {
                    audit.done()?;
                    prop_assert_eq!(matches!(answer, DrainWrite::Fenced { .. }), audit.committed);
                    break;
                }
                DrainStep::Failed(_) => break,
            };
            drain.handle(input);
        }
    }
}

/// HO-S4: the token path is the plan's: a shard that covers the commit but whose target
/// token is missing goes back to the savepoint and on to the exact path (never commits, never
/// answers from the token path).
#[test]
fn ho_s4_plan_no_target_token_goes_back_to_the_savepoint() {
    let req = HandoffRequest::new(
        authority(),
        CellId(2),
        100,
        Measurement {
            measured_at: NOW,
            current_rtt_ms: 200,
            target_rtt_ms: 20,
        },
    );
    let a = authority();
    let config = StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 0,
        },
        max_in_flight_migrations: 8,
        rate_window_ms: 60_000,
        max_commits_per_window: 8,
        registration_timeout_ms: 30_000,
        bounds: StoreBounds::FLEET,
    };
    let cell = CellRow {
        capacity: 8,
        handoff_capable: true,
        incarnation: Incarnation(1),
    };
    let mut plan = CommitPlan::new(NOW, &req, 4);
    plan.handle(CommitInput::Begun);
    plan.handle(CommitInput::Host(Some(AssignmentRow {
        cell: a.cell,
        epoch: a.epoch,
        incarnation: a.incarnation,
        generation: a.generation,
        desktop_capable: true,
    })));
    plan.handle(CommitInput::Facts(CommitRead {
        recorded: None,
        config,
        target_cell: Some(cell),
        source_cell_capable: true,
        cooldown_until: None,
        migration_pending: false,
    }));
    assert_eq!(plan.poll(), CommitStep::LockAnyShard { hint: 3 });
    let tokens = ShardRow {
        window_start: NOW,
        commit_tokens: 1,
        in_flight_tokens: 1,
        attempt_tokens: 1,
        ..ShardRow::default()
    };
    plan.handle(CommitInput::Shard(Some((3, tokens))));
    assert!(matches!(
        plan.poll(),
        CommitStep::WriteCommit {
            limits: LimitWrites::Spend { shard: 3, .. },
            ..
        }
    ));
    plan.handle(CommitInput::Written { target_tokens: 0 });
    assert_eq!(plan.poll(), CommitStep::ToSavepoint);
    plan.handle(CommitInput::AtSavepoint);
    assert_eq!(plan.poll(), CommitStep::LockAllShards);
    plan.handle(CommitInput::Shards(vec![
        ShardRow {
            window_start: NOW,
            ..ShardRow::default()
        };
        4
    ]));
    plan.handle(CommitInput::Settings(config));
    plan.handle(CommitInput::Target(Some((cell, 0))));
    match plan.poll() {
        CommitStep::WriteCommit {
            limits: LimitWrites::Rebalance { target_tokens, .. },
            ..
        } => assert_eq!(target_tokens, Split::even(7, 4)),
        other => panic!("expected the exact path's write, got {other:?}"),
    }
    plan.handle(CommitInput::Written { target_tokens: 0 });
    assert_eq!(plan.poll(), CommitStep::Commit);
    plan.handle(CommitInput::Committed);
    assert!(plan.answer().is_some_and(|o| o.is_committed()));
}

#[test]
fn ho_a2_unavailable_before_begin_is_store_unavailable() {
    assert_eq!(
        durable_result_of(StoreFault::Unavailable),
        DurableResult::StoreUnavailable
    );
}

#[test]
fn ho_a2_error_inside_the_transaction_is_ambiguous_transport() {
    assert_eq!(
        durable_result_of(StoreFault::InTransaction),
        DurableResult::Ambiguous(Ambiguity::TransportError)
    );
}

#[test]
fn ho_a2_timeout_is_ambiguous_never_a_rollback() {
    assert_eq!(
        durable_result_of(StoreFault::TimedOut),
        DurableResult::Ambiguous(Ambiguity::Timeout)
    );
}

#[test]
fn ho_a2_lost_commit_result_is_ambiguous_result_lost() {
    assert_eq!(
        durable_result_of(StoreFault::CommitLost),
        DurableResult::Ambiguous(Ambiguity::ResultLost)
    );
}

#[test]
fn ho_a2_bad_row_is_store_unavailable() {
    assert_eq!(
        durable_result_of(StoreFault::BadRow),
        DurableResult::StoreUnavailable
    );
}

#[test]
fn ho_a2_no_store_failure_reads_as_a_rollback() {
    for fault in [
        StoreFault::Unavailable,
        StoreFault::InTransaction,
        StoreFault::TimedOut,
        StoreFault::CommitLost,
        StoreFault::BadRow,
    ] {
        assert!(!matches!(durable_result_of(fault), DurableResult::Done(_)));
    }
}

#[test]
fn ho_a2_reconcile_store_full_stays_quarantined() {
    assert_eq!(reconcile_result(None), DurableResult::StoreUnavailable);
    let fenced = TxnOutcome::RolledBack {
        reason: AbortReason::Fenced,
    };
    assert_eq!(reconcile_result(Some(fenced)), DurableResult::Done(fenced));
}

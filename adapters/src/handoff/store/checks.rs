//! HA-1's start-time checks of a PostgreSQL store: a transaction-pooling proxy is refused by
//! name; the connection budget and the distance to the primary are measured and logged (a
//! WARN when they do not fit; the rules are core's).

use std::time::{Duration, Instant};

use sqlx::any::AnyConnectOptions;
use sqlx::{AnyConnection, AnyPool, Connection, Executor, Row};
use switchyard_core::handoff::store::{
    connection_budget, distance_rule, farthest_rtt_ms, ServerConnections, MAX_TXN_ROUND_TRIPS,
};

use super::{StoreOptions, StoreSetupError};

/// Round trips timed for the distance check (the median is kept).
const RTT_SAMPLES: usize = 5;

/// HA-1: a proxy pooling by transaction (pgbouncer `pool_mode=transaction` or `statement`)
/// hands one server session to several clients. The store needs its own session (its named
/// prepared statements and its session's timeouts), so such a URL is refused at start.
///
/// Told without asking the proxy: client A reads its backend's pid and goes idle; client B
/// opens a transaction and reads its pid; A reads again. Directly or through a session pool, A
/// keeps its backend (B gets another, A's pid is unchanged). A transaction pool lends A's idle
/// backend to B (pgbouncer reuses the last idle server first) or moves A elsewhere. Simple-query
/// statements only: nothing is prepared on a server another client may get.
pub async fn refuse_transaction_pooling(opts: &AnyConnectOptions) -> Result<(), StoreSetupError> {
    let unreachable = |e: sqlx::Error| StoreSetupError::Refused(format!("pooling check: {e}"));
    let mut a = AnyConnection::connect_with(opts)
        .await
        .map_err(unreachable)?;
    let mut b = AnyConnection::connect_with(opts)
        .await
        .map_err(unreachable)?;
    let outcome = async {
        let a1 = backend_pid(&mut a).await?;
        b.execute("BEGIN").await?;
        let b1 = backend_pid(&mut b).await?;
        let a2 = backend_pid(&mut a).await?;
        b.execute("ROLLBACK").await?;
        Ok::<_, sqlx::Error>((a1, b1, a2))
    }
    .await;
    let _ = a.close().await;
    let _ = b.close().await;
    let (a1, b1, a2) = outcome.map_err(|e| {
        // Statement pooling refuses BEGIN: the same refusal, told by the error.
        StoreSetupError::Pooler(format!(
            "the database URL reaches a proxy that does not keep one server session per \
             client (the pooling check failed: {e}); use pgbouncer pool_mode=session or \
             connect to PostgreSQL directly (HA-1, docs/HA-POSTGRES.md)"
        ))
    })?;
    if b1 == a1 || a2 != a1 {
        return Err(StoreSetupError::Pooler(format!(
            "the database URL reaches a transaction-pooling proxy (pgbouncer \
             pool_mode=transaction): one client's server session went to another client \
             (backend {a1} idle, then {b1} to the other client, then {a2}); the store needs \
             its own session for its prepared statements and timeouts: use \
             pool_mode=session or connect to PostgreSQL directly (HA-1, docs/HA-POSTGRES.md)"
        )));
    }
    Ok(())
}

async fn backend_pid(c: &mut AnyConnection) -> Result<i64, sqlx::Error> {
    let row = c.fetch_one("SELECT pg_backend_pid()::bigint").await?;
    row.try_get::<i64, _>(0)
}

/// HA-1: log the connection budget and the distance to the primary; WARN when either does
/// not fit. Never refuses: a server may raise `max_connections`, a store may be far on
/// purpose; a failure to measure is logged and skipped.
pub async fn report_budget_and_distance(pool: &AnyPool, opts: &StoreOptions) {
    if let Err(e) = budget(pool, opts).await {
        tracing::warn!(error = %e, "store connection budget not checked");
    }
    if let Err(e) = distance(pool, opts).await {
        tracing::warn!(error = %e, "store round trip not measured");
    }
}

async fn budget(pool: &AnyPool, opts: &StoreOptions) -> Result<(), sqlx::Error> {
    let row = pool
        .fetch_one(
            "SELECT current_setting('max_connections')::bigint, \
                    current_setting('superuser_reserved_connections')::bigint, \
                    (SELECT count(*) FROM pg_stat_activity \
                      WHERE backend_type = 'client backend')::bigint",
        )
        .await?;
    let num = |i: usize| {
        row.try_get::<i64, _>(i)
            .map(|v| u64::try_from(v).unwrap_or(0))
    };
    let server = ServerConnections {
        max: num(0)?,
        reserved: num(1)?,
        in_use: num(2)?,
    };
    let pool_size = u64::from(opts.max_connections.max(1));
    let own = u64::from(pool.size());
    let budget = connection_budget(server, pool_size, own);
    if budget.fits {
        tracing::info!(
            max_connections = server.max,
            reserved = server.reserved,
            in_use = server.in_use,
            db_max_connections = pool_size,
            processes_that_fit = budget.processes,
            "store connection budget: (max_connections - reserved) / --db-max-connections \
             processes like this one fit"
        );
    } else {
        tracing::warn!(
            max_connections = server.max,
            reserved = server.reserved,
            in_use = server.in_use,
            db_max_connections = pool_size,
            processes_that_fit = budget.processes,
            "store connection budget exceeded: this pool may not grow to \
             --db-max-connections beside the connections in use; a refused connection is a \
             store failure (lower --db-max-connections, or raise max_connections)"
        );
    }
    Ok(())
}

async fn distance(pool: &AnyPool, opts: &StoreOptions) -> Result<(), sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let mut samples = Vec::with_capacity(RTT_SAMPLES);
    for _ in 0..RTT_SAMPLES {
        let t = Instant::now();
        conn.execute("SELECT 1").await?;
        samples.push(t.elapsed());
    }
    samples.sort();
    let rtt = samples
        .get(RTT_SAMPLES / 2)
        .copied()
        .unwrap_or(Duration::ZERO);
    let rtt_ms = u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX);
    let timeout_ms = u64::try_from(opts.txn_timeout.as_millis()).unwrap_or(u64::MAX);
    match distance_rule(rtt_ms, timeout_ms) {
        None => tracing::info!(
            round_trip_us = u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX),
            db_txn_timeout_ms = timeout_ms,
            farthest_round_trip_ms = farthest_rtt_ms(timeout_ms),
            "store round trip measured"
        ),
        Some(needed_ms) => tracing::warn!(
            round_trip_ms = rtt_ms,
            round_trips_per_transaction = MAX_TXN_ROUND_TRIPS,
            db_txn_timeout_ms = timeout_ms,
            needed_ms,
            "the store is too far for --db-txn-timeout-ms: a transaction of up to \
             {MAX_TXN_ROUND_TRIPS} round trips needs twice their time; raise \
             --db-txn-timeout-ms to at least needed_ms (HA-1, docs/HA-POSTGRES.md)"
        ),
    }
    Ok(())
}

//! OPS-2 (issue 27 point 10): PostgreSQL's notices and warnings stay out of a cell's log, with
//! `RUST_LOG=info` and with no `RUST_LOG` at all, over the real binary on PostgreSQL.
//!
//! The database is made to speak: a trigger on `ho_cells` raises a NOTICE and a WARNING each
//! time the cell renews its lease, and the test waits until the trigger has fired several
//! times (its own counter table says so) before it reads the log. Red before the filter was
//! applied to `RUST_LOG` too: with `RUST_LOG=info` both lines were logged (sqlx's
//! `sqlx::postgres::notice` target), and with no `RUST_LOG` the WARNING was.

mod support_bin;
#[path = "../../adapters/tests/support_pg/mod.rs"]
mod support_pg;

use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};
use support_bin::{cell_args, Process};

const NOTICE: &str = "switchyard-test-notice";
const WARNING: &str = "switchyard-test-warning";

/// A cell on a fresh database whose lease renewals make PostgreSQL raise a notice and a
/// warning; returns once the trigger fired three times.
async fn cell_whose_renewals_raise_notices(tag: &str, unset: &[&str]) -> Process {
    let db = support_pg::fresh_db(tag).await;
    let cell = Process::start_without(
        &cell_args(
            &db,
            "1",
            &[
                // A renewal every few hundred milliseconds.
                "--cell-lease-ms",
                "900",
                "--lease-drift-ms",
                "100",
            ],
        ),
        unset,
    );
    let _ = cell.value("url=");
    let mut conn = PgConnection::connect(&db).await.expect("connect");
    for statement in [
        "CREATE TABLE notices_raised (n bigint NOT NULL)".to_owned(),
        "INSERT INTO notices_raised VALUES (0)".to_owned(),
        format!(
            "CREATE FUNCTION raise_notices() RETURNS trigger AS $$ BEGIN \
             UPDATE notices_raised SET n = n + 1; \
             RAISE NOTICE '{NOTICE}'; RAISE WARNING '{WARNING}'; RETURN NEW; END $$ \
             LANGUAGE plpgsql"
        ),
        "CREATE TRIGGER raise_notices BEFORE UPDATE ON ho_cells FOR EACH ROW \
         EXECUTE FUNCTION raise_notices()"
            .to_owned(),
    ] {
        sqlx::query(&statement)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = sqlx::query_scalar("SELECT n FROM notices_raised")
            .fetch_one(&mut conn)
            .await
            .expect("count");
        if n >= 3 {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "the lease renewals never fired the trigger (n = {n}); log:\n{}",
            cell.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The log lines of the last renewal have been written by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    cell
}

fn assert_no_notices(cell: &Process, how: &str) {
    let log = cell.log();
    assert!(
        !log.contains(NOTICE) && !log.contains(WARNING) && !log.contains("postgres::notice"),
        "{how}: PostgreSQL's notices reached the cell's log:\n{log}"
    );
    assert!(
        log.contains("url="),
        "{how}: the cell logged nothing else either:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_2_postgres_notices_and_warnings_stay_out_of_the_log_with_rust_log_info() {
    let cell = cell_whose_renewals_raise_notices("notices_info", &[]).await;
    assert_no_notices(&cell, "RUST_LOG=info");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_2_postgres_notices_and_warnings_stay_out_of_the_log_without_rust_log() {
    let cell = cell_whose_renewals_raise_notices("notices_default", &["RUST_LOG"]).await;
    assert_no_notices(&cell, "no RUST_LOG");
}

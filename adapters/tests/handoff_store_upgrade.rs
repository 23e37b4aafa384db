//! HO-S4, schema migration 4 on a store with history: a PostgreSQL database at migration 3
//! (the single `ho_limits` row) holding hosts on two cells, a live reservation and attempt rows
//! is upgraded to the limit shards; every count must carry over (hosts per cell, live
//! reservations, the rate window's commits, the attempt rows) and no token may exist yet, so
//! the first commit after the upgrade decides on the exact sums.

mod support_pg;

use sqlx::{Connection, Executor, PgConnection, Row};

const MIGRATIONS: [&str; 4] = [
    include_str!("../migrations/postgres/0001_handoff.sql"),
    include_str!("../migrations/postgres/0002_cell_lease.sql"),
    include_str!("../migrations/postgres/0003_fenced_renewed.sql"),
    include_str!("../migrations/postgres/0004_limit_shards.sql"),
];
const DIRECTOR_KEYSET: &str = include_str!("../migrations/postgres/0006_director_keyset.sql");

async fn scalar(conn: &mut PgConnection, sql: &str) -> i64 {
    sqlx::query(sql)
        .fetch_one(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get::<i64, _>(0)
}

#[test]
fn ho_s4_migration_4_carries_every_count_into_the_limit_shards() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let url = support_pg::fresh_db("upgrade4").await;
            let mut conn = PgConnection::connect(&url).await.expect("connect");
            for sql in &MIGRATIONS[..3] {
                conn.execute(*sql).await.expect("migrations 1-3");
            }
            conn.execute(
                "INSERT INTO ho_cells (cell, capacity, handoff_capable, incarnation) \
                 VALUES (1, 10, 1, 1), (2, 10, 1, 1), (3, 5, 1, 1); \
                 INSERT INTO ho_assignments (host, cell, epoch, incarnation, generation, \
                 desktop_capable) VALUES (1, 1, 1, 1, 1, 1), (2, 1, 1, 1, 1, 1), \
                 (3, 1, 1, 1, 1, 1), (4, 2, 2, 1, 1, 1), (5, 2, 2, 1, 1, 1); \
                 INSERT INTO ho_reservations (op_id, host, cell, expires_at_ms) \
                 VALUES ('a', 4, 2, 99); \
                 INSERT INTO ho_attempts (op_id, host, src_cell, src_epoch, src_incarnation, \
                 src_generation, target, outcome, new_epoch, registration, recorded_at_ms) \
                 VALUES ('a', 4, 1, 1, 1, 1, 2, 'committed', 2, 'pending', 7), \
                 ('b', 5, 1, 1, 1, 1, 2, 'committed', 2, 'registered', 8), \
                 ('c', 1, 1, 1, 1, 1, 2, 'fenced', NULL, NULL, 9); \
                 UPDATE ho_limits SET window_start_ms = 5, commits = 2, attempt_rows = 3",
            )
            .await
            .expect("history");
            conn.execute(MIGRATIONS[3]).await.expect("migration 4");

            let c = &mut conn;
            assert_eq!(scalar(c, "SELECT COUNT(*) FROM ho_limit_shards").await, 16);
            assert_eq!(
                scalar(
                    c,
                    "SELECT CAST(SUM(in_flight) AS BIGINT) FROM ho_limit_shards"
                )
                .await,
                1
            );
            assert_eq!(
                scalar(
                    c,
                    "SELECT CAST(SUM(commits) AS BIGINT) FROM ho_limit_shards"
                )
                .await,
                2
            );
            assert_eq!(
                scalar(
                    c,
                    "SELECT CAST(SUM(attempt_rows) AS BIGINT) FROM ho_limit_shards"
                )
                .await,
                3
            );
            assert_eq!(
                scalar(
                    c,
                    "SELECT COUNT(DISTINCT window_start_ms) FROM ho_limit_shards"
                )
                .await,
                1
            );
            assert_eq!(
                scalar(c, "SELECT MIN(window_start_ms) FROM ho_limit_shards").await,
                5
            );
            for (cell, hosts) in [(1, 3), (2, 2), (3, 0)] {
                let sql = format!(
                    "SELECT CAST(SUM(hosts) AS BIGINT) FROM ho_cell_load WHERE cell = {cell}"
                );
                assert_eq!(scalar(c, &sql).await, hosts, "hosts of cell {cell}");
                let sql = format!("SELECT COUNT(*) FROM ho_cell_load WHERE cell = {cell}");
                assert_eq!(scalar(c, &sql).await, 16, "load rows of cell {cell}");
            }
            let tokens = "SELECT CAST(SUM(commit_tokens + in_flight_tokens + attempt_tokens) \
                          AS BIGINT) FROM ho_limit_shards";
            assert_eq!(scalar(c, tokens).await, 0, "no token before an exact path");
            let tokens = "SELECT CAST(SUM(tokens) AS BIGINT) FROM ho_cell_load";
            assert_eq!(scalar(c, tokens).await, 0);
            assert_eq!(
                scalar(
                    c,
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'ho_limits'"
                )
                .await,
                0,
                "ho_limits is gone"
            );
            conn.close().await.expect("close");
        });
}

/// SCALE-3, schema migration 6: a director cursor saved as an offset becomes "the start of the
/// list" (a NULL `after_host`; the offset is kept, unread), and the new column takes a host.
#[test]
fn scale_3_migration_6_restarts_an_offset_cursor_from_the_start_of_the_list() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let url = support_pg::fresh_db("upgrade6").await;
            let mut conn = PgConnection::connect(&url).await.expect("connect");
            for sql in &MIGRATIONS {
                conn.execute(*sql).await.expect("migrations 1-4");
            }
            conn.execute(
                "INSERT INTO ho_director_cursors (director, page_offset) VALUES ('d', 3000)",
            )
            .await
            .expect("an offset cursor");
            conn.execute(DIRECTOR_KEYSET).await.expect("migration 6");
            let c = &mut conn;
            assert_eq!(
                scalar(
                    c,
                    "SELECT COUNT(*) FROM ho_director_cursors WHERE after_host IS NULL"
                )
                .await,
                1,
                "the old cursor starts from the top"
            );
            assert_eq!(
                scalar(c, "SELECT page_offset FROM ho_director_cursors").await,
                3000
            );
            conn.execute("UPDATE ho_director_cursors SET after_host = 41")
                .await
                .expect("a host cursor");
            assert_eq!(
                scalar(&mut conn, "SELECT after_host FROM ho_director_cursors").await,
                41
            );
            assert!(
                conn.execute("UPDATE ho_director_cursors SET after_host = -1")
                    .await
                    .is_err(),
                "host ids are never negative"
            );
            conn.close().await.expect("close");
        });
}

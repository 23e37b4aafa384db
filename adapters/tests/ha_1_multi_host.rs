//! HA-1 on one real PostgreSQL: the store takes libpq's multi-host URL with
//! `target_session_attrs`, walks the nodes in order and keeps one that accepts writes; a node
//! that stops accepting writes is left (its connections retired, calls failing with every
//! node named and why) and taken again once it matches; a transaction-pooling proxy is
//! refused at start by name, a session-pooling one works. The "other node" of these URLs is a
//! port nobody listens on; the real failover, with two nodes and pg_auto_failover, is
//! `tools/tests/ha_1_failover.rs`.
//!
//! Red before HA-1: `SqlStore::connect` refused the multi-host URL (`invalid port number`),
//! took a one-host URL's `target_session_attrs` as an unknown parameter, and failed at start
//! behind transaction-mode pgbouncer with `prepared statement "sqlx_s_1" already exists`.

mod support_pg;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, PgConnection};
use switchyard_adapters::handoff::store::{SqlStore, StoreOptions, StoreSetupError};
use switchyard_core::handoff::store::{StoreBounds, StoreConfig};
use switchyard_core::handoff::PolicyConfig;

fn config() -> StoreConfig {
    StoreConfig {
        enabled: true,
        policy: PolicyConfig {
            freshness_window_ms: 60_000,
            host_cooldown_ms: 0,
        },
        max_in_flight_migrations: 64,
        rate_window_ms: 60_000,
        max_commits_per_window: 64,
        registration_timeout_ms: 600_000,
        bounds: StoreBounds::FLEET,
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// `url` with a dead node (refuses connections) put before its one host.
fn behind_a_dead_node(url: &str, attrs: &str) -> (String, u16) {
    let dead = free_port();
    let at = url.find('@').expect("user in the test URL") + 1;
    let sep = if url.contains('?') { '&' } else { '?' };
    (
        format!(
            "{}127.0.0.1:{dead},{}{sep}target_session_attrs={attrs}",
            &url[..at],
            &url[at..]
        ),
        dead,
    )
}

fn port_of(url: &str) -> u16 {
    let at = url.find('@').expect("user") + 1;
    let rest = &url[at..];
    let colon = rest.find(':').expect("port");
    let end = rest.find('/').expect("db");
    rest[colon + 1..end].parse().expect("port number")
}

fn db_of(url: &str) -> String {
    url.rsplit('/').next().expect("db").to_owned()
}

async fn admin() -> PgConnection {
    PgConnection::connect(&support_pg::admin_url())
        .await
        .expect("admin connection")
}

async fn set_read_only(db: &str, on: bool) {
    let mut a = admin().await;
    let sql = if on {
        format!("ALTER DATABASE {db} SET default_transaction_read_only = on")
    } else {
        format!("ALTER DATABASE {db} RESET default_transaction_read_only")
    };
    a.execute(sql.as_str()).await.expect("alter database");
}

fn opts() -> StoreOptions {
    StoreOptions {
        acquire_timeout: Duration::from_millis(500),
        ..StoreOptions::default()
    }
}

/// One test at a time: `ha_1_d` turns the whole cluster read-only for a while.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn ha_1_a_multi_host_url_keeps_the_node_that_accepts_writes() {
    let _one = serial();
    runtime().block_on(async {
        let url = support_pg::fresh_db("ha1_walk").await;
        let (multi, _) = behind_a_dead_node(&url, "read-write");
        let store = SqlStore::connect(&multi, opts())
            .await
            .unwrap_or_else(|e| panic!("{multi}: {e}"));
        store.put_settings(&config(), true).await.expect("a write");
        // `any` keeps the first node that answers: the dead one is skipped too.
        let (any, _) = behind_a_dead_node(&url, "any");
        SqlStore::connect(&any, opts()).await.expect("any");
        // One host with `target_session_attrs`: the attribute is honoured, not dropped.
        set_read_only(&db_of(&url), true).await;
        let one = format!("{url}?target_session_attrs=read-write");
        let e = SqlStore::connect(&one, opts())
            .await
            .expect_err("a read-only node is no read-write node");
        assert!(
            e.to_string().contains("transaction_read_only=on"),
            "the reason is named: {e}"
        );
    });
}

#[test]
fn ha_1_b_no_matching_node_names_every_node_and_why() {
    let _one = serial();
    runtime().block_on(async {
        let url = support_pg::fresh_db("ha1_none").await;
        set_read_only(&db_of(&url), true).await;
        let (multi, dead) = behind_a_dead_node(&url, "read-write");
        let e = SqlStore::connect(&multi, opts())
            .await
            .expect_err("no node accepts writes");
        assert!(matches!(e, StoreSetupError::NoNode(_)), "{e:?}");
        let text = e.to_string();
        let live = port_of(&url);
        for needle in [
            format!("127.0.0.1:{dead}: "),
            format!("127.0.0.1:{live}: does not match target_session_attrs=read-write"),
            "transaction_read_only=on".to_owned(),
        ] {
            assert!(text.contains(&needle), "{needle:?} in {text}");
        }
        // A URL libpq would refuse is refused by name.
        let bad = multi.replace("read-write", "master");
        let e = SqlStore::connect(&bad, opts())
            .await
            .expect_err("bad attrs");
        assert!(matches!(e, StoreSetupError::BadUrl { .. }), "{e:?}");
    });
}

async fn backend_pids(db: &str) -> Vec<i32> {
    let mut a = admin().await;
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(db)
    .fetch_all(&mut a)
    .await
    .expect("pg_stat_activity")
}

#[test]
fn ha_1_c_a_node_that_stops_accepting_writes_is_left_and_taken_again() {
    let _one = serial();
    runtime().block_on(async {
        let url = support_pg::fresh_db("ha1_flip").await;
        let db = db_of(&url);
        let (multi, dead) = behind_a_dead_node(&url, "read-write");
        let store = SqlStore::connect(&multi, opts()).await.expect("store");
        store.put_settings(&config(), true).await.expect("a write");

        // The node turns read-only (as pg_auto_failover keeps a node during a promotion) and
        // its sessions end (as a demotion restarts it).
        set_read_only(&db, true).await;
        support_pg::terminate_backends(&url).await;
        let mut why = String::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match store.put_settings(&config(), true).await {
                Ok(()) => panic!("a write on a read-only node succeeded"),
                Err(e) if e.to_string().contains("no node of") => {
                    why = e.to_string();
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        for needle in [
            format!("127.0.0.1:{dead}"),
            "transaction_read_only=on".to_owned(),
        ] {
            assert!(why.contains(&needle), "{needle:?} in {why:?}");
        }

        // Writable again: the store takes the node again on its own, within a few walks.
        set_read_only(&db, false).await;
        let back = Instant::now();
        loop {
            match store.put_settings(&config(), true).await {
                Ok(()) => break,
                Err(e) => {
                    assert!(
                        back.elapsed() < Duration::from_secs(5),
                        "still failing 5 s after the node accepts writes: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        eprintln!(
            "writes resumed {:?} after the node accepted them",
            back.elapsed()
        );
    });
}

/// Every live session of the node turns read-only at once (a reload of
/// `default_transaction_read_only`, as pg_auto_failover does to a node it demotes or has not
/// finished promoting): the store's next write is refused (SQLSTATE 25006), it walks, finds no
/// writable node, and stops using the connections it holds; once the node accepts writes
/// again the store comes back on new connections.
#[test]
fn ha_1_d_a_read_only_refusal_retires_the_connections_of_the_node() {
    let _one = serial();
    runtime().block_on(async {
        let url = support_pg::fresh_db("ha1_ro").await;
        let db = db_of(&url);
        let (multi, _) = behind_a_dead_node(&url, "read-write");
        let store = SqlStore::connect(&multi, opts()).await.expect("store");
        store.put_settings(&config(), true).await.expect("a write");
        let before = backend_pids(&db).await;
        assert!(!before.is_empty());
        let mut a = admin().await;
        a.execute("SET default_transaction_read_only = off")
            .await
            .expect("admin stays writable");
        a.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            .await
            .expect("alter system");
        a.execute("SELECT pg_reload_conf()").await.expect("reload");
        let e = loop {
            match store.put_settings(&config(), true).await {
                Ok(()) => {
                    // The reload reaches each backend at its next command: give it time.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) if e.to_string().contains("no node of") => break e,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        assert!(e.to_string().contains("transaction_read_only=on"), "{e}");
        a.execute("ALTER SYSTEM RESET default_transaction_read_only")
            .await
            .expect("alter system reset");
        a.execute("SELECT pg_reload_conf()").await.expect("reload");
        let back = Instant::now();
        while let Err(e) = store.put_settings(&config(), true).await {
            assert!(
                back.elapsed() < Duration::from_secs(5),
                "writes did not resume within 5 s: {e}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "writes resumed {:?} after the node accepted them",
            back.elapsed()
        );
        // An idle connection is retired when the pool next hands it out: a few calls take
        // every one of them off the idle queue.
        for _ in 0..10 {
            store.put_settings(&config(), true).await.expect("a write");
        }
        let after = backend_pids(&db).await;
        assert!(
            after.iter().all(|p| !before.contains(p)),
            "the connections made before the refusal are retired: {before:?} vs {after:?}"
        );
    });
}

/// A connection the server refuses (`too many connections`, SQLSTATE 53300: the connection
/// budget exceeded) fails the call as the store being unavailable, naming the cause, not only
/// "pool timed out" (HA-1: a refused connection is a store failure an operator can read).
#[test]
fn ha_1_f_a_refused_connection_is_a_store_failure_naming_its_cause() {
    let _one = serial();
    runtime().block_on(async {
        let url = support_pg::fresh_db("ha1_refused").await;
        let db = db_of(&url);
        // A superuser is exempt from connection limits: the store connects as its own role.
        let role = format!("ha1lim{}", std::process::id());
        let mut a = admin().await;
        a.execute(format!("CREATE ROLE {role} LOGIN").as_str())
            .await
            .expect("role");
        a.execute(format!("ALTER DATABASE {db} OWNER TO {role}").as_str())
            .await
            .expect("owner");
        let url = url.replacen("postgres@", &format!("{role}@"), 1);
        let store = SqlStore::connect(&url, opts()).await.expect("store");
        store.put_settings(&config(), true).await.expect("a write");
        a.execute(format!("ALTER DATABASE {db} CONNECTION LIMIT 0").as_str())
            .await
            .expect("limit");
        support_pg::terminate_backends(&url).await;
        let mut why = String::new();
        for _ in 0..20 {
            match store.put_settings(&config(), true).await {
                Err(e) if e.to_string().contains("a new connection fails") => {
                    why = e.to_string();
                    break;
                }
                Err(e) => {
                    why = e.to_string();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(()) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        assert!(
            why.starts_with("assignment store unavailable") && why.contains("SQLSTATE 53300"),
            "{why:?}"
        );
        a.execute(format!("ALTER DATABASE {db} CONNECTION LIMIT -1").as_str())
            .await
            .expect("unlimit");
        store.put_settings(&config(), true).await.expect("back");
    });
}

// ----- pgbouncer -----

/// A pgbouncer in front of the test cluster, run as `postgres` (it refuses root).
struct Bouncer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pgbouncer_bin() -> String {
    for p in ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"] {
        if std::path::Path::new(p).exists() {
            return p.to_owned();
        }
    }
    panic!(
        "pgbouncer not found (/usr/sbin/pgbouncer): install Debian's `pgbouncer` package \
         (.ci/run does); HA-1's pooling tests are never skipped"
    );
}

fn start_bouncer(pg_port: u16, mode: &str) -> Bouncer {
    let bin = pgbouncer_bin();
    let dir = tempfile::Builder::new()
        .prefix("switchyard-bouncer-")
        .tempdir()
        .expect("temp dir");
    let port = free_port();
    let ini = dir.path().join("pgbouncer.ini");
    std::fs::write(
        &ini,
        format!(
            "[databases]\n* = host=127.0.0.1 port={pg_port} user=postgres\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n\
             unix_socket_dir =\nauth_type = any\npool_mode = {mode}\n\
             default_pool_size = 20\nmax_client_conn = 200\n\
             ignore_startup_parameters = extra_float_digits\nlogfile = {}\n",
            dir.path().join("log").display()
        ),
    )
    .expect("write ini");
    let _ = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(dir.path())
        .status();
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", &bin]);
        c
    } else {
        Command::new(&bin)
    };
    let child = cmd
        .arg(&ini)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pgbouncer");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "pgbouncer did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Bouncer {
        child,
        port,
        _dir: dir,
    }
}

#[test]
fn ha_1_e_transaction_pooling_is_refused_at_start_and_session_pooling_works() {
    let _one = serial();
    runtime().block_on(async {
        let url = support_pg::fresh_db("ha1_bouncer").await;
        let db = db_of(&url);
        let pg_port = port_of(&url);
        let tx = start_bouncer(pg_port, "transaction");
        let through = format!("postgres://postgres@127.0.0.1:{}/{db}", tx.port);
        for _ in 0..3 {
            let e = SqlStore::connect(&through, opts())
                .await
                .expect_err("transaction pooling is refused");
            assert!(matches!(e, StoreSetupError::Pooler(_)), "{e:?}");
            assert!(e.to_string().contains("pool_mode=session"), "{e}");
        }
        let session = start_bouncer(pg_port, "session");
        let through = format!("postgres://postgres@127.0.0.1:{}/{db}", session.port);
        let store = SqlStore::connect(&through, opts())
            .await
            .expect("session pooling works");
        store.put_settings(&config(), true).await.expect("a write");
    });
}

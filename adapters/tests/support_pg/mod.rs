//! A throwaway PostgreSQL for the handoff tests, one per test binary.
//!
//! `SWITCHYARD_TEST_PG_URL` (an admin URL, e.g. `postgres://postgres@127.0.0.1:5432/postgres`)
//! wins. Otherwise the first test that asks starts a private cluster from the image's
//! `initdb` / `pg_ctl` (PostgreSQL 15): a temp dir, a free loopback port, the unix socket in
//! the temp dir; as root through `runuser -u postgres --` (initdb refuses root). A watchdog
//! process stops it (`pg_ctl stop -m immediate`) and removes the dir once this test process
//! is gone, however it ends. If PostgreSQL cannot be started the tests fail with the reason:
//! they are never skipped silently.
#![allow(dead_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection};

static CLUSTER: OnceLock<Result<String, String>> = OnceLock::new();
static NEXT_DB: AtomicU64 = AtomicU64::new(0);

const PG_BIN_DIRS: &[&str] = &["/usr/local/bin", "/usr/lib/postgresql/15/bin"];

fn pg_bin(name: &str) -> Result<PathBuf, String> {
    PG_BIN_DIRS
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .ok_or_else(|| format!("PostgreSQL binary {name} not found in {PG_BIN_DIRS:?}"))
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Run a PostgreSQL server binary, as the `postgres` user when we are root.
fn pg_command(bin: &Path, as_postgres: bool) -> Command {
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

fn start_cluster() -> Result<String, String> {
    if let Ok(url) = std::env::var("SWITCHYARD_TEST_PG_URL") {
        return Ok(url);
    }
    let initdb = pg_bin("initdb")?;
    let pg_ctl = pg_bin("pg_ctl")?;
    let root = running_as_root();
    let dir = tempfile::Builder::new()
        .prefix("switchyard-pg-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?
        .keep();
    if root {
        let st = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !st.success() {
            return Err(format!("chown postgres {} failed", dir.display()));
        }
    }
    let data = dir.join("data");
    let out = pg_command(&initdb, root)
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut last = String::new();
    for _ in 0..3 {
        let port = free_port()?;
        // Throwaway by default (nothing here must survive a crash). The SQL bench measures
        // durable commits with `SWITCHYARD_TEST_PG_DURABLE=1`: PostgreSQL's own defaults.
        let durability = if std::env::var_os("SWITCHYARD_TEST_PG_DURABLE").is_some() {
            "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
        } else {
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        };
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 {durability} -c max_connections=200",
            dir.display()
        );
        let out = pg_command(&pg_ctl, root)
            .arg("-D")
            .arg(&data)
            .args(["-o", &opts, "-l"])
            .arg(dir.join("log"))
            .args(["-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .output()
            .map_err(|e| format!("pg_ctl start: {e}"))?;
        if out.status.success() {
            spawn_watchdog(&pg_ctl, &data, &dir, root)?;
            return Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"));
        }
        last = format!(
            "pg_ctl start failed: {} {}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(dir.join("log")).unwrap_or_default()
        );
    }
    Err(last)
}

/// Stops the cluster once this process is gone (normal exit, panic or kill).
fn spawn_watchdog(pg_ctl: &Path, data: &Path, dir: &Path, root: bool) -> Result<(), String> {
    let pid = std::process::id();
    let stop = if root {
        format!(
            "runuser -u postgres -- {} -D {} stop -m immediate",
            pg_ctl.display(),
            data.display()
        )
    } else {
        format!(
            "{} -D {} stop -m immediate",
            pg_ctl.display(),
            data.display()
        )
    };
    let script = format!(
        "while [ -d /proc/{pid} ]; do sleep 0.3; done; {stop} >/dev/null 2>&1; rm -rf {}",
        dir.display()
    );
    use std::os::unix::process::CommandExt;
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(|_| ())
        .map_err(|e| format!("watchdog: {e}"))
}

/// The admin URL of the shared cluster. Panics (fails the test) with the reason if
/// PostgreSQL cannot be started: PG tests are never skipped silently.
pub fn admin_url() -> String {
    match CLUSTER.get_or_init(start_cluster) {
        Ok(url) => url.clone(),
        Err(e) => panic!(
            "PostgreSQL for the handoff tests could not be started ({e}); set \
             SWITCHYARD_TEST_PG_URL to an admin URL of a running server to use that instead"
        ),
    }
}

fn with_db(admin: &str, db: &str) -> String {
    let after_scheme = admin.find("://").map_or(0, |i| i + 3);
    let query = admin.find('?').map_or("", |q| &admin[q..]);
    let path = admin[after_scheme..]
        .find('/')
        .map_or(admin.len() - query.len(), |p| after_scheme + p);
    format!("{}/{db}{query}", &admin[..path])
}

/// A fresh database for one test; returns its URL.
pub async fn fresh_db(tag: &str) -> String {
    let admin = admin_url();
    let n = NEXT_DB.fetch_add(1, Ordering::SeqCst);
    let name = format!(
        "ho_{}_{}_{}",
        tag.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(20)
            .collect::<String>()
            .to_lowercase(),
        std::process::id(),
        n
    );
    let mut conn = connect_admin(&admin).await;
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
    with_db(&admin, &name)
}

async fn connect_admin(admin: &str) -> PgConnection {
    let mut last = String::new();
    for _ in 0..50 {
        match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(admin)).await {
            Ok(Ok(c)) => return c,
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "connect timed out".into(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("cannot connect to the test PostgreSQL at {admin}: {last}");
}

fn db_name(url: &str) -> String {
    let tail = url.rsplit('/').next().unwrap_or_default();
    tail.split('?').next().unwrap_or_default().to_owned()
}

/// DB outage for one database: refuse new connections and kill its backends (the server stays
/// up for the other tests of this binary).
pub async fn outage_begin(url: &str) {
    let name = db_name(url);
    let mut conn = connect_admin(&admin_url()).await;
    conn.execute(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false").as_str())
        .await
        .unwrap_or_else(|e| panic!("ALTER DATABASE {name}: {e}"));
    terminate_backends(url).await;
}

/// Kill every backend of one database (`pg_terminate_backend`).
pub async fn terminate_backends(url: &str) -> u64 {
    let name = db_name(url);
    let mut conn = connect_admin(&admin_url()).await;
    let rows = sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&name)
    .fetch_all(&mut conn)
    .await
    .unwrap_or_else(|e| panic!("pg_terminate_backend on {name}: {e}"));
    rows.len() as u64
}

pub async fn outage_end(url: &str) {
    let name = db_name(url);
    let mut conn = connect_admin(&admin_url()).await;
    conn.execute(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true").as_str())
        .await
        .unwrap_or_else(|e| panic!("ALTER DATABASE {name}: {e}"));
}

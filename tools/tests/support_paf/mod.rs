//! HA-1: a real highly available PostgreSQL formation for the integration tests, built with
//! Debian's pg_auto_failover 2.0 (`pg_autoctl`, packages `postgresql-15-auto-failover` and
//! `pg-auto-failover-cli`; `.ci/run` installs them) on loopback.
//!
//! One [`Formation`] is a monitor and two Postgres 15 nodes (`node1`, `node2`) of the formation
//! `default`, database `sy`, synchronous replication (pg_auto_failover's default with two nodes:
//! `synchronous_standby_names = 'ANY 1 (…)'`), each run by its own `pg_autoctl run` keeper. It
//! lives in a temp dir, on free loopback ports; as root everything runs as the `postgres` user
//! through `runuser -u postgres --` (initdb refuses root), like `adapters/tests/support_pg`.
//! A watchdog process kills the formation's processes and removes the dir once this test
//! process is gone, however it ends. Nothing is skipped: a missing `pg_autoctl` is an error.
//!
//! Tuned for fast failover (the monitor's GUCs, see [`MONITOR_GUCS`]): a SIGKILLed primary is
//! replaced by a writable standby in about 4 s on an idle 2-core machine.
//!
//! The client: [`Formation::uri`] is what `pg_autoctl show uri --formation default` prints,
//! `postgres://127.0.0.1:P1,127.0.0.1:P2/sy?target_session_attrs=read-write&sslmode=prefer`:
//! it names no user, so libpq and sqlx connect as `PGUSER` or else the OS user (root in CI).
//! The harness creates that role ([`Formation::user`], password-less, trust) and makes it the
//! owner of `sy`, so it may run the store's migrations. The harness's own probe writes go to
//! `paf_harness.probe` as the `postgres` superuser, out of the store's way.
#![allow(dead_code)]

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection, Row};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
const AUTOCTL_DIRS: &[&str] = &["/usr/bin", "/usr/lib/postgresql/15/bin", "/usr/local/bin"];
const INSTALL_HINT: &str = "install the Debian packages `postgresql-15-auto-failover \
     pg-auto-failover-cli` (.ci/run installs them)";

/// The monitor's failover settings (ALTER SYSTEM + reload; all are `sighup`). Defaults in
/// brackets. A node is failed over once the monitor's health check fails AND its keeper has not
/// reported for `node_considered_unhealthy_timeout`; the standby is then promoted but kept
/// read-only (`default_transaction_read_only`, state `stop_replication`) until the old primary
/// reports it demoted or `primary_demote_timeout` passes, which is what dominated the default
/// failover time.
pub const MONITOR_GUCS: &[(&str, &str)] = &[
    // Check every node every 1 s [5 s].
    ("pgautofailover.health_check_period", "1000"),
    // Connect timeout of a check 1 s [5 s].
    ("pgautofailover.health_check_timeout", "1000"),
    // One retry [2], 0.5 s later [2 s].
    ("pgautofailover.health_check_max_retries", "1"),
    ("pgautofailover.health_check_retry_delay", "500"),
    // Keeper silent for 2 s [20 s] (keepers report every second).
    ("pgautofailover.node_considered_unhealthy_timeout", "2000"),
    // A dead primary cannot confirm its demotion: wait 1 s [30 s] before the standby's writes.
    ("pgautofailover.primary_demote_timeout", "1000"),
    // The monitor may fail over 1 s [10 s] after it started.
    ("pgautofailover.startup_grace_period", "1000"),
];

/// Per-node Postgres settings written to `postgresql.auto.conf` before pg_autoctl sees the data
/// dir (ALTER SYSTEM's file wins over pg_autoctl's computed tuning, e.g. a 6 GB
/// `shared_buffers` on this machine). `fsync = off`: throwaway data (a SIGKILL does not lose
/// committed data without an OS crash). `full_page_writes` stays on: pg_rewind needs it.
const NODE_CONF: &str = "fsync = off\nshared_buffers = '64MB'\nmax_connections = 100\n";
const MONITOR_CONF: &str = "fsync = off\nshared_buffers = '32MB'\n";

/// The states in which a node is the formation's writable node.
const PRIMARY_STATES: &[&str] = &[
    "single",
    "wait_primary",
    "primary",
    "join_primary",
    "apply_settings",
];

pub struct Formation {
    dir: PathBuf,
    root: bool,
    autoctl: PathBuf,
    monitor_port: u16,
    ports: [u16; 2],
    uri: String,
    user: String,
    /// `runuser`/`pg_autoctl run` of the monitor and the two nodes (None once killed).
    monitor_keeper: Option<Child>,
    keepers: [Option<Child>; 2],
    /// When the formation became ready (primary + secondary).
    pub ready_at: Instant,
}

fn find_autoctl() -> Result<PathBuf, String> {
    AUTOCTL_DIRS
        .iter()
        .map(|d| Path::new(d).join("pg_autoctl"))
        .find(|p| p.exists())
        .ok_or_else(|| format!("pg_autoctl not found in {AUTOCTL_DIRS:?}: {INSTALL_HINT}"))
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// The user libpq and sqlx connect as when a URL names none: `PGUSER`, else the OS user.
fn client_user() -> Result<String, String> {
    if let Ok(u) = std::env::var("PGUSER") {
        if !u.is_empty() {
            return Ok(u);
        }
    }
    let uid = std::fs::metadata("/proc/self")
        .map_err(|e| format!("stat /proc/self: {e}"))?
        .uid();
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {e}"))?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == uid.to_string())
        .map(|f| f[0].to_owned())
        .ok_or_else(|| format!("no /etc/passwd entry for uid {uid}"))
}

fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    // Hold all listeners at once so the ports are distinct.
    let ls = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    ls.iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| format!("local_addr: {e}"))
        })
        .collect()
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("({e})"));
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    format!("--- {} ---\n{}", path.display(), all[from..].join("\n"))
}

/// Run one SQL text (one or more statements) on `url` in a thread of its own with its own
/// runtime, so this is callable from sync tests and from inside a tokio runtime alike. Every
/// column must be text (cast in SQL). Bounded by `within` (a frozen server never answers).
fn sql(url: &str, text: &str, within: Duration) -> Result<Vec<Vec<Option<String>>>, String> {
    let (url, text) = (url.to_owned(), text.to_owned());
    let worker = std::thread::spawn(move || -> Result<Vec<Vec<Option<String>>>, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        rt.block_on(async {
            let work = async {
                let mut c = PgConnection::connect(&url)
                    .await
                    .map_err(|e| format!("connect {url}: {e}"))?;
                let rows = sqlx::raw_sql(&text)
                    .fetch_all(&mut c)
                    .await
                    .map_err(|e| format!("{url}: {text}: {e}"))?;
                let _ = c.close().await;
                rows.iter()
                    .map(|r| {
                        (0..r.len())
                            .map(|i| {
                                r.try_get::<Option<String>, _>(i)
                                    .map_err(|e| format!("column {i} of {text}: {e}"))
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            tokio::time::timeout(within, work)
                .await
                .map_err(|_| format!("{url}: no answer within {within:?} to {text}"))?
        })
    });
    worker
        .join()
        .map_err(|_| "the SQL thread panicked".to_owned())?
}

/// Pids of `roots` and all their descendants (from /proc's ppid links).
fn process_tree(roots: &[u32]) -> Vec<u32> {
    let mut links = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // "pid (comm) state ppid …": comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse::<u32>().ok())
            {
                links.push((pid, ppid));
            }
        }
    }
    let mut out: Vec<u32> = roots
        .iter()
        .copied()
        .filter(|p| Path::new(&format!("/proc/{p}")).exists())
        .collect();
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for &(pid, ppid) in &links {
            if ppid == parent && !out.contains(&pid) {
                out.push(pid);
            }
        }
        i += 1;
    }
    out
}

fn signal(sig: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .args(pids.iter().map(|p| p.to_string()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn postmaster_pid(pgdata: &Path) -> Option<u32> {
    std::fs::read_to_string(pgdata.join("postmaster.pid"))
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

impl Formation {
    /// Monitor + two nodes, tuned for fast failover; returns once the monitor shows a
    /// `primary` and a `secondary` (at most about 2 minutes). `tag` names the temp dir.
    pub fn start(tag: &str) -> Result<Formation, String> {
        let autoctl = find_autoctl()?;
        for b in ["initdb", "pg_ctl", "postgres"] {
            if !Path::new(PG_BIN).join(b).exists() {
                return Err(format!("{PG_BIN}/{b} missing: {INSTALL_HINT}"));
            }
        }
        let root = running_as_root();
        let user = client_user()?;
        let clean: String = tag
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(24)
            .collect();
        let dir = tempfile::Builder::new()
            .prefix(&format!("switchyard-paf-{clean}-"))
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?
            .keep();
        for sub in ["config", "share", "run", "logs"] {
            std::fs::create_dir_all(dir.join(sub))
                .map_err(|e| format!("mkdir {}/{sub}: {e}", dir.display()))?;
        }
        if root {
            // The runtime dir has to exist for pg_autoctl to keep its pid files in it.
            std::fs::create_dir_all("/var/run/postgresql")
                .map_err(|e| format!("mkdir /var/run/postgresql: {e}"))?;
            for (args, what) in [
                (
                    vec!["-R", "postgres:postgres"],
                    dir.to_string_lossy().into_owned(),
                ),
                (vec!["postgres:postgres"], "/var/run/postgresql".to_owned()),
            ] {
                let st = Command::new("chown")
                    .args(&args)
                    .arg(&what)
                    .status()
                    .map_err(|e| format!("chown: {e}"))?;
                if !st.success() {
                    return Err(format!("chown postgres {what} failed"));
                }
            }
        }
        spawn_watchdog(&dir)?;
        let ports = free_ports(3)?;
        let mut f = Formation {
            dir,
            root,
            autoctl,
            monitor_port: ports[0],
            ports: [ports[1], ports[2]],
            uri: String::new(),
            user,
            monitor_keeper: None,
            keepers: [None, None],
            ready_at: Instant::now(),
        };
        match f.build() {
            Ok(()) => Ok(f),
            Err(e) => Err(format!("{e}\n{}", f.logs())),
        }
    }

    fn build(&mut self) -> Result<(), String> {
        let pg_ctl = format!("{PG_BIN}/pg_ctl");
        // The monitor.
        let mdata = self.pgdata_monitor();
        self.initdb(&mdata, MONITOR_CONF)?;
        let mport = self.monitor_port.to_string();
        self.autoctl_step(
            "create-monitor",
            &[
                "create",
                "monitor",
                "--pgdata",
                &path_str(&mdata),
                "--pgport",
                &mport,
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
                "--pgctl",
                &pg_ctl,
            ],
            Duration::from_secs(60),
        )?;
        // pg_autoctl starts Postgres with `-h <listen_addresses>`: loopback only.
        self.autoctl_step(
            "config-monitor",
            &[
                "config",
                "set",
                "--pgdata",
                &path_str(&mdata),
                "postgresql.listen_addresses",
                "127.0.0.1",
            ],
            Duration::from_secs(20),
        )?;
        self.monitor_keeper = Some(self.spawn_keeper(&mdata, "monitor")?);
        // One statement per query: ALTER SYSTEM refuses a (implicit) transaction block.
        for (k, v) in MONITOR_GUCS {
            self.retry_sql(
                &self.monitor_admin_url(),
                &format!("ALTER SYSTEM SET {k} = '{v}'"),
                Duration::from_secs(30),
            )?;
        }
        self.retry_sql(
            &self.monitor_admin_url(),
            "SELECT pg_reload_conf()::text",
            Duration::from_secs(10),
        )?;
        let monitor_uri = format!(
            "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=prefer",
            self.monitor_port
        );
        // node1 (becomes `single`, then the primary), then node2 (a base backup of node1).
        for i in 0..2 {
            let data = self.pgdata(i);
            let name = format!("node{}", i + 1);
            if i == 0 {
                self.initdb(&data, NODE_CONF)?;
            }
            let port = self.ports[i].to_string();
            self.autoctl_step(
                &format!("create-{name}"),
                &[
                    "create",
                    "postgres",
                    "--pgdata",
                    &path_str(&data),
                    "--pgport",
                    &port,
                    "--hostname",
                    "127.0.0.1",
                    "--listen",
                    "127.0.0.1",
                    "--name",
                    &name,
                    "--auth",
                    "trust",
                    "--no-ssl",
                    "--dbname",
                    "sy",
                    "--monitor",
                    &monitor_uri,
                    "--pgctl",
                    &pg_ctl,
                ],
                Duration::from_secs(120),
            )?;
            self.keepers[i] = Some(self.spawn_keeper(&data, &name)?);
            if i == 0 {
                self.wait_states(&[("single", "single")], Duration::from_secs(60))?;
            }
        }
        self.wait_states(
            &[("primary", "primary"), ("secondary", "secondary")],
            Duration::from_secs(90),
        )?;
        self.ready_at = Instant::now();
        // The client role (what a URL without a user connects as) owns `sy`: the store's
        // migrations may create tables in its public schema. And the harness's probe table.
        let p = self
            .primary()
            .ok_or("no primary right after the formation became ready")?;
        let role = self.user.replace('"', "\"\"");
        self.retry_sql(
            &self.admin_url(p),
            &format!(
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{}') \
                 THEN CREATE ROLE \"{role}\" LOGIN; END IF; END $$; \
                 ALTER DATABASE sy OWNER TO \"{role}\"; \
                 CREATE SCHEMA IF NOT EXISTS paf_harness; \
                 CREATE TABLE IF NOT EXISTS paf_harness.probe \
                 (id bigserial PRIMARY KEY, node int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());",
                self.user.replace('\'', "''")
            ),
            Duration::from_secs(30),
        )?;
        let out = self.autoctl_step(
            "show-uri",
            &[
                "show",
                "uri",
                "--formation",
                "default",
                "--pgdata",
                &path_str(&self.pgdata_monitor()),
            ],
            Duration::from_secs(20),
        )?;
        self.uri = out.trim().to_owned();
        if !self.uri.starts_with("postgres") {
            return Err(format!("unexpected `pg_autoctl show uri` output: {out:?}"));
        }
        Ok(())
    }

    /// The multi-host URL, exactly as `pg_autoctl show uri --formation default` prints it
    /// (trimmed): `postgres://127.0.0.1:P1,127.0.0.1:P2/sy?target_session_attrs=read-write&sslmode=prefer`.
    pub fn uri(&self) -> String {
        self.uri.clone()
    }

    /// The role a URL without a user connects as here (`PGUSER` or the OS user); it owns `sy`.
    pub fn user(&self) -> String {
        self.user.clone()
    }

    /// [`uri`](Self::uri) with [`user`](Self::user) written in (`postgres://USER@…`).
    pub fn uri_with_user(&self) -> String {
        match self.uri.find("://") {
            Some(i) => format!("{}{}@{}", &self.uri[..i + 3], self.user, &self.uri[i + 3..]),
            None => self.uri.clone(),
        }
    }

    /// Single-host URLs of node1 and node2, same (absent) user, db and sslmode as `uri()`.
    pub fn node_urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|p| format!("postgres://127.0.0.1:{p}/sy?sslmode=prefer"))
            .collect()
    }

    pub fn node_ports(&self) -> [u16; 2] {
        self.ports
    }

    /// The superuser URL of node `i`'s db `sy` (the harness's own probes).
    pub fn admin_url(&self, i: usize) -> String {
        format!("postgres://postgres@127.0.0.1:{}/sy", self.ports[i])
    }

    pub fn monitor_admin_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/pg_auto_failover",
            self.monitor_port
        )
    }

    /// (node index, reported state, goal state, health) per node, from the monitor.
    pub fn states(&self) -> Result<Vec<(usize, String, String, String)>, String> {
        let rows = sql(
            &self.monitor_admin_url(),
            "SELECT nodeport::text, reportedstate::text, goalstate::text, health::text \
             FROM pgautofailover.node ORDER BY nodeid",
            Duration::from_secs(5),
        )?;
        let mut out = Vec::new();
        for r in rows {
            let cell = |k: usize| r.get(k).cloned().flatten().unwrap_or_default();
            let port: u16 = cell(0)
                .parse()
                .map_err(|e| format!("monitor nodeport {:?}: {e}", cell(0)))?;
            if let Some(i) = self.ports.iter().position(|p| *p == port) {
                out.push((i, cell(1), cell(2), cell(3)));
            }
        }
        Ok(out)
    }

    /// The monitor's state table as text (for messages).
    pub fn state_text(&self) -> String {
        match self.states() {
            Ok(s) => s
                .iter()
                .map(|(i, rep, goal, h)| {
                    format!("node{} reported={rep} assigned={goal} health={h}", i + 1)
                })
                .collect::<Vec<_>>()
                .join("; "),
            Err(e) => format!("(monitor state unavailable: {e})"),
        }
    }

    /// The node the monitor has assigned a primary state (single / wait_primary / primary /
    /// join_primary / apply_settings): its decision, which the node's keeper may not have
    /// reported back yet (a promoted standby can take writes while it still reports
    /// `stop_replication`). See [`states`](Self::states) for both.
    pub fn primary(&self) -> Option<usize> {
        self.states()
            .ok()?
            .into_iter()
            .find_map(|(i, _, goal, _)| PRIMARY_STATES.contains(&goal.as_str()).then_some(i))
    }

    /// A host crash of node `i`: SIGKILL its keeper and every Postgres process of it (frozen
    /// with SIGSTOP first so that nothing restarts in between). The node stays dead.
    pub fn kill_node(&mut self, i: usize) {
        let mut roots = Vec::new();
        if let Some(k) = &self.keepers[i] {
            roots.push(k.id());
        }
        if let Some(pm) = postmaster_pid(&self.pgdata(i)) {
            roots.push(pm);
        }
        let tree = process_tree(&roots);
        signal("STOP", &tree);
        signal("KILL", &tree);
        if let Some(mut k) = self.keepers[i].take() {
            let _ = k.wait();
        }
    }

    /// Start node `i`'s keeper again after [`kill_node`](Self::kill_node): the monitor has it
    /// `demoted`; its keeper rewinds it (pg_rewind) and it rejoins as a secondary (about 7 s
    /// by hand on an idle machine). A no-op while its keeper runs.
    pub fn restart_node(&mut self, i: usize) -> Result<(), String> {
        if self.keepers[i].is_none() {
            let name = format!("node{}-restart", i + 1);
            self.keepers[i] = Some(self.spawn_keeper(&self.pgdata(i), &name)?);
        }
        Ok(())
    }

    /// `pg_autoctl perform switchover`: returns once pg_autoctl reports it done (the old
    /// primary a secondary again), which is several seconds after writes resume.
    pub fn switchover(&self) -> Result<(), String> {
        self.autoctl_step(
            "switchover",
            &[
                "perform",
                "switchover",
                "--formation",
                "default",
                "--pgdata",
                &path_str(&self.pgdata_monitor()),
            ],
            Duration::from_secs(90),
        )
        .map(|_| ())
        .map_err(|e| format!("{e}\n{}\n{}", self.state_text(), self.logs()))
    }

    fn postgres_tree(&self, i: usize) -> Vec<u32> {
        postmaster_pid(&self.pgdata(i))
            .map(|pm| process_tree(&[pm]))
            .unwrap_or_default()
    }

    /// SIGSTOP node `i`'s postmaster and all its children (its keeper keeps running, and
    /// soon stops reporting, stuck on its own Postgres).
    pub fn freeze_node(&self, i: usize) {
        signal("STOP", &self.postgres_tree(i));
    }

    /// SIGCONT what [`freeze_node`](Self::freeze_node) stopped.
    pub fn thaw_node(&self, i: usize) {
        signal("CONT", &self.postgres_tree(i));
    }

    /// One write on node `i` (its own connection, bounded by `within`): Ok once the INSERT
    /// committed with `transaction_read_only` off on a server not in recovery.
    pub fn write_once(&self, i: usize, within: Duration) -> Result<(), String> {
        let rows = sql(
            &self.admin_url(i),
            &format!(
                "INSERT INTO paf_harness.probe(node) VALUES ({i}) \
                 RETURNING current_setting('transaction_read_only'), pg_is_in_recovery()::text"
            ),
            within,
        )?;
        match rows.first().map(|r| r.as_slice()) {
            Some([Some(ro), Some(rec)]) if ro == "off" && rec == "false" => Ok(()),
            other => Err(format!(
                "node{}: wrote but transaction_read_only/pg_is_in_recovery = {other:?}",
                i + 1
            )),
        }
    }

    /// Poll node `i` every ~50 ms with a real write; the Instant the first one committed with
    /// `transaction_read_only` off.
    pub fn wait_writable(&self, i: usize, within: Duration) -> Result<Instant, String> {
        let deadline = Instant::now() + within;
        let mut last = String::from("no attempt");
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "node{} not writable within {within:?}: last error: {last}\nmonitor: {}\n{}",
                    i + 1,
                    self.state_text(),
                    self.logs()
                ));
            }
            let attempt = (deadline - now).min(Duration::from_secs(2));
            match self.write_once(i, attempt) {
                Ok(()) => return Ok(Instant::now()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The tails of the pg_autoctl logs (keepers and create steps).
    pub fn logs(&self) -> String {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.dir.join("logs"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.sort();
        names
            .iter()
            .map(|p| tail(p, 25))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn pgdata(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{}", i + 1))
    }

    fn pgdata_monitor(&self) -> PathBuf {
        self.dir.join("monitor")
    }

    /// A command as the `postgres` user when we are root, with pg_autoctl's XDG dirs (its
    /// config, state and pid files) inside the formation's dir.
    fn command(&self, program: &Path) -> Command {
        let mut c = if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "env"]);
            for (k, v) in self.env() {
                c.arg(format!("{k}={v}"));
            }
            c.arg(program);
            c
        } else {
            let mut c = Command::new(program);
            c.envs(self.env());
            c
        };
        c.stdin(Stdio::null());
        c
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("XDG_CONFIG_HOME".into(), path_str(&self.dir.join("config"))),
            ("XDG_DATA_HOME".into(), path_str(&self.dir.join("share"))),
            ("XDG_RUNTIME_DIR".into(), path_str(&self.dir.join("run"))),
            ("PG_CONFIG".into(), format!("{PG_BIN}/pg_config")),
            ("PATH".into(), format!("{PG_BIN}:/usr/bin:/bin")),
        ]
    }

    fn initdb(&self, data: &Path, conf: &str) -> Result<(), String> {
        let log = self.log_file(&format!("initdb-{}", file_name(data)))?;
        let st = self
            .command(&Path::new(PG_BIN).join("initdb"))
            .arg("-D")
            .arg(data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdout(log.try_clone().map_err(|e| format!("log: {e}"))?)
            .stderr(log)
            .status()
            .map_err(|e| format!("initdb: {e}"))?;
        if !st.success() {
            return Err(format!("initdb {} failed ({st})", data.display()));
        }
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.auto.conf"))
            .and_then(|mut f| f.write_all(conf.as_bytes()))
            .map_err(|e| format!("postgresql.auto.conf of {}: {e}", data.display()))
    }

    fn log_file(&self, name: &str) -> Result<File, String> {
        let p = self.dir.join("logs").join(format!("{name}.log"));
        File::create(&p).map_err(|e| format!("{}: {e}", p.display()))
    }

    /// Run `pg_autoctl ARGS` to completion within `within`; its stdout on success.
    fn autoctl_step(&self, name: &str, args: &[&str], within: Duration) -> Result<String, String> {
        let out_path = self.dir.join("logs").join(format!("{name}.out"));
        let out = File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
        let err = self.log_file(name)?;
        let mut child = self
            .command(&self.autoctl)
            .args(args)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("pg_autoctl {name}: {e}"))?;
        let deadline = Instant::now() + within;
        loop {
            match child.try_wait() {
                Ok(Some(st)) if st.success() => {
                    return std::fs::read_to_string(&out_path)
                        .map_err(|e| format!("{}: {e}", out_path.display()));
                }
                Ok(Some(st)) => return Err(format!("pg_autoctl {} failed ({st})", args.join(" "))),
                Ok(None) if Instant::now() > deadline => {
                    signal("KILL", &process_tree(&[child.id()]));
                    let _ = child.wait();
                    return Err(format!(
                        "pg_autoctl {} did not finish within {within:?}",
                        args.join(" ")
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(format!("pg_autoctl {name}: {e}")),
            }
        }
    }

    fn spawn_keeper(&self, data: &Path, name: &str) -> Result<Child, String> {
        let log = self.log_file(&format!("keeper-{name}"))?;
        self.command(&self.autoctl)
            .args(["run", "--pgdata"])
            .arg(data)
            .stdout(log.try_clone().map_err(|e| format!("log: {e}"))?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("pg_autoctl run {name}: {e}"))
    }

    fn retry_sql(&self, url: &str, text: &str, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            match sql(url, text, Duration::from_secs(5)) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// Wait until the monitor shows exactly these (reported, assigned) states, in any order,
    /// e.g. `&[("primary", "primary"), ("secondary", "secondary")]`.
    pub fn wait_states(&self, want: &[(&str, &str)], within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let now = self.states();
            if let Ok(s) = &now {
                let mut have: Vec<(&str, &str)> = s
                    .iter()
                    .map(|(_, r, g, _)| (r.as_str(), g.as_str()))
                    .collect();
                let mut want = want.to_vec();
                have.sort();
                want.sort();
                if have == want {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the monitor did not show {want:?} within {within:?}: {}",
                    self.state_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn stop_all(&mut self) {
        let mut roots = Vec::new();
        for k in self
            .keepers
            .iter()
            .chain(std::iter::once(&self.monitor_keeper))
            .flatten()
        {
            roots.push(k.id());
        }
        for data in [self.pgdata(0), self.pgdata(1), self.pgdata_monitor()] {
            if let Some(pm) = postmaster_pid(&data) {
                roots.push(pm);
            }
        }
        let tree = process_tree(&roots);
        signal("CONT", &tree);
        signal("KILL", &tree);
        for k in self
            .keepers
            .iter_mut()
            .chain(std::iter::once(&mut self.monitor_keeper))
        {
            if let Some(mut c) = k.take() {
                let _ = c.wait();
            }
        }
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        self.stop_all();
        if std::env::var_os("SWITCHYARD_KEEP_PAF").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Once this test process is gone (normal exit, panic or kill), SIGKILL every process of the
/// formation — the keepers (each `pg_autoctl run`, its own process group), then each
/// postmaster (its children exit on postmaster death) — and remove the dir.
fn spawn_watchdog(dir: &Path) -> Result<(), String> {
    let pid = std::process::id();
    let d = dir.display();
    let script = format!(
        "while [ -d /proc/{pid} ]; do sleep 0.3; done; \
         for f in $(find {d}/run -name pg_autoctl.pid 2>/dev/null); do \
           k=$(head -n1 \"$f\"); [ -n \"$k\" ] && kill -KILL -- -\"$(ps -o pgid= -p \"$k\" | tr -d ' ')\" \"$k\"; \
         done; \
         for n in node1 node2 monitor; do \
           p=$(head -n1 {d}/$n/postmaster.pid 2>/dev/null); [ -n \"$p\" ] && kill -KILL \"$p\"; \
         done; \
         sleep 1; rm -rf {d}"
    );
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

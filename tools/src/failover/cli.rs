//! The failover subcommands of `switchyard`: `relay`, `client`, `drill`, `keygen`,
//! `sign-directory`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use clap::{Args, Subcommand, ValueEnum};
use switchyard_core::failover::{
    RelayUrl, Thresholds, MAX_CANDIDATES, VAR_CHECK_MS, VAR_COOLDOWN_MS, VAR_DEADLINE_MS,
    VAR_EXEMPT, VAR_GRACE_MS, VAR_HEARTBEAT_MS, VAR_HEARTBEAT_TIMEOUT_MS, VAR_MIN_ATTEMPTS,
    VAR_PROBE_MAX_MS, VAR_PROBE_MIN_MS, VAR_UP_TIMEOUT_MS,
};

use super::drill::{self, Scene};
use super::timeline;
use crate::conform_online::OnlineConformance;
use switchyard_adapters::failover::channel::{HeartbeatStats, ReconnectConfig};
use switchyard_adapters::failover::directory::{self, DirectoryConfig, DirectoryPayload};
use switchyard_adapters::failover::driver::{ClientConfig, ClientHandle, ClientJournal, Readiness};
use switchyard_adapters::failover::relay::{RelayConfig, RelayHandle, RELAY_LIMITS};
use switchyard_adapters::journal::{Journal, JournalArgs};
use switchyard_adapters::lifecycle;
use switchyard_adapters::probes::{self, Probe, Sample};
use switchyard_adapters::serve::LimitArgs;
use switchyard_adapters::stop::Stop;

#[derive(Subcommand, Debug)]
pub enum FailoverCommand {
    /// Run a relay server: WebSocket channels on one or more paths, and GET /status.
    Relay(RelayArgs),
    /// Run a client: one channel to a relay from the signed directory, with failover.
    Client(Box<ClientArgs>),
    /// Run the seed's failover drills against local relays; exits 1 on any FAIL.
    Drill(DrillArgs),
    /// Generate an ed25519 key pair for signing the relay directory.
    Keygen(KeygenArgs),
    /// Sign a relay directory.
    SignDirectory(SignArgs),
}

#[derive(Args, Debug)]
pub struct RelayArgs {
    /// Address to listen on.
    #[arg(long, env = "SWITCHYARD_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// A URL path that accepts channels (repeat, or comma-separate, for several candidate
    /// URLs on one host).
    #[arg(
        long = "path",
        env = "SWITCHYARD_RELAY_PATHS",
        value_delimiter = ',',
        default_value = "/dshs-relay"
    )]
    paths: Vec<String>,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Pin one relay URL: the candidate list is just this URL (also `DSHS_RELAY_URL`).
    #[arg(long, env = "DSHS_RELAY_URL", conflicts_with = "directory")]
    url: Option<String>,
    /// The signed directory file (re-read every `refresh_after_seconds`).
    #[arg(long, env = "SWITCHYARD_DIRECTORY", requires = "public_key")]
    directory: Option<PathBuf>,
    /// The directory signer's public key (base64), or `@FILE` to read it from a file.
    #[arg(long, env = "SWITCHYARD_PUBLIC_KEY")]
    public_key: Option<String>,
    /// Overrides RELAY_FAILOVER_COOLDOWN_MS (digits only, like the variable).
    #[arg(long)]
    cooldown_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_DEADLINE_MS.
    #[arg(long)]
    deadline_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_GRACE_MS.
    #[arg(long)]
    grace_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_MIN_ATTEMPTS (0 switches the supervisor off).
    #[arg(long)]
    min_attempts: Option<String>,
    /// Overrides RELAY_FAILOVER_CHECK_MS.
    #[arg(long)]
    check_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_UP_TIMEOUT_MS.
    #[arg(long)]
    up_timeout_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_EXEMPT (0 or 1).
    #[arg(long)]
    exempt: Option<String>,
    /// Overrides RELAY_FAILOVER_PROBE_MIN_MS: the first interval between probe rounds once the
    /// exemption budget is spent (FO-X3).
    #[arg(long)]
    probe_min_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_PROBE_MAX_MS: the largest interval between probe rounds; 0
    /// switches probing off (the seed's behaviour).
    #[arg(long)]
    probe_max_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_HEARTBEAT_MS: how often the channel pings its relay (FO-X4).
    #[arg(long)]
    heartbeat_ms: Option<String>,
    /// Overrides RELAY_FAILOVER_HEARTBEAT_TIMEOUT_MS: how long after the last pong the channel
    /// counts as lost (FO-X4); HEARTBEAT_TIMEOUT_MS + GRACE_MS + CHECK_MS must fit in
    /// DEADLINE_MS.
    #[arg(long)]
    heartbeat_timeout_ms: Option<String>,
    /// OPS-2 / FO-D11: serve /healthz, /readyz and /metrics on this address. Off unless given:
    /// the client exposes nothing by default.
    #[arg(long, env = "SWITCHYARD_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    journal: JournalArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SceneArg {
    #[value(name = "1")]
    S1,
    #[value(name = "2")]
    S2,
    #[value(name = "3")]
    S3,
    #[value(name = "4")]
    S4,
    #[value(name = "4b")]
    S4b,
    Ctrl,
    #[value(name = "5")]
    S5,
    /// FO-X4: host A dark (production thresholds, about 30 s).
    Dark,
    /// FO-X4: host A drops client-to-relay bytes (production thresholds, about 30 s).
    #[value(name = "one-way")]
    OneWay,
    /// FO-X4 / FO-H-1: host A slow and stalling (production thresholds, 30 s).
    Lossy,
    All,
}

#[derive(Args, Debug)]
pub struct DrillArgs {
    /// Which scene to run; `all` runs every scene, each from a clean start.
    #[arg(long, value_enum, default_value = "all")]
    scene: SceneArg,
    /// Also write the full output (the streamed lines and the summary) to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Draw each scene's run as an SVG timeline (relays, the client's channel, skips,
    /// switches, the deadline) into this file, written atomically at the end.
    #[arg(long, value_name = "FILE.svg")]
    timeline: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the secret key (base64; created with mode 0600, never overwritten). The
    /// public key goes beside it as `<FILE>.pub` and to stdout.
    #[arg(long, required_unless_present = "public_of")]
    secret_key: Option<PathBuf>,
    /// Do not generate: print the public key of this existing secret key file (re-derive it).
    #[arg(long, conflicts_with = "secret_key")]
    public_of: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SignArgs {
    /// The secret key file written by `switchyard keygen`.
    #[arg(long)]
    secret_key: PathBuf,
    /// A relay URL, in order (repeat); at most 8192 (MAX_CANDIDATES: a client refuses a longer
    /// list).
    #[arg(long = "relay", required = true)]
    relays: Vec<String>,
    /// How often clients re-read the directory.
    #[arg(long, default_value_t = 600)]
    refresh_after_seconds: u64,
    /// The list's sequence number (FO-S1): a client refuses a list whose sequence is lower than
    /// the last one it accepted. Default: the current Unix time in milliseconds, or, if --out
    /// already holds a signed list with a sequence at least that, its sequence + 1, so every
    /// signing into the same file is strictly higher than the one before.
    #[arg(long, allow_negative_numbers = true)]
    sequence: Option<u64>,
    /// Seconds from now after which clients refuse the list (FO-S1), at least 1. Default when
    /// neither expiry flag is given: 604800 (7 days). Re-sign before it runs out.
    #[arg(
        long,
        conflicts_with = "expires_at_unix_s",
        allow_negative_numbers = true
    )]
    expires_in_seconds: Option<u64>,
    /// The expiry as Unix seconds instead of --expires-in-seconds; must be in the future.
    #[arg(long, allow_negative_numbers = true)]
    expires_at_unix_s: Option<u64>,
    /// Where to write the signed directory.
    #[arg(long)]
    out: PathBuf,
}

pub async fn run(command: FailoverCommand) -> ExitCode {
    let result = match command {
        FailoverCommand::Relay(args) => relay(args).await,
        FailoverCommand::Client(args) => client(*args).await,
        FailoverCommand::Drill(args) => return drill(args).await,
        FailoverCommand::Keygen(args) => keygen(args),
        FailoverCommand::SignDirectory(args) => sign_directory(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("switchyard: {message}");
            ExitCode::from(2)
        }
    }
}

async fn relay(args: RelayArgs) -> Result<(), String> {
    // OPS-1: registered first, so a signal during start-up is a graceful stop too.
    let signals = lifecycle::Signals::listen();
    let relay = RelayHandle::start(RelayConfig {
        listen: args.listen,
        paths: args.paths,
        limits: args.limits.limits(RELAY_LIMITS)?,
    })
    .await
    .map_err(|e| e.to_string())?;
    // OPS-1 under systemd: ready once it listens; the watchdog fed from the runtime.
    switchyard_adapters::sd_notify::ready("relay listening");
    let _ = switchyard_adapters::sd_notify::spawn_watchdog();
    signals.stopped().await;
    let mut stopped = None;
    lifecycle::bounded_stop("the relay", async {
        stopped = Some(relay.shutdown().await);
    })
    .await?;
    if let Some(s) = stopped {
        tracing::info!(
            accepted_total = s.accepted_total,
            channels_closed = s.open_channels,
            refused_server_full = s.server.refused_server_full,
            refused_peer_full = s.server.refused_peer_full,
            ws_idle_closed = s.server.ws_idle_closed,
            ws_protocol_closed = s.server.ws_protocol_closed,
            "relay stopped"
        );
    }
    Ok(())
}

/// OPS-2 / FO-D11: the client's probes, only with `--metrics-listen`.
struct ClientProbe {
    /// CONF-2: `--conform`'s judge, for its metric.
    online: Option<OnlineConformance>,
    stats: tokio::sync::watch::Receiver<switchyard_core::failover::Stats>,
    candidates: tokio::sync::watch::Receiver<usize>,
    readiness: tokio::sync::watch::Receiver<Readiness>,
    heartbeat: tokio::sync::watch::Receiver<Option<Arc<HeartbeatStats>>>,
}

impl Probe for ClientProbe {
    /// FO-H-3: ready exactly while the client has a live channel; otherwise the reason and
    /// since when (no list, opening, every relay down, the channel reconnecting).
    fn ready(&self) -> Result<(), String> {
        // The probe prints `not ready: <why>`: the reason without a prefix of its own.
        match self.readiness.borrow().why_not_ready() {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    fn samples(&self) -> Vec<Sample> {
        let stats = self.stats.borrow().clone();
        let readiness = self.readiness.borrow().clone();
        let mut samples = probes::counters_of("client", "failover client counter", &stats.counters);
        samples.push(probes::gauge(
            "client_on_channel",
            "1 while the client has a relay channel (live or reconnecting; see client_ready)",
            u64::from(stats.current.is_some()),
        ));
        samples.push(probes::gauge(
            "client_ready",
            "FO-H-3: 1 while the client has a live relay channel (what /readyz answers)",
            u64::from(readiness.is_ready()),
        ));
        samples.push(probes::gauge(
            "client_not_ready_seconds",
            "FO-H-3: seconds since the client last had a live relay channel; 0 while it has one",
            readiness.not_ready_seconds(),
        ));
        samples.push(probes::gauge(
            "client_listed_relays",
            "relays in the list in use; 0 while the directory has given no usable list",
            *self.candidates.borrow() as u64,
        ));
        samples.push(probes::gauge(
            "client_cooling_urls",
            "URLs in cooldown now",
            stats.cooldown.len() as u64,
        ));
        let heartbeat = self.heartbeat.borrow().clone();
        let (rtt, max_rtt, degraded) = heartbeat.as_ref().map_or((0, 0, false), |h| {
            (h.last_rtt_ms(), h.max_rtt_ms(), h.slow())
        });
        samples.push(probes::gauge(
            "client_heartbeat_rtt_ms",
            "FO-X4: the last heartbeat round trip on the live channel, ms (0 without one)",
            rtt,
        ));
        samples.push(probes::gauge(
            "client_heartbeat_rtt_max_ms",
            "FO-X4: the longest heartbeat round trip on the live channel, ms",
            max_rtt,
        ));
        samples.push(probes::gauge(
            "client_channel_degraded",
            "FO-X4: 1 while the live channel's heartbeat round trips are slow (a quarter of RELAY_FAILOVER_HEARTBEAT_MS or more)",
            u64::from(degraded),
        ));
        if let Some(online) = &self.online {
            samples.extend(online.samples());
        }
        samples
    }
}

/// The thresholds: the environment first (strict, FO-CFG-1), then flags, with the same rules.
pub fn thresholds_from_env_and_flags(
    env: impl Fn(&str) -> Option<String>,
    flags: &[(&'static str, Option<&String>)],
) -> Result<Thresholds, String> {
    let joined = |errors: Vec<switchyard_core::failover::ConfigError>| {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    };
    // Each variable by FO-CFG-1 first; the checks across variables once the flags are on top.
    let mut thresholds = Thresholds::read_lookup(env).map_err(joined)?;
    for (var, value) in flags {
        if let Some(value) = value {
            thresholds
                .set(var, value)
                .map_err(|e| format!("flag for {e}"))?;
        }
    }
    // The probe bounds, the heartbeat pair and FO-X4's dark-host sum
    // (`Thresholds::check_dark_host_deadline`), over the environment and the flags together.
    let errors = thresholds.check_together();
    if !errors.is_empty() {
        return Err(joined(errors));
    }
    Ok(thresholds)
}

/// Reads a variable; one that is not valid Unicode is passed on as text that fails the digit
/// check, so it is reported instead of silently ignored.
fn env_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

async fn client(args: ClientArgs) -> Result<(), String> {
    // OPS-1: registered first, so a signal during start-up is a graceful stop too.
    let signals = lifecycle::Signals::listen();
    let thresholds = thresholds_from_env_and_flags(
        env_var,
        &[
            (VAR_COOLDOWN_MS, args.cooldown_ms.as_ref()),
            (VAR_DEADLINE_MS, args.deadline_ms.as_ref()),
            (VAR_GRACE_MS, args.grace_ms.as_ref()),
            (VAR_MIN_ATTEMPTS, args.min_attempts.as_ref()),
            (VAR_CHECK_MS, args.check_ms.as_ref()),
            (VAR_UP_TIMEOUT_MS, args.up_timeout_ms.as_ref()),
            (VAR_EXEMPT, args.exempt.as_ref()),
            (VAR_PROBE_MIN_MS, args.probe_min_ms.as_ref()),
            (VAR_PROBE_MAX_MS, args.probe_max_ms.as_ref()),
            (VAR_HEARTBEAT_MS, args.heartbeat_ms.as_ref()),
            (VAR_HEARTBEAT_TIMEOUT_MS, args.heartbeat_timeout_ms.as_ref()),
        ],
    )?;
    let directory = match (args.url, args.directory, args.public_key) {
        (Some(url), _, _) => {
            if !directory::is_ws_url(&url) {
                return Err(format!(
                    "--url / DSHS_RELAY_URL {url:?}: not a ws:// or wss:// URL with a host"
                ));
            }
            DirectoryConfig::Pinned(RelayUrl::new(url))
        }
        (None, Some(path), Some(key)) => {
            let text = match key.strip_prefix('@') {
                Some(file) => std::fs::read_to_string(file)
                    .map_err(|e| format!("--public-key @{file}: {e}"))?,
                None => key,
            };
            let key =
                directory::parse_public_key("--public-key", &text).map_err(|e| e.to_string())?;
            DirectoryConfig::Signed { path, key }
        }
        _ => {
            return Err(
                "give --url (or DSHS_RELAY_URL), or --directory with --public-key".to_owned(),
            )
        }
    };
    tracing::info!(?thresholds, "client starting");
    // CONF-2: the online judge sees every journal line (and needs the journal on to see any).
    let online = args.journal.conform.then(OnlineConformance::new);
    let observers = online.iter().map(OnlineConformance::observer).collect();
    let journal = Journal::open(&args.journal.config(), observers).map_err(|e| e.to_string())?;
    let client = ClientHandle::start(ClientConfig {
        thresholds,
        reconnect: ReconnectConfig::default(),
        directory,
        journal: ClientJournal {
            journal,
            key: "client".to_owned(),
        },
    });
    // OPS-1 under systemd: READY=1 once the first relay channel is live. FO-H-3: after that
    // the STATUS= line follows readiness (systemd has no "not ready" after READY=1: the status
    // says it, with the reason and since when).
    if std::env::var_os(switchyard_adapters::sd_notify::NOTIFY_SOCKET).is_some() {
        let mut readiness = client.readiness_watch();
        tokio::spawn(async move {
            let mut told_ready = false;
            loop {
                let now = readiness.borrow_and_update().clone();
                let text = now.describe();
                if now.is_ready() && !told_ready {
                    told_ready = true;
                    switchyard_adapters::sd_notify::ready(&text);
                } else {
                    switchyard_adapters::sd_notify::status(&text);
                }
                if readiness.changed().await.is_err() {
                    return;
                }
            }
        });
    }
    let _ = switchyard_adapters::sd_notify::spawn_watchdog();
    let probes_stop = Stop::new();
    let probes_stop_rx = probes_stop.listener();
    if let Some(listen) = args.metrics_listen {
        let probe = Arc::new(ClientProbe {
            stats: client.stats_watch(),
            candidates: client.candidates_watch(),
            readiness: client.readiness_watch(),
            heartbeat: client.heartbeat_watch(),
            online: online.clone(),
        });
        probes::serve_alone("client", listen, probe, probes_stop_rx).await?;
    }
    signals.stopped().await;
    let stats = client.stats();
    probes_stop.stop();
    lifecycle::bounded_stop("the client", client.stop()).await?;
    tracing::info!(
        switches = stats.counters.switches,
        exempt_switches = stats.counters.exempt_switches,
        open_failed = stats.counters.open_failed,
        no_candidate_checks = stats.counters.no_candidate_checks,
        "client stopped"
    );
    Ok(())
}

async fn drill(args: DrillArgs) -> ExitCode {
    // OPS-1: a signal ends the drill between two lines: its relays and clients are dropped
    // with the run, what was streamed stays on stdout, and the last line says it was cut.
    let signals = lifecycle::Signals::listen();
    let scenes: Vec<Scene> = match args.scene {
        SceneArg::S1 => vec![Scene::S1],
        SceneArg::S2 => vec![Scene::S2],
        SceneArg::S3 => vec![Scene::S3],
        SceneArg::S4 => vec![Scene::S4],
        SceneArg::S4b => vec![Scene::S4b],
        SceneArg::Ctrl => vec![Scene::Ctrl],
        SceneArg::S5 => vec![Scene::S5],
        SceneArg::Dark => vec![Scene::Dark],
        SceneArg::OneWay => vec![Scene::OneWay],
        SceneArg::Lossy => vec![Scene::Lossy],
        SceneArg::All => Scene::ALL.to_vec(),
    };
    // Refused before the first scene: a bad path should not cost a whole drill (SEC-4).
    if let Some(path) = &args.timeline {
        if let Err(error) = timeline::check_writable(path) {
            eprintln!("switchyard: --timeline {}: {error}", path.display());
            return ExitCode::from(2);
        }
    }
    let kept = Arc::new(Mutex::new(String::new()));
    let sink: drill::Sink = {
        let kept = Arc::clone(&kept);
        Arc::new(move |line: &str| {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            // Flushed per line: the point is to see a scene while it runs. A closed stdout
            // (a pager quit early) must not stop the drill or lose --out.
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            kept.push_str(line);
            kept.push('\n');
        })
    };
    let report = tokio::select! {
        report = drill::run_streaming(&scenes, sink) => report,
        signal = signals.stopped() => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "== drill INTERRUPTED by {} (no verdict) ==", signal.name());
            return ExitCode::SUCCESS;
        }
    };
    let text = std::mem::take(&mut *kept.lock().unwrap_or_else(PoisonError::into_inner));
    if let Some(path) = &args.timeline {
        let written = timeline::render_svg(&report.timelines())
            .and_then(|svg| timeline::write_atomically(path, &svg));
        if let Err(error) = written {
            eprintln!("switchyard: --timeline {}: {error}", path.display());
            return ExitCode::from(2);
        }
    }
    if let Some(out) = args.out {
        if let Err(error) = std::fs::write(&out, &text) {
            eprintln!("switchyard: --out {}: {error}", out.display());
            return ExitCode::from(2);
        }
    }
    if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// SEC-4: the largest secret-key file `keygen --public-of` reads (the key is 44 characters).
const MAX_SECRET_KEY_FILE_BYTES: u64 = 4 * 1024;

fn keygen(args: KeygenArgs) -> Result<(), String> {
    let public = match (args.public_of, args.secret_key) {
        (Some(path), _) => {
            // SEC-4: bounded and never waited on (`/dev/zero`, a FIFO): a secret key is a
            // line of base64.
            let what = format!("--public-of {}", path.display());
            let bytes = switchyard_adapters::files::read_small_regular(
                &path,
                &what,
                MAX_SECRET_KEY_FILE_BYTES,
            )?;
            let text = String::from_utf8(bytes).map_err(|_| format!("{what}: not UTF-8 text"))?;
            let key = directory::parse_secret_key(&what, &text).map_err(|e| e.to_string())?;
            directory::public_key_of(&key)
        }
        (None, Some(secret_path)) => {
            let mut pub_name = secret_path.as_os_str().to_owned();
            pub_name.push(".pub");
            let pub_path = PathBuf::from(pub_name);
            // Refuse before writing anything: never a secret without its public half.
            if pub_path.exists() {
                return Err(format!(
                    "--secret-key {}: {} exists already (never overwritten)",
                    secret_path.display(),
                    pub_path.display()
                ));
            }
            let (secret, public) = directory::generate_key_pair()
                .map_err(|e| format!("keygen: no randomness: {e}"))?;
            write_new_secret(&secret_path, &secret)?;
            std::fs::write(&pub_path, format!("{public}\n"))
                .map_err(|e| format!("{}: {e}", pub_path.display()))?;
            public
        }
        (None, None) => return Err("give --secret-key FILE (or --public-of FILE)".to_owned()),
    };
    #[allow(clippy::print_stdout)]
    {
        println!("{public}");
    }
    Ok(())
}

fn write_new_secret(path: &std::path::Path, secret: &str) -> Result<(), String> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|e| format!("--secret-key {}: {e}", path.display()))?;
    file.write_all(secret.as_bytes())
        .map_err(|e| format!("--secret-key {}: {e}", path.display()))
}

/// FO-S1: the default sequence, strictly above the last signing into `out`: the Unix time in
/// milliseconds, or the sequence `out` holds + 1 when that is not lower (two signings in one
/// millisecond, a clock set back, an earlier explicit `--sequence`).
async fn default_sequence(out: &std::path::Path) -> Result<u64, String> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "sign-directory: the system clock is before 1970".to_owned())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))?;
    if !out.exists() {
        return Ok(now_ms);
    }
    let what = format!("--out {}", out.display());
    let refuse = |why: String| {
        format!(
            "{what}: {why}; cannot choose a sequence above it: remove the file or pass --sequence"
        )
    };
    let bytes = directory::read_bounded(out)
        .await
        .map_err(|e| refuse(e.to_string()))?;
    let previous = previous_sequence(&bytes).map_err(refuse)?;
    if previous < now_ms {
        return Ok(now_ms);
    }
    previous
        .checked_add(1)
        .ok_or_else(|| refuse(format!("its sequence is {previous}, the largest there is")))
}

/// The sequence of a signed directory document (its signature is not checked: the number only
/// has to be exceeded).
fn previous_sequence(bytes: &[u8]) -> Result<u64, String> {
    #[derive(serde::Deserialize)]
    struct Sequence {
        sequence: u64,
    }
    let signed: directory::SignedDirectory =
        serde_json::from_slice(bytes).map_err(|e| format!("holds no signed directory ({e})"))?;
    let payload: Sequence = serde_json::from_str(&signed.payload)
        .map_err(|e| format!("holds a signed directory without a sequence ({e})"))?;
    Ok(payload.sequence)
}

async fn sign_directory(args: SignArgs) -> Result<(), String> {
    let secret = std::fs::read_to_string(&args.secret_key)
        .map_err(|e| format!("--secret-key {}: {e}", args.secret_key.display()))?;
    let what = format!("--secret-key {}", args.secret_key.display());
    let key = directory::parse_secret_key(&what, &secret).map_err(|e| e.to_string())?;
    // FO-S1 / SEC-4: a list every client would refuse is not written.
    if args.relays.len() > MAX_CANDIDATES {
        return Err(format!(
            "--relay: {} relays given, at most {MAX_CANDIDATES} (clients refuse a longer list)",
            args.relays.len()
        ));
    }
    for url in &args.relays {
        if !directory::is_ws_url(url) {
            return Err(format!(
                "--relay {url:?}: not a ws:// or wss:// URL with a host"
            ));
        }
    }
    if !(directory::MIN_REFRESH_SECONDS..=directory::MAX_REFRESH_SECONDS)
        .contains(&args.refresh_after_seconds)
    {
        return Err(format!(
            "--refresh-after-seconds {}: out of range {}..={}",
            args.refresh_after_seconds,
            directory::MIN_REFRESH_SECONDS,
            directory::MAX_REFRESH_SECONDS
        ));
    }
    let now = directory::wall_clock_unix_s()
        .ok_or_else(|| "sign-directory: the system clock is before 1970".to_owned())?;
    let expires_at_unix_s = expiry(now, args.expires_in_seconds, args.expires_at_unix_s)?;
    let sequence = match args.sequence {
        Some(sequence) => sequence,
        None => default_sequence(&args.out).await?,
    };
    let signed = directory::sign(
        &key,
        &DirectoryPayload {
            relays: args.relays,
            refresh_after_seconds: args.refresh_after_seconds,
            sequence,
            expires_at_unix_s,
        },
    );
    let json = serde_json::to_string_pretty(&signed).map_err(|e| e.to_string())?;
    std::fs::write(&args.out, json + "\n").map_err(|e| format!("--out {}: {e}", args.out.display()))
}

/// Default validity of a signed directory when no expiry flag is given.
pub const DEFAULT_EXPIRES_IN_SECONDS: u64 = 7 * 24 * 3600;

/// The expiry (Unix seconds) from the flags: in the future, without overflow.
fn expiry(now: u64, expires_in: Option<u64>, expires_at: Option<u64>) -> Result<u64, String> {
    if let Some(at) = expires_at {
        if at <= now {
            return Err(format!(
                "--expires-at-unix-s {at}: not in the future (now {now})"
            ));
        }
        return Ok(at);
    }
    let seconds = expires_in.unwrap_or(DEFAULT_EXPIRES_IN_SECONDS);
    if seconds == 0 {
        return Err("--expires-in-seconds 0: must be at least 1".to_owned());
    }
    now.checked_add(seconds).ok_or_else(|| {
        format!(
            "--expires-in-seconds {seconds}: now ({now}) + {seconds} is past the largest Unix time"
        )
    })
}

//! `switchyard-check`: model-check the Switchyard specification.
//!
//! `switchyard-check check [failover|handoff|sweep|dispatch|enrol|lease|store|all]` explores every model exhaustively at
//! the review bounds (the defaults), prints a table per model (the handoff model: one per
//! scenario, `--scenario` picks one), and exits 1 on any violated `always` or unreached `sometimes` (a
//! vacuous model), printing each counterexample and writing it as a JSON trace. A search that
//! reaches the memory budget with no violation found exits 3.
#![allow(clippy::print_stdout)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::Serialize;
use stateright::Model;
use switchyard_checker::explorer::Explorable;
use switchyard_checker::*;
use switchyard_spec::dispatch::{DispatchModel, DispatchParams};
use switchyard_spec::enrol::{EnrolModel, EnrolParams};
use switchyard_spec::failover::{
    FailoverModel, FailoverParams, Variant, MAX_MODEL_HOSTS, MAX_MODEL_URLS,
};
use switchyard_spec::handoff::{HandoffModel, HandoffParams, Scenario};
use switchyard_spec::lease::{LeaseModel, LeaseParams};
use switchyard_spec::store_race::{StoreRaceModel, StoreRaceParams};
use switchyard_spec::sweep::{SweepModel, SweepParams};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "switchyard-check",
    version,
    about = "Model-check the Switchyard specification",
    after_help = "Exit status: 0 every property holds and every witness is reached; 1 a property is violated or a witness is not reached; 2 bad arguments; 3 the memory budget was reached before a verdict."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the model checker (default: every model, exhaustive depth-first search at the review
    /// bounds, every discovery re-found breadth-first so its path is a shortest one).
    Check(CheckArgs),
    /// Judge journals the binaries wrote (`--journal`) against the spec (CONF-1): per client,
    /// cell host or director, `conforms` or `departs at line L: <event> breaks <ID>: the spec
    /// allowed <…>`. With `--seed-format`: the TypeScript production system's `[relay-switch]` /
    /// `[relay-skip]` lines (seed 000), with the directory list and thresholds given here; the
    /// inputs between two lines are searched for, bounded.
    #[command(
        after_help = "Exit status: 0 every key (every file, with --seed-format) conforms; 1 some key or line departs; 2 a file or a line could not be read (named), or bad arguments.\nExamples: switchyard-check conform client.journal.jsonl\n          switchyard-check conform --seed-format --candidates wss://alotbuy.com/dshs-relay,wss://relay-direct.alotbuy.com/dshs-relay,wss://106.54.21.172/dshs-relay journal.log"
    )]
    Conform(ConformArgs),
}

#[derive(Args, Debug)]
struct ConformArgs {
    /// Journal files, judged in order as one stream (`-` reads standard input). Lines of a
    /// JSON log (`--journal-log`) are read too; log lines without a journal are skipped. With
    /// `--seed-format`: log files of the TypeScript system.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// `text`: one line per key (per line, with --seed-format) and a summary; `json`: one JSON
    /// object.
    #[arg(long, value_enum, default_value = "text")]
    format: switchyard_checker::conform::ConformFormat,
    /// Read the TypeScript system's lines (seed 000), with or without journalctl's `short` /
    /// `short-iso` prefix, instead of journals.
    #[arg(long)]
    seed_format: bool,
    #[command(flatten)]
    seed: switchyard_checker::seed::SeedArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Which {
    Failover,
    Handoff,
    /// The director's keyset sweep (SCALE-3, HO-S2).
    Sweep,
    /// The director's concurrent dispatch over two source cells, one unreachable (HO-L3,
    /// SCALE-6, SCALE-3).
    Dispatch,
    /// Enrolment of an unknown host by two concurrent registrations (HO-A4, SCALE-1).
    Enrol,
    /// A cell's identity lease against a successor's clock (HO-L5, HO-L2).
    Lease,
    /// The store's plans interleaved step by step over row locks, limit shards with tokens
    /// and injected faults (HO-A1, HO-A2, HO-A5, HO-S4, SCALE-2).
    Store,
    All,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// Which model to check.
    #[arg(value_enum, default_value = "all")]
    model: Which,
    /// Breadth-first search on every thread instead: holds the whole frontier (about 5 GB for
    /// failover at the review bounds); a search that reaches the memory budget is retried
    /// depth-first.
    #[arg(long, conflicts_with_all = ["dfs", "simulate"])]
    bfs: bool,
    /// Depth-first search (the default): holds one path per thread. Whatever it discovers is
    /// then re-found by a one-thread breadth-first search bounded by its deepest discovery, so
    /// every path reported is a shortest one.
    #[arg(long, conflicts_with = "simulate")]
    dfs: bool,
    /// Random walks from the initial states instead of exhaustive search (needs --seconds).
    #[arg(long)]
    simulate: bool,
    /// Seed of the random walks.
    #[arg(long, default_value_t = 0, requires = "simulate")]
    seed: u64,
    /// How long a simulation runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Worker threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Resident memory a search may add, in MiB: a breadth-first search that reaches it
    /// without a violation is retried depth-first; if a depth-first search reaches it, the
    /// verdict is "incomplete" (exit 3); a breadth-first re-check that reaches it leaves the
    /// paths it did not re-find as they were. 0: no budget.
    #[arg(long, value_name = "MIB", default_value_t = 8192)]
    memory_budget_mib: u64,
    /// Stop exploring below this depth (the run is then not exhaustive).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_depth: Option<u64>,
    /// Failover: candidate URLs per host, comma-separated (production: 2,1).
    #[arg(long, value_delimiter = ',', default_value = "2,1",
          value_parser = clap::value_parser!(u8).range(1..=4))]
    urls_per_host: Vec<u8>,
    /// Failover: time horizon in cooldown periods.
    #[arg(long, default_value_t = FailoverParams::default().cycles, value_parser = clap::value_parser!(u32).range(1..=8))]
    cycles: u32,
    /// Failover: host down/up events per run.
    #[arg(long, default_value_t = FailoverParams::default().max_host_events, value_parser = clap::value_parser!(u8).range(0..=16))]
    host_events: u8,
    /// Failover: directory updates per run, each any ordered subset of the URLs.
    #[arg(long, default_value_t = FailoverParams::default().max_directory_updates, value_parser = clap::value_parser!(u8).range(0..=4))]
    directory_updates: u8,
    /// Failover: directory updates per run of the probe-jitter variant (at most
    /// --directory-updates; the production variant explores them without jitter).
    #[arg(long, default_value_t = FailoverParams::default().max_jitter_directory_updates, value_parser = clap::value_parser!(u8).range(0..=4))]
    jitter_directory_updates: u8,
    /// Failover: channel reports per run besides the one before each tick.
    #[arg(long, default_value_t = FailoverParams::default().max_channel_reports, value_parser = clap::value_parser!(u8).range(0..=4))]
    channel_reports: u8,
    /// Failover: steps of time to 1 ms around a threshold per run.
    #[arg(long, default_value_t = FailoverParams::default().max_odd_time_steps, value_parser = clap::value_parser!(u8).range(0..=4))]
    odd_time_steps: u8,
    /// Failover: opens of a live relay that fail anyway, per run.
    #[arg(long, default_value_t = FailoverParams::default().max_transient_failures, value_parser = clap::value_parser!(u8).range(0..=4))]
    transient_failures: u8,
    /// Failover: ticks per run that come half a tick after the core's `poll_timeout()`.
    #[arg(long, default_value_t = FailoverParams::default().max_late_ticks, value_parser = clap::value_parser!(u8).range(0..=4))]
    late_ticks: u8,
    /// Failover: threshold variants explored (default: all).
    #[arg(long, value_delimiter = ',', value_enum)]
    variants: Vec<VariantArg>,
    /// Handoff: which scenario (default: all). Each has its own bounds (below: the review
    /// scenario's defaults; the work-kinds scenario has one client, at most two faults, no
    /// restart, reconnect or undrain, one splice and one pending connection; the registrations
    /// scenario a second control activation racing the first, two reconnects, one client, at
    /// most two faults, no restart, drain or undrain); a bound given here replaces it in every
    /// scenario run.
    #[arg(long, value_enum, default_value = "all")]
    scenario: ScenarioArg,
    /// Handoff: relay clients (phone, iPad, …) [review: 2].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    clients: Option<u8>,
    /// Handoff: arrivals per client [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    client_visits: Option<u8>,
    /// Handoff: desktop control replacements [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    replacements: Option<u8>,
    /// Handoff: source cell restarts [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    restarts: Option<u8>,
    /// Handoff: emergency drains [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    drains: Option<u8>,
    /// Handoff: desktop reconnects after its control closed or its source retired or drained [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    reconnects: Option<u8>,
    /// Handoff: operator undrains of a drained host [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    undrains: Option<u8>,
    /// Handoff: times the clock may jump to the next deadline [1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=4))]
    time_advances: Option<u8>,
    /// Handoff: faults (lost responses, crashes, DB outages, …) in one run [review: 2].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=4))]
    faults: Option<u8>,
    /// Handoff: mutations attached clients relay to the desktop (splices), per run [review: 0].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    splices: Option<u8>,
    /// Handoff: pending connections, per run [review: 0].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    pending_conns: Option<u8>,
    /// Serve stateright's Explorer on this loopback address (e.g. 127.0.0.1:3000) instead of checking.
    #[arg(long, value_name = "ADDR")]
    explore: Option<SocketAddr>,
    /// Write every witness and counterexample as a JSON trace into this folder.
    #[arg(long, value_name = "DIR")]
    traces: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ScenarioArg {
    Review,
    WorkKinds,
    Registrations,
    All,
}

impl ScenarioArg {
    fn scenarios(self) -> Vec<Scenario> {
        match self {
            ScenarioArg::Review => vec![Scenario::Review],
            ScenarioArg::WorkKinds => vec![Scenario::WorkKinds],
            ScenarioArg::Registrations => vec![Scenario::Registrations],
            ScenarioArg::All => Scenario::ALL.to_vec(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum VariantArg {
    Production,
    ExemptOff,
    CooldownZero,
    SupervisorOff,
    ProbeJitter,
}

impl From<VariantArg> for Variant {
    fn from(v: VariantArg) -> Variant {
        match v {
            VariantArg::Production => Variant::Production,
            VariantArg::ExemptOff => Variant::ExemptOff,
            VariantArg::CooldownZero => Variant::CooldownZero,
            VariantArg::SupervisorOff => Variant::SupervisorOff,
            VariantArg::ProbeJitter => Variant::ProbeJitter,
        }
    }
}

/// A core invariant that fires in a model step is caught and reported by the property
/// `core invariants hold …` with its counterexample; every state the search reaches through
/// the same bug fires it again. Print the first panic as the default hook would, then count
/// the rest silently.
fn quiet_repeated_panics() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static SEEN: AtomicBool = AtomicBool::new(false);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !SEEN.swap(true, Ordering::SeqCst) {
            default(info);
            eprintln!(
                "switchyard-check: a model step panicked (above); later panics are not printed, \
                 the property \"core invariants hold\" reports them with a counterexample"
            );
        }
    }));
}

fn conform(args: &ConformArgs) -> ExitCode {
    use switchyard_checker::conform::{judge_files, print};
    match judge_files(&args.files) {
        Ok((verdicts, summary)) => {
            let mut out = std::io::stdout().lock();
            match print(&mut out, &verdicts, &summary, args.format) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("switchyard-check conform: writing the report: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Err(unreadable) => {
            eprintln!("switchyard-check conform: {}", unreadable.0);
            eprintln!("exit 2: unreadable journal");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are "errors" clap prints to stdout and exits 0 on.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let _ = e.print();
            eprintln!(
                "exit 2: bad arguments (switchyard-check check --help, conform --help list them)"
            );
            return ExitCode::from(2);
        }
    };
    let args = match cli.command {
        Command::Check(args) => args,
        Command::Conform(args) if args.seed_format => {
            let json = args.format == switchyard_checker::conform::ConformFormat::Json;
            return ExitCode::from(switchyard_checker::seed::run(&args.seed, &args.files, json));
        }
        Command::Conform(args) => return conform(&args),
    };
    quiet_repeated_panics();
    match check(&args) {
        Ok(runs) => {
            let (code, line) = exit_line(&runs);
            println!("{line}");
            ExitCode::from(code)
        }
        Err(message) => {
            eprintln!("switchyard-check: {message}");
            eprintln!("exit 2: bad arguments: {message}");
            ExitCode::from(2)
        }
    }
}

fn check(args: &CheckArgs) -> Result<Vec<RunSummary>, String> {
    if args.urls_per_host.len() > MAX_MODEL_HOSTS {
        return Err(format!(
            "--urls-per-host {:?}: at most {MAX_MODEL_HOSTS} hosts",
            args.urls_per_host
        ));
    }
    let url_count: u32 = args.urls_per_host.iter().map(|n| u32::from(*n)).sum();
    if url_count as usize > MAX_MODEL_URLS {
        return Err(format!(
            "--urls-per-host {:?}: {url_count} URLs, at most {MAX_MODEL_URLS} in all (the model's records are indexed by URL)",
            args.urls_per_host
        ));
    }
    let failover = FailoverModel::new(FailoverParams {
        urls_per_host: args.urls_per_host.clone(),
        cycles: args.cycles,
        variants: if args.variants.is_empty() {
            Variant::ALL.to_vec()
        } else {
            args.variants.iter().map(|v| Variant::from(*v)).collect()
        },
        max_host_events: args.host_events,
        max_directory_updates: args.directory_updates,
        max_channel_reports: args.channel_reports,
        max_odd_time_steps: args.odd_time_steps,
        max_transient_failures: args.transient_failures,
        max_late_ticks: args.late_ticks,
        max_jitter_directory_updates: args.jitter_directory_updates,
    });
    let handoff: Vec<HandoffModel> = args
        .scenario
        .scenarios()
        .into_iter()
        .map(|s| HandoffModel::in_scenario(s, handoff_params(args, s.params())))
        .collect();
    let sweep = SweepModel::new(SweepParams::default());
    let dispatch = DispatchModel::new(DispatchParams::default());
    let enrol = EnrolModel::new(EnrolParams::default());
    let lease = LeaseModel::new(LeaseParams::default());
    let store = StoreRaceModel::new(StoreRaceParams::default());
    if let Some(address) = args.explore {
        return explore(
            args.model,
            failover,
            handoff,
            (sweep, dispatch),
            (enrol, lease, store),
            address,
        );
    }
    let options = RunOptions {
        strategy: if args.simulate {
            Strategy::Simulate { seed: args.seed }
        } else if args.bfs {
            Strategy::Bfs
        } else {
            Strategy::Dfs
        },
        threads: usize::from(args.threads),
        max_depth: args.max_depth.map(|d| d as usize),
        timeout: args.simulate.then(|| Duration::from_secs(args.seconds)),
        memory_budget: (args.memory_budget_mib > 0)
            .then(|| MemoryBudget::resident(args.memory_budget_mib.saturating_mul(1 << 20))),
        progress: true,
        stop_when_found: None,
        stop_at_first_violation: true,
        keep_last_discovery: false,
    };
    if options.memory_budget.is_some() && resident_bytes().is_none() {
        eprintln!(
            "switchyard-check: warning: this platform does not report resident memory; --memory-budget-mib is not enforced"
        );
    }
    let mut runs = Vec::new();
    if matches!(args.model, Which::Failover | Which::All) {
        runs.push(check_one(failover, &options, args.traces.as_deref())?);
    }
    if matches!(args.model, Which::Handoff | Which::All) {
        for model in handoff {
            runs.push(check_one(model, &options, args.traces.as_deref())?);
        }
    }
    if matches!(args.model, Which::Sweep | Which::All) {
        runs.push(check_one(sweep, &options, args.traces.as_deref())?);
    }
    if matches!(args.model, Which::Dispatch | Which::All) {
        runs.push(check_one(dispatch, &options, args.traces.as_deref())?);
    }
    if matches!(args.model, Which::Enrol | Which::All) {
        runs.push(check_one(enrol, &options, args.traces.as_deref())?);
    }
    if matches!(args.model, Which::Lease | Which::All) {
        runs.push(check_one(lease, &options, args.traces.as_deref())?);
    }
    if matches!(args.model, Which::Store | Which::All) {
        runs.push(check_one(store, &options, args.traces.as_deref())?);
    }
    Ok(runs)
}

/// A scenario's bounds with the bounds given on the command line in their place.
fn handoff_params(args: &CheckArgs, base: HandoffParams) -> HandoffParams {
    HandoffParams {
        clients: args.clients.unwrap_or(base.clients),
        client_visits: args.client_visits.unwrap_or(base.client_visits),
        replacements: args.replacements.unwrap_or(base.replacements),
        restarts: args.restarts.unwrap_or(base.restarts),
        drains: args.drains.unwrap_or(base.drains),
        reconnects: args.reconnects.unwrap_or(base.reconnects),
        undrains: args.undrains.unwrap_or(base.undrains),
        time_advances: args.time_advances.unwrap_or(base.time_advances),
        max_faults: args.faults.unwrap_or(base.max_faults),
        splices: args.splices.unwrap_or(base.splices),
        pending_conns: args.pending_conns.unwrap_or(base.pending_conns),
        ..base
    }
}

fn check_one<M>(
    model: M,
    options: &RunOptions,
    traces: Option<&std::path::Path>,
) -> Result<RunSummary, String>
where
    M: CheckedModel + Clone,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + std::fmt::Display + PartialEq + Send + Sync + Serialize,
{
    let mut report = run(model.clone(), options);
    let mut recheck = None;
    let exhaustive = matches!(report.strategy, Strategy::Bfs | Strategy::Dfs);
    // A depth-first retry of a breadth-first search that ran out of memory: a breadth-first
    // re-check would run out too.
    if exhaustive && report.fallback.is_none() && report.properties.iter().any(|p| p.path.is_some())
    {
        let on_terminal = progress_on_terminal();
        if options.progress {
            progress_line(
                on_terminal,
                "re-checking with one thread for the shortest witnesses and counterexamples ...",
            );
        }
        recheck = shorten_discoveries(&model, options, &mut report);
        if options.progress {
            progress_done(on_terminal);
        }
        if let Some(recheck) = recheck {
            // The table's time is the whole check's, the re-check included.
            report.elapsed += recheck.elapsed;
        }
    }
    print!("{}", render_table(&report));
    if let Some(r) = recheck {
        let line = format!(
            "  shortest paths: one-thread breadth-first re-check to depth {} (bound {}, the deepest first discovery), {} unique states, {:.2} s (included above)",
            r.depth_reached,
            r.depth_bound,
            r.unique_states,
            r.elapsed.as_secs_f64()
        );
        print!("{}", wrap(&line, "", "    "));
    }
    let mut violated = false;
    for p in &report.properties {
        if let (Verdict::Violated, Some(path)) = (p.verdict, &p.path) {
            violated = true;
            println!("\ncounterexample to \"{}\" ({}):", p.name, steps_of(p));
            print!("{}", render_path::<M>(path));
        }
    }
    let dir = match (traces, violated) {
        (Some(dir), _) => Some(dir.to_path_buf()),
        (None, true) => Some(PathBuf::from("switchyard-counterexamples")),
        (None, false) => None,
    };
    if let Some(dir) = dir {
        let written = write_traces(&model, &report, &dir, traces.is_some())
            .map_err(|e| format!("writing traces to {}: {e}", dir.display()))?;
        println!("wrote {} trace(s) to {}", written.len(), dir.display());
    }
    if report.incomplete() {
        let line = format!(
            "no verdict for model {}: the search reached the memory budget; raise --memory-budget-mib, or lower the bounds",
            report.model
        );
        print!("{}", wrap(&line, "", "  "));
    }
    println!();
    Ok(report.summary())
}

fn explore(
    which: Which,
    failover: FailoverModel,
    handoff: Vec<HandoffModel>,
    (sweep, dispatch): (SweepModel, DispatchModel),
    (enrol, lease, store): (EnrolModel, LeaseModel, StoreRaceModel),
    address: SocketAddr,
) -> Result<Vec<RunSummary>, String> {
    if !address.ip().is_loopback() {
        return Err(format!(
            "--explore {address}: the Explorer serves only on a loopback address (127.0.0.1 or [::1])"
        ));
    }
    // The Explorer's own server panics on a bind error; find out first and say so.
    TcpListener::bind(address).map_err(|e| format!("--explore {address}: cannot listen: {e}"))?;
    // The Explorer walks one kind of model; with none named, the failover model rather than an
    // error, so `check --explore ADDR` as the README writes it works.
    if which == Which::All {
        println!(
            "--explore walks one model: the failover model (`check handoff --explore {address}` or `check sweep --explore {address}` for the others)"
        );
    }
    match which {
        Which::All | Which::Failover => serve("failover", Explorable::new(vec![failover]), address),
        Which::Handoff => serve("handoff", Explorable::new(handoff), address),
        Which::Sweep => serve("sweep", Explorable::new(vec![sweep]), address),
        Which::Dispatch => serve("dispatch", Explorable::new(vec![dispatch]), address),
        Which::Enrol => serve("enrol", Explorable::new(vec![enrol]), address),
        Which::Lease => serve("lease", Explorable::new(vec![lease]), address),
        Which::Store => serve("store", Explorable::new(vec![store]), address),
    }
}

/// Serves the Explorer until the process is stopped (stateright's server blocks the caller).
fn serve<M>(
    kind: &str,
    explorable: Option<Explorable<M>>,
    address: SocketAddr,
) -> Result<Vec<RunSummary>, String>
where
    M: CheckedModel,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + Eq + Send + Sync + 'static,
    M::Action: Clone + std::fmt::Debug + std::fmt::Display + PartialEq + Send + Sync + 'static,
{
    let Some(explorable) = explorable else {
        return Err(format!("--explore: no {kind} model to explore"));
    };
    println!(
        "Explorer for the {kind} model on http://{address}/ (initial states: {}; Ctrl-C to stop)",
        explorable.entry_names().join(", ")
    );
    let _checker = explorable.checker().serve(address);
    park_forever()
}

/// The Explorer serves from its own threads until the process is stopped.
fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

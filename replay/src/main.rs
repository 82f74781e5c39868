//! `fusebox-replay`: replay a recorded trace against candidate policies, chart it, search for a
//! better one, lint a policy, or generate a synthetic trace.

use std::cell::RefCell;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use fusebox_replay::generate::{HostScenario, Scenario, generate, generate_hosts};
use fusebox_replay::keyed::{find_keyed_outages, replay_keys};
use fusebox_replay::policy::{Candidate, parse_policy_arg, parse_policy_file};
use fusebox_replay::replay::{Outage, OutageRule, Run, Span, find_outages_in, replay_in};
use fusebox_replay::trace::{self, Event};
use fusebox_replay::{chart, lint, report, search};

mod output;
mod reread;

use output::{Failure, progress, written};
use reread::{Reread, reread};

/// Replay a fusebox trace against candidate policies: a markdown table on stdout, an SVG chart,
/// warnings about policies that cannot trip or trip on noise, and `--search` for the Pareto front.
///
/// The trace is read line by line (a line longer than 64 KiB is an error naming it); a trace file
/// is read again for each pass, so memory stays flat, while stdin and `--search` keep each call
/// of the replayed key in 16 bytes. Without `--key`, a trace with several keys replays every key
/// (each call kept in 24 bytes), each on its own breaker, with the groups candidates name. A progress bar is drawn on stderr when it is a terminal.
#[derive(Parser)]
#[command(
    name = "fusebox-replay",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The trace: JSON lines as written by `fusebox_replay::record::RecordLayer` (`-` for stdin).
    trace: Option<PathBuf>,
    /// A candidate: `[name:] field=value,…`, e.g. `window=100,failure_rate=50,open_for=30s`.
    #[arg(long = "policy")]
    policies: Vec<String>,
    /// A TOML file of named candidates (`[policies.<name>]` tables).
    #[arg(long = "policies")]
    policy_file: Option<PathBuf>,
    /// The key to replay. Without it, a trace with several keys replays every key, each on its
    /// own breaker in one registry (the groups of candidates with `group` included).
    #[arg(long)]
    key: Option<String>,
    /// Where to write the SVG chart (and, with `--search`, the scatter next to it, as
    /// `<name>-search.svg`).
    #[arg(long, default_value = "replay.svg")]
    chart: PathBuf,
    /// Do not write a chart.
    #[arg(long)]
    no_chart: bool,
    /// Replay a grid of policies and print the Pareto front of time to detect against calls
    /// wrongly rejected.
    #[arg(long)]
    search: bool,
    /// A bucket at or above this failure rate (percent) is part of an outage.
    #[arg(long, default_value_t = 25)]
    outage_rate: u32,
    /// Width of the buckets outages are found in, e.g. `1s`, `500ms`; more than 0. A width that
    /// would cut the trace into more than 1,000,000 buckets is widened, with a note on stderr.
    #[arg(long, default_value = "1s", value_parser = bucket_width)]
    bucket: Duration,
}

#[derive(Subcommand)]
enum Command {
    /// Write a synthetic trace: hard-outage, brownout, latency-spike, flapping or low-traffic (key
    /// `backend`); degraded-host, broken-client or noisy-hosts (ten keys `host-0` … `host-9`).
    Generate {
        /// The scenario.
        scenario: String,
        /// Output file (stdout when left out).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Play the scenario this many times back to back (seeds `seed`, `seed + 1`, …), for a
        /// long trace.
        #[arg(long, default_value_t = 1)]
        repeat: u64,
    },
    /// Check policies without a trace: prints errors and warnings, exits with 1 on an error.
    ///
    /// e.g. `fusebox-replay lint "window=10,failure_rate=50" --policies candidates.toml`
    Lint {
        /// Candidates: `[name:] field=value,…`.
        policies: Vec<String>,
        /// A TOML file of named candidates (`[policies.<name>]` tables).
        #[arg(long = "policies")]
        policy_file: Option<PathBuf>,
    },
}

/// Reads `--bucket`: a duration above zero.
fn bucket_width(raw: &str) -> Result<Duration, String> {
    let d = fusebox::parse_duration(raw).map_err(|e| format!("invalid duration `{raw}`; {e}"))?;
    if d.is_zero() {
        return Err(
            "a bucket of zero width cuts nothing; give a width such as `1s` or `500ms`".into(),
        );
    }
    Ok(d)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run(cli, &mut out).and_then(|()| out.flush().map_err(written));
    match result {
        Ok(()) | Err(Failure::Closed) => ExitCode::SUCCESS,
        Err(Failure::Lint) => ExitCode::FAILURE,
        Err(Failure::Message(e)) => {
            // What was printed before the error goes first; a closed pipe is no longer our concern.
            let _ = out.flush();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_candidates(args: &[String], file: Option<&Path>) -> Result<Vec<Candidate>, String> {
    let mut candidates = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        candidates.push(parse_policy_arg(arg, &format!("p{}", i + 1)).map_err(|e| e.to_string())?);
    }
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        candidates.extend(
            parse_policy_file(&text, &file.display().to_string()).map_err(|e| e.to_string())?,
        );
    }
    Ok(candidates)
}

fn generate_command(
    scenario: &str,
    output: Option<&Path>,
    seed: u64,
    repeat: u64,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let names: Vec<String> = Scenario::ALL
        .iter()
        .map(|(n, _)| n)
        .chain(HostScenario::ALL.iter().map(|(n, _)| n))
        .map(|n| format!("`{n}`"))
        .collect();
    let one = Scenario::parse(scenario);
    let hosts = HostScenario::parse(scenario);
    if one.is_none() && hosts.is_none() {
        return Err(format!(
            "unknown scenario `{scenario}`; expected one of {}",
            names.join(", ")
        )
        .into());
    }
    let write = |out: &mut dyn Write| -> io::Result<()> {
        let mut offset = 0u64;
        for k in 0..repeat {
            let seed = seed.wrapping_add(k);
            let calls = match (one, hosts) {
                (Some(s), _) => generate(s, seed),
                (_, Some(h)) => generate_hosts(&h.hosts(), seed),
                (None, None) => Vec::new(),
            };
            let last = calls.last().map_or(0, |c| c.at_ns);
            for mut call in calls {
                call.at_ns += offset;
                writeln!(out, "{}", call.to_line())?;
            }
            offset += last + 1_000_000_000;
        }
        out.flush()
    };
    match output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
            write(&mut io::BufWriter::new(file))
                .map_err(|e| format!("cannot write `{}`: {e}", path.display()).into())
        }
        None => write(out).map_err(written),
    }
}

fn lint_command(args: &[String], file: Option<&Path>, out: &mut dyn Write) -> Result<(), Failure> {
    if args.is_empty() && file.is_none() {
        return Err("no policy to check; give one, e.g. `fusebox-replay lint \"window=100,failure_rate=50\"`, or `--policies FILE`".into());
    }
    let mut errors = 0;
    let mut candidates = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        match parse_policy_arg(arg, &format!("p{}", i + 1)) {
            Ok(c) => candidates.push(c),
            Err(e) => {
                errors += 1;
                writeln!(out, "error: {e}").map_err(written)?;
            }
        }
    }
    if let Some(file) = file {
        match read_candidates(&[], Some(file)) {
            Ok(c) => candidates.extend(c),
            Err(e) => {
                errors += 1;
                writeln!(out, "error: {e}").map_err(written)?;
            }
        }
    }
    let mut warnings = 0;
    for c in &candidates {
        let findings = lint::check(c);
        if findings.is_empty() {
            writeln!(out, "ok: `{}`: `{}`", c.name, c.policy_arg()).map_err(written)?;
        }
        for f in findings {
            warnings += usize::from(f.severity == lint::Severity::Warning);
            errors += usize::from(f.severity == lint::Severity::Error);
            writeln!(out, "{f}").map_err(written)?;
        }
    }
    writeln!(out, "{errors} error(s), {warnings} warning(s)").map_err(written)?;
    if errors > 0 {
        return Err(Failure::Lint);
    }
    Ok(())
}

/// The replay of a trace with several keys (no `--key`): every key on its own breaker.
struct Keyed<'a> {
    candidates: &'a [Candidate],
    rule: OutageRule,
    search: bool,
    chart: bool,
}

impl Keyed<'_> {
    /// Replays every candidate on every key of `all`, and the group grid with `--search`.
    fn run(&self, all: &trace::KeyedTrace, out: &mut dyn Write) -> Result<(), Failure> {
        let first = all.calls.first().map_or(0, |c| c.event.at_ns());
        let last = all.calls.last().map_or(0, |c| c.event.at_ns());
        let (rule, note) = self.rule.fit(last - first);
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        let outages = find_keyed_outages(all, rule);
        if !self.candidates.is_empty() {
            let bar = progress(
                self.candidates.len() as u64,
                "replaying {pos}/{len} {wide_bar} {eta}",
            );
            let runs: Vec<_> = self
                .candidates
                .iter()
                .map(|c| {
                    let run = replay_keys(all, c, &outages);
                    bar.inc(1);
                    run
                })
                .collect();
            bar.finish_and_clear();
            let table = report::keyed_table(&runs, &all.keys, &outages, first, all.calls.len());
            writeln!(out, "{table}").map_err(written)?;
        }
        if self.search {
            let grid = search::group_grid(self.candidates);
            let bar = progress(grid.len() as u64, "searching {pos}/{len} {wide_bar} {eta}");
            let (runs, front) = search::search_keys_with(all, &grid, &outages, || bar.inc(1));
            bar.finish_and_clear();
            let table = search::keyed_front_table(&grid, &runs, &front, &outages);
            writeln!(out, "{table}").map_err(written)?;
        }
        if self.chart {
            eprintln!(
                "note: no chart for a trace with {} keys; chart one with `--key KEY`",
                all.keys.len()
            );
        }
        Ok(())
    }
}

/// The scatter's file: `replay.svg` → `replay-search.svg`.
fn scatter_path(chart: &Path) -> PathBuf {
    let stem = chart
        .file_stem()
        .map_or("replay".into(), |s| s.to_string_lossy());
    chart.with_file_name(format!("{stem}-search.svg"))
}

fn run(cli: Cli, out: &mut dyn Write) -> Result<(), Failure> {
    match &cli.command {
        Some(Command::Generate {
            scenario,
            output,
            seed,
            repeat,
        }) => return generate_command(scenario, output.as_deref(), *seed, *repeat, out),
        Some(Command::Lint {
            policies,
            policy_file,
        }) => return lint_command(policies, policy_file.as_deref(), out),
        None => {}
    }
    let path = cli
        .trace
        .as_deref()
        .ok_or("give a trace file (or `generate <scenario>` to make one)")?;
    // Candidates first: a typo in one is reported before a long trace is read.
    let candidates = read_candidates(&cli.policies, cli.policy_file.as_deref())?;
    if candidates.is_empty() && !cli.search {
        return Err(
            "no candidate policy; give `--policy \"window=100,failure_rate=50,open_for=30s\"`, `--policies FILE` or `--search`"
                .into(),
        );
    }
    replay_trace(&cli, path, &candidates, out)
}

/// Replays the trace at `path` (`-`: stdin) against `candidates` and, with `--search`, a grid:
/// the table and warnings on `out`, and the charts.
fn replay_trace(
    cli: &Cli,
    path: &Path,
    candidates: &[Candidate],
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let shown = path.display().to_string();
    let from_file = path.as_os_str() != "-";
    // A file is read again for each pass (the outages, each candidate, the chart), so memory
    // stays flat whatever its length; stdin, and `--search`, keep the events in memory.
    let in_memory = !from_file || cli.search;
    let input = open_input(path, &shown, from_file)?;
    let mut kept = Vec::new();
    let mut span = Span::default();
    let rule = OutageRule {
        bucket: cli.bucket,
        failure_rate: cli.outage_rate,
        ..OutageRule::default()
    };
    let name_errors = |e| name_errors(&shown, e);
    let keyed = Keyed {
        candidates,
        rule,
        search: cli.search,
        chart: !cli.no_chart,
    };
    let read = if from_file || cli.key.is_some() {
        let read = trace::read_with(input, cli.key.as_deref(), |e| {
            span.push(e);
            if in_memory {
                kept.push(e);
            }
        });
        match read {
            // Several keys and no `--key`: every key replays, on its own breaker.
            Err(trace::ReadError::SeveralKeys(_)) if from_file => {
                let file =
                    std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
                let all = trace::read_keys(BufReader::with_capacity(1 << 16, file))
                    .map_err(name_errors)?;
                return keyed.run(&all, out);
            }
            read => read.map_err(name_errors)?,
        }
    } else {
        match read_whole(input, &mut span, &mut kept).map_err(name_errors)? {
            Whole::One(read) => read,
            Whole::Many(all) => return keyed.run(&all, out),
        }
    };
    let reread_failed: RefCell<Option<String>> = RefCell::new(None);
    let events = &kept;
    let pass = || -> Box<dyn Iterator<Item = Event> + '_> {
        if in_memory {
            Box::new(events.iter().copied())
        } else {
            Box::new(Reread::open(path, &read.key, &reread_failed))
        }
    };

    let t0 = span.first_ns;
    let outages = find_outages_in(pass, &span, fitted(rule, &span));
    let mut charted = Vec::new();
    if !candidates.is_empty() {
        let runs = replay_candidates(pass, &span, candidates, &outages);
        let warnings = warnings_of(pass, t0, candidates, &runs, &outages);
        reread(&reread_failed, &shown)?;
        print_runs(&runs, &warnings, &outages, &span, out)?;
        if !in_memory {
            print_shadows(path, &read.key, &runs, out)?;
        }
        charted.extend(runs);
    }
    let searched = (cli.search)
        .then(|| search_grid(events, &outages, &mut charted, out))
        .transpose()?;
    if !cli.no_chart {
        let svg = chart::render_in(pass(), (span.first_ns, span.last_ns), &charted, &outages)?;
        reread(&reread_failed, &shown)?;
        write_charts(cli, &svg, searched, out)?;
    }
    Ok(())
}

/// A read error, with the trace's name when it is about a line of it or reading it.
fn name_errors(shown: &str, e: trace::ReadError) -> String {
    match e {
        trace::ReadError::Line(_) | trace::ReadError::Io(_) => format!("`{shown}` {e}"),
        e => e.to_string(),
    }
}

/// A trace read whole: the calls of its one key, or of every key when it has several.
enum Whole {
    One(trace::Trace),
    Many(trace::KeyedTrace),
}

/// Reads the trace on `input` whole (stdin): a trace with one key has its calls counted in `span`
/// and kept in `kept`.
fn read_whole(
    input: Box<dyn BufRead>,
    span: &mut Span,
    kept: &mut Vec<Event>,
) -> Result<Whole, trace::ReadError> {
    let all = trace::read_keys(input)?;
    if all.keys.len() > 1 {
        return Ok(Whole::Many(all));
    }
    for c in &all.calls {
        span.push(c.event);
        kept.push(c.event);
    }
    Ok(Whole::One(trace::Trace {
        key: all.keys[0].clone(),
        events: Vec::new(),
        lines: all.calls.len() as u64,
    }))
}

/// `rule` fitted to the known calls of `span`, with a note on stderr when its bucket was widened.
fn fitted(rule: OutageRule, span: &Span) -> OutageRule {
    let (rule, note) = rule.fit(span.known_ns.map_or(0, |(a, b)| b - a));
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    rule
}

/// The trace file at `path`, read through a progress bar, or stdin when `from_file` is false.
fn open_input(path: &Path, shown: &str, from_file: bool) -> Result<Box<dyn BufRead>, Failure> {
    Ok(if from_file {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        let len = file.metadata().map_or(0, |m| m.len());
        let bar = progress(len, "reading {bytes}/{total_bytes} {wide_bar} {eta}");
        Box::new(BufReader::with_capacity(1 << 16, bar.wrap_read(file)))
    } else {
        Box::new(io::stdin().lock())
    })
}

/// Replays each candidate on the events `pass` reads, under a progress bar.
fn replay_candidates<I: Iterator<Item = Event>>(
    pass: impl Fn() -> I,
    span: &Span,
    candidates: &[Candidate],
    outages: &[Outage],
) -> Vec<Run> {
    let bar = progress(
        candidates.len() as u64,
        "replaying {pos}/{len} {wide_bar} {eta}",
    );
    let runs: Vec<_> = candidates
        .iter()
        .map(|c| {
            let run = replay_in(pass(), span, c, outages);
            bar.inc(1);
            run
        })
        .collect();
    bar.finish_and_clear();
    runs
}

/// The candidates' warnings (read from the events `pass` reads, from `t0`).
fn warnings_of<I: Iterator<Item = Event>>(
    pass: impl Fn() -> I,
    t0: u64,
    candidates: &[Candidate],
    runs: &[Run],
    outages: &[Outage],
) -> Vec<String> {
    candidates
        .iter()
        .zip(runs)
        .flat_map(|(c, r)| lint::lint_in(pass(), t0, c, r, outages))
        .collect()
}

/// Writes the candidates' table and their warnings.
fn print_runs(
    runs: &[Run],
    warnings: &[String],
    outages: &[Outage],
    span: &Span,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    writeln!(
        out,
        "{}",
        report::table(runs, outages, span.first_ns, span.calls as usize)
    )
    .map_err(written)?;
    if !warnings.is_empty() {
        writeln!(out, "Warnings:\n").map_err(written)?;
        for w in warnings {
            writeln!(out, "- {w}").map_err(written)?;
        }
        writeln!(out).map_err(written)?;
    }
    Ok(())
}

/// The shadow policies the trace file recorded live for `key`, beside the replayed runs.
fn print_shadows(path: &Path, key: &str, runs: &[Run], out: &mut dyn Write) -> Result<(), Failure> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read the trace: {e}"))?;
    let input = BufReader::with_capacity(1 << 16, file);
    let live = fusebox_replay::shadows::read_live(input, key).map_err(|e| e.to_string())?;
    let table = fusebox_replay::shadows::compare(&live, key, runs);
    match live.is_empty() {
        true => Ok(()),
        false => writeln!(out, "Shadow policies tried live:\n\n{table}").map_err(written),
    }
}

/// The search's grid replayed on `events`: its front's table on `out`, the front's first six
/// into `charted` when no candidate was charted; returns the scores and the front, for the
/// scatter.
fn search_grid(
    events: &[Event],
    outages: &[Outage],
    charted: &mut Vec<Run>,
    out: &mut dyn Write,
) -> Result<(Vec<search::Score>, Vec<usize>), Failure> {
    let grid = search::grid();
    let bar = progress(grid.len() as u64, "searching {pos}/{len} {wide_bar} {eta}");
    let (runs, front) = search::search_with(events, &grid, outages, || bar.inc(1));
    bar.finish_and_clear();
    writeln!(
        out,
        "{}",
        search::front_table(&grid, &runs, &front, outages)
    )
    .map_err(written)?;
    if charted.is_empty() {
        charted.extend(front.iter().take(6).map(|&i| {
            let mut r = runs[i].clone();
            r.name = grid[i].policy_arg();
            r
        }));
    }
    Ok((search::scores(&runs, outages), front))
}

/// Writes the replay chart `svg` to `--chart`, and the search's scatter beside it.
fn write_charts(
    cli: &Cli,
    svg: &str,
    searched: Option<(Vec<search::Score>, Vec<usize>)>,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    std::fs::write(&cli.chart, svg)
        .map_err(|e| format!("cannot write `{}`: {e}", cli.chart.display()))?;
    writeln!(out, "chart written to `{}`", cli.chart.display()).map_err(written)?;
    if let Some((scores, front)) = searched {
        let path = scatter_path(&cli.chart);
        let svg = chart::scatter(&scores, &front)?;
        std::fs::write(&path, svg)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
        writeln!(out, "search scatter written to `{}`", path.display()).map_err(written)?;
    }
    Ok(())
}

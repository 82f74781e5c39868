//! `fusebox-replay`: replay a recorded trace against candidate policies, chart it, search for a
//! better one, or generate a synthetic trace.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::policy::{Candidate, parse_policy_arg, parse_policy_file};
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::trace::{self, Call};
use fusebox_replay::{chart, lint, report, search};

/// Replay a fusebox trace against candidate policies: a markdown table on stdout, an SVG chart,
/// warnings about policies that cannot trip or trip on noise, and `--search` for the Pareto front.
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
    /// The key to replay (needed when the trace has more than one).
    #[arg(long)]
    key: Option<String>,
    /// Where to write the SVG chart.
    #[arg(long, default_value = "replay.svg")]
    chart: PathBuf,
    /// Do not write a chart.
    #[arg(long)]
    no_chart: bool,
    /// Replay a grid of policies and print the Pareto front of time to detect against calls
    /// wrongly refused.
    #[arg(long)]
    search: bool,
    /// A 1-second bucket at or above this failure rate (percent) is part of an outage.
    #[arg(long, default_value_t = 25)]
    outage_rate: u32,
    /// Width of the buckets outages are found in, e.g. `1s`, `500ms`.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    bucket: Duration,
}

#[derive(Subcommand)]
enum Command {
    /// Write a synthetic trace: hard-outage, brownout, latency-spike, flapping or low-traffic.
    Generate {
        /// The scenario.
        scenario: String,
        /// Output file (stdout when left out).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[allow(clippy::too_many_lines)] // the command line, one branch per flag; not on a call path
fn run(cli: Cli) -> Result<(), String> {
    if let Some(Command::Generate {
        scenario,
        output,
        seed,
    }) = cli.command
    {
        let names: Vec<String> = Scenario::ALL
            .iter()
            .map(|(n, _)| format!("`{n}`"))
            .collect();
        let s = Scenario::parse(&scenario).ok_or_else(|| {
            format!(
                "unknown scenario `{scenario}`; expected one of {}",
                names.join(", ")
            )
        })?;
        let mut text = String::new();
        for call in generate(s, seed) {
            text.push_str(&call.to_line());
            text.push('\n');
        }
        return match output {
            Some(path) => std::fs::write(&path, text)
                .map_err(|e| format!("cannot write `{}`: {e}", path.display())),
            None => {
                print!("{text}");
                Ok(())
            }
        };
    }
    let path = cli
        .trace
        .ok_or("give a trace file (or `generate <scenario>` to make one)")?;
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("cannot read stdin: {e}"))?
    } else {
        std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?
    };
    let all = trace::parse(&text).map_err(|e| format!("`{}` {e}", path.display()))?;
    let calls = select_key(&all, cli.key.as_deref())?;

    let mut candidates: Vec<Candidate> = Vec::new();
    for (i, arg) in cli.policies.iter().enumerate() {
        candidates.push(parse_policy_arg(arg, &format!("p{}", i + 1)).map_err(|e| e.to_string())?);
    }
    if let Some(file) = &cli.policy_file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
        candidates.extend(
            parse_policy_file(&text, &file.display().to_string()).map_err(|e| e.to_string())?,
        );
    }
    if candidates.is_empty() && !cli.search {
        return Err(
            "no candidate policy; give `--policy \"window=100,failure_rate=50,open_for=30s\"`, `--policies FILE` or `--search`"
                .into(),
        );
    }
    let rule = OutageRule {
        bucket: cli.bucket,
        failure_rate: cli.outage_rate,
        ..OutageRule::default()
    };
    let outages = find_outages(&calls, rule);
    let t0 = calls.first().map_or(0, |c| c.at_ns);
    let mut charted = Vec::new();
    if !candidates.is_empty() {
        let runs: Vec<_> = candidates
            .iter()
            .map(|c| replay(&calls, c, &outages))
            .collect();
        println!("{}", report::table(&runs, &outages, t0, calls.len()));
        let warnings: Vec<String> = candidates
            .iter()
            .zip(&runs)
            .flat_map(|(c, r)| lint::lint(&calls, c, r, &outages))
            .collect();
        if !warnings.is_empty() {
            println!("Warnings:\n");
            for w in &warnings {
                println!("- {w}");
            }
            println!();
        }
        charted.extend(runs);
    }
    if cli.search {
        let grid = search::grid();
        let (runs, front) = search::search(&calls, &grid, &outages);
        println!("{}", search::front_table(&grid, &runs, &front, &outages));
        if charted.is_empty() {
            charted.extend(front.iter().take(6).map(|&i| {
                let mut r = runs[i].clone();
                r.name = grid[i].policy_arg();
                r
            }));
        }
    }
    if !cli.no_chart {
        let svg = chart::render(&calls, &charted, &outages)?;
        std::fs::write(&cli.chart, svg)
            .map_err(|e| format!("cannot write `{}`: {e}", cli.chart.display()))?;
        println!("chart written to `{}`", cli.chart.display());
    }
    Ok(())
}

/// The calls of `key`, or of the trace's only key.
fn select_key<'a>(all: &'a [Call], key: Option<&str>) -> Result<Vec<&'a Call>, String> {
    let mut keys: Vec<&str> = all.iter().map(|c| c.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let key = match key {
        Some(k) => {
            if !keys.contains(&k) {
                return Err(format!(
                    "the trace has no calls of key `{k}`; its keys are {}",
                    list(&keys)
                ));
            }
            k
        }
        None => match keys.as_slice() {
            [] => return Err("the trace has no calls".into()),
            [one] => one,
            _ => {
                return Err(format!(
                    "the trace has several keys ({}); choose one with `--key`",
                    list(&keys)
                ));
            }
        },
    };
    Ok(all.iter().filter(|c| c.key == key).collect())
}

fn list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    quoted.join(", ")
}

//! `cargo xtask build-cost`: what fusebox costs a user in compile time, measured on generated
//! crates that depend on this workspace by path.
//!
//! Three measurements, each command run `--runs` times (default 3) in turn with its counterpart
//! (A B A B …), reported as min and median wall seconds:
//!
//! 1. A minimal tokio program (`#[tokio::main]`, tokio with `macros` and `rt-multi-thread`), cold
//!    `cargo build` and `cargo check` (a fresh target directory each run), with and without fusebox
//!    (default features): the difference is what fusebox's own dependencies add.
//! 2. A library of 200 `async fn`s, annotated with `#[fusebox::circuit_breaker]` or not, both
//!    depending on fusebox: dependencies built once, then only the library rebuilt (`cargo clean -p`
//!    before each run), for `cargo build` and `cargo check`; the difference over 200 is the cost per
//!    annotated function. The same crate expanded (`-Zunpretty=expanded`, with
//!    `RUSTC_BOOTSTRAP=1` on a stable toolchain) gives the generated lines per function.
//! 3. `cargo tree -e normal` of the tokio program with and without fusebox: the major versions of
//!    `syn` in each, so a second major version brought in by fusebox shows.
//!
//! Every generated crate gets a copy of the workspace's `Cargo.lock`, so both sides resolve the same
//! versions (and `--offline` works when the registry cache holds them).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Annotated functions in the per-function crate.
const FUNCTIONS: usize = 200;

/// Options of `cargo xtask build-cost`.
struct Options {
    runs: usize,
    keep: bool,
    offline: bool,
}

/// Runs the measurement; `args` are what follows `build-cost`.
pub fn run(args: &[String]) -> ExitCode {
    let options = match parse(args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("error: {message}");
            eprintln!("usage: cargo xtask build-cost [--runs N] [--keep] [--offline]");
            return ExitCode::FAILURE;
        }
    };
    match measure(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        runs: 3,
        keep: false,
        offline: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                let value = args
                    .next()
                    .ok_or("`--runs` needs a number, e.g. `--runs 5`")?;
                options.runs = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=50).contains(n))
                    .ok_or_else(|| format!("`--runs {value}`: expected a number from 1 to 50"))?;
            }
            "--keep" => options.keep = true,
            "--offline" => options.offline = true,
            other => {
                return Err(format!(
                    "unknown argument `{other}`; expected `--runs N`, `--keep` or `--offline`"
                ));
            }
        }
    }
    Ok(options)
}

fn measure(options: &Options) -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask is not inside the workspace")?;
    let dir = std::env::temp_dir().join(format!("fusebox-build-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    println!("== generated crates in {}", dir.display());
    let result = measure_in(root, &dir, options);
    if options.keep {
        println!("(kept {})", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn measure_in(root: &Path, dir: &Path, options: &Options) -> Result<(), String> {
    let runtime = root.join("runtime");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let bare = write_crate(
        dir,
        "tokio-bare",
        &tokio_manifest("tokio-bare", None),
        MAIN_BARE,
        &lock,
    )?;
    let with = write_crate(
        dir,
        "tokio-fusebox",
        &tokio_manifest("tokio-fusebox", Some(&runtime)),
        MAIN_FUSEBOX,
        &lock,
    )?;
    let plain = write_crate(
        dir,
        "fns-plain",
        &lib_manifest("fns-plain", &runtime),
        &functions(false),
        &lock,
    )?;
    let annotated = write_crate(
        dir,
        "fns-annotated",
        &lib_manifest("fns-annotated", &runtime),
        &functions(true),
        &lock,
    )?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let run = Runner {
        cargo: &cargo,
        offline: options.offline,
    };

    println!("\n== syn in the tokio program's tree (`cargo tree -e normal`)");
    let syn_bare = run.syn_majors(&bare)?;
    let syn_with = run.syn_majors(&with)?;
    println!("without fusebox: syn {}", list(&syn_bare));
    println!("with fusebox:    syn {}", list(&syn_with));
    let added: Vec<&String> = syn_with.iter().filter(|v| !syn_bare.contains(v)).collect();
    match (syn_bare.is_empty(), added.is_empty()) {
        (_, true) => println!("fusebox adds no major version of syn"),
        (true, false) => println!(
            "fusebox brings syn {} (tokio's macros bring none)",
            list(&added)
        ),
        (false, false) => println!(
            "fusebox adds a second major version of syn: {}",
            list(&added)
        ),
    }

    println!(
        "\n== cold builds of a minimal tokio program, {} runs each (wall seconds)",
        options.runs
    );
    for verb in ["build", "check"] {
        let (without, with_fb) =
            run.alternate(options.runs, &bare, &with, |krate| run.cold(krate, verb))?;
        report(&format!("cargo {verb}, tokio alone"), &without);
        report(&format!("cargo {verb}, tokio + fusebox"), &with_fb);
        println!(
            "  fusebox adds {:.2} s (median), {:.2} s (min)",
            median(&with_fb) - median(&without),
            min(&with_fb) - min(&without)
        );
    }

    println!(
        "\n== {FUNCTIONS} async fns, annotated or not, the crate alone rebuilt (dependencies built once), {} runs each",
        options.runs
    );
    for verb in ["build", "check"] {
        run.warm(&plain, verb)?;
        run.warm(&annotated, verb)?;
        let (without, with_fb) = run.alternate(options.runs, &plain, &annotated, |krate| {
            run.rebuild(krate, verb)
        })?;
        report(&format!("cargo {verb}, {FUNCTIONS} plain fns"), &without);
        report(
            &format!("cargo {verb}, {FUNCTIONS} annotated fns"),
            &with_fb,
        );
        println!(
            "  per annotated fn: {:.2} ms (median), {:.2} ms (min)",
            (median(&with_fb) - median(&without)) * 1e3 / FUNCTIONS as f64,
            (min(&with_fb) - min(&without)) * 1e3 / FUNCTIONS as f64,
        );
    }

    println!("\n== generated lines (`-Zunpretty=expanded`)");
    match (run.expanded_lines(&plain), run.expanded_lines(&annotated)) {
        (Ok(without), Ok(with_fb)) => println!(
            "{without} lines plain, {with_fb} annotated: {:.1} lines per annotated fn",
            (with_fb as f64 - without as f64) / FUNCTIONS as f64
        ),
        (Err(e), _) | (_, Err(e)) => println!("not measured: {e}"),
    }
    Ok(())
}

/// Runs cargo in the generated crates.
struct Runner<'a> {
    cargo: &'a str,
    offline: bool,
}

impl Runner<'_> {
    fn cargo(&self, krate: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(self.cargo);
        command.current_dir(krate);
        if self.offline {
            command.arg("--offline");
        }
        command.args(args);
        // Measure the user's default: no inherited flags, no shared target directory.
        command
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("CARGO_BUILD_RUSTC_WRAPPER");
        command
    }

    /// Runs `command`, failing with its stderr.
    fn ok(&self, mut command: Command, what: &str) -> Result<String, String> {
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run `{what}`: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "`{what}` failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Seconds a cold `cargo <verb>` of `krate` takes (its target directory removed first).
    fn cold(&self, krate: &Path, verb: &str) -> Result<f64, String> {
        let _ = std::fs::remove_dir_all(krate.join("target"));
        self.timed(krate, verb)
    }

    /// Builds `krate` and its dependencies once, untimed.
    fn warm(&self, krate: &Path, verb: &str) -> Result<(), String> {
        self.ok(self.cargo(krate, &[verb]), &format!("cargo {verb}"))
            .map(drop)
    }

    /// Seconds `cargo <verb>` takes to rebuild `krate` alone (`cargo clean -p` first).
    fn rebuild(&self, krate: &Path, verb: &str) -> Result<f64, String> {
        let name = krate
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("a generated crate has no name")?;
        self.ok(self.cargo(krate, &["clean", "-p", name]), "cargo clean -p")?;
        self.timed(krate, verb)
    }

    fn timed(&self, krate: &Path, verb: &str) -> Result<f64, String> {
        let command = self.cargo(krate, &[verb]);
        let start = Instant::now();
        self.ok(command, &format!("cargo {verb}"))?;
        Ok(secs(start.elapsed()))
    }

    /// `runs` measurements of `a` and of `b`, taken in turn.
    fn alternate(
        &self,
        runs: usize,
        a: &Path,
        b: &Path,
        mut time: impl FnMut(&Path) -> Result<f64, String>,
    ) -> Result<(Vec<f64>, Vec<f64>), String> {
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            first.push(time(a)?);
            second.push(time(b)?);
        }
        Ok((first, second))
    }

    /// The major versions of `syn` in `krate`'s normal dependency tree.
    fn syn_majors(&self, krate: &Path) -> Result<Vec<String>, String> {
        let tree = self.ok(
            self.cargo(
                krate,
                &[
                    "tree", "-e", "normal", "--prefix", "none", "--format", "{p}",
                ],
            ),
            "cargo tree",
        )?;
        let mut majors: Vec<String> = tree
            .lines()
            .filter_map(|line| line.strip_prefix("syn v"))
            .filter_map(|version| version.split('.').next())
            .map(str::to_owned)
            .collect();
        majors.sort();
        majors.dedup();
        Ok(majors)
    }

    /// Lines of `krate`'s macro-expanded source.
    fn expanded_lines(&self, krate: &Path) -> Result<usize, String> {
        let mut command = self.cargo(
            krate,
            &[
                "rustc",
                "--lib",
                "--profile",
                "check",
                "--",
                "-Zunpretty=expanded",
            ],
        );
        command.env("RUSTC_BOOTSTRAP", "1");
        Ok(self
            .ok(command, "cargo rustc -- -Zunpretty=expanded")?
            .lines()
            .count())
    }
}

fn write_crate(
    dir: &Path,
    name: &str,
    manifest: &str,
    source: &str,
    lock: &str,
) -> Result<PathBuf, String> {
    let krate = dir.join(name);
    let src = krate.join("src");
    std::fs::create_dir_all(&src).map_err(|e| format!("cannot create `{}`: {e}", src.display()))?;
    let file = if manifest.contains("[lib]") {
        "lib.rs"
    } else {
        "main.rs"
    };
    for (path, text) in [
        (krate.join("Cargo.toml"), manifest),
        (src.join(file), source),
        (krate.join("Cargo.lock"), lock),
    ] {
        std::fs::write(&path, text)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    }
    Ok(krate)
}

fn tokio_manifest(name: &str, fusebox: Option<&Path>) -> String {
    let fusebox = fusebox
        .map(|path| format!("fusebox = {{ path = {:?} }}\n", path.display().to_string()))
        .unwrap_or_default();
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\ntokio = {{ version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }}\n\
         {fusebox}\n[workspace]\n"
    )
}

fn lib_manifest(name: &str, runtime: &Path) -> String {
    format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\npath = \"src/lib.rs\"\n\n[dependencies]\nfusebox = {{ path = {:?} }}\n\n[workspace]\n",
        runtime.display().to_string()
    )
}

const MAIN_BARE: &str = "#[tokio::main]
async fn main() {
    println!(\"{}\", work(1).await);
}

async fn work(n: u64) -> u64 {
    n + 1
}
";

const MAIN_FUSEBOX: &str = "#[tokio::main]
async fn main() {
    match work(1).await {
        Ok(n) => println!(\"{n}\"),
        Err(Failure::Rejected(error)) => println!(\"{error}\"),
    }
}

enum Failure {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for Failure {
    fn from(error: fusebox::Error) -> Self {
        Failure::Rejected(error)
    }
}

#[fusebox::circuit_breaker(key = \"work\")]
async fn work(n: u64) -> Result<u64, Failure> {
    Ok(n + 1)
}
";

/// The per-function crate: [`FUNCTIONS`] `async fn`s, each with its own key when `annotated`.
fn functions(annotated: bool) -> String {
    let mut source = String::from(
        "//! Generated by `cargo xtask build-cost`.\n\n\
         #[derive(Debug)]\npub enum ApiError {\n    Timeout,\n    Rejected(fusebox::Error),\n}\n\n\
         impl From<fusebox::Error> for ApiError {\n    fn from(error: fusebox::Error) -> Self {\n        \
         ApiError::Rejected(error)\n    }\n}\n",
    );
    for i in 0..FUNCTIONS {
        if annotated {
            source.push_str(&format!(
                "\n#[fusebox::circuit_breaker(key = \"f{i}\", failure = [Timeout])]"
            ));
        }
        source.push_str(&format!(
            "\npub async fn f{i}(n: u64) -> Result<u64, ApiError> {{\n    \
             if n == {i} {{ Err(ApiError::Timeout) }} else {{ Ok(n + {i}) }}\n}}\n"
        ));
    }
    source
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

fn min(samples: &[f64]) -> f64 {
    sorted(samples).first().copied().unwrap_or(f64::NAN)
}

fn median(samples: &[f64]) -> f64 {
    let sorted = sorted(samples);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn report(what: &str, samples: &[f64]) {
    println!(
        "{what:<36} min {:7.2} s  median {:7.2} s  ({})",
        min(samples),
        median(samples),
        samples
            .iter()
            .map(|s| format!("{s:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

fn list<T: AsRef<str>>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_owned();
    }
    items
        .iter()
        .map(|v| format!("{}.x", v.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

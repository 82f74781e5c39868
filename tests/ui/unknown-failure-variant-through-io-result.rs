/// `io::Result<T>` is an alias: rustc cannot say "no variant" through it (`guide::compile_errors`), and
/// `io::Error` is a struct with no variants at all (a predicate `failure = is_timeout` fits it).
#[fusebox::circuit_breaker(key = "disk", failure = [TimedOut], fallback = cached)]
fn read(path: &str) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

fn cached(path: &str, cause: fusebox::Cause<std::io::Error>) -> std::io::Result<String> {
    let _ = cause;
    Ok(path.to_owned())
}

fn main() {}

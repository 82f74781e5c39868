/// On an `io::Result` the names in `failure = [...]` are kinds of `std::io::Error`: a misspelled
/// one is rustc's "no variant named … found for enum `ErrorKind`" at the name, with the closest
/// kind. No fallback is needed: a rejection converts into an `io::Error`.
#[fusebox::circuit_breaker(key = "disk", failure = [TimedOutt, ConnectionRefused])]
fn read(path: &str) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {}

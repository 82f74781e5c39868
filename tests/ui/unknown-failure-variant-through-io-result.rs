/// `io::Result<T>` is an alias: the error type `io::Error` is a struct, with no variants at all.
#[fusebox::circuit_breaker(key = "disk", failure = [TimedOut])]
fn read(path: &str) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {}

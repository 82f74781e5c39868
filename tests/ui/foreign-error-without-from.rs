/// `std::io::Error` belongs to another crate: `From<fusebox::Error>` cannot be implemented for it
/// here (orphan rule), so the message must give the other ways out.
#[fusebox::circuit_breaker(key = "disk")]
fn read(path: &str) -> Result<String, std::io::Error> {
    std::fs::read_to_string(path)
}

fn main() {}

/// `ParseIntError` belongs to another crate: `From<fusebox::Error>` cannot be implemented for it
/// here (orphan rule), so the message must give the other ways out.
#[fusebox::circuit_breaker(key = "parse")]
fn parse(text: &str) -> Result<u64, std::num::ParseIntError> {
    text.parse()
}

fn main() {}

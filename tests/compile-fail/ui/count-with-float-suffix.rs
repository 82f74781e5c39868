#[derive(Debug)]
pub enum ApiError {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

// A count written as a float: refused rather than read as 1.
#[fusebox::circuit_breaker(key = "payment", min_calls = 1f64)]
fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

fn main() {}

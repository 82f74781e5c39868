#[derive(Debug)]
pub enum ApiError {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

// Compiled in, the `mut` parameter is refused as without `#[cfg]` (compiled out, it is no error).
#[fusebox::circuit_breaker(key = "payment", retry = 3)]
async fn charge(#[cfg(all())] mut amount: u64) -> Result<u64, ApiError> {
    amount += 1;
    Ok(amount)
}

fn main() {}

#[derive(Debug)]
pub enum ApiError {
    Timeout,
    Connect(u16),
    Declined { code: u32 },
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

#[fusebox::circuit_breaker(key = "payment", failure = [Timeout], fallback = queue)]
async fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

// Returns a future of `Option<u64>`, not of the function's `Result<u64, ApiError>`.
async fn queue(amount: u64, cause: fusebox::Cause<ApiError>) -> Option<u64> {
    let _ = cause;
    Some(amount)
}

fn main() {}

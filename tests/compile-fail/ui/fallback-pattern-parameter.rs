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

#[fusebox::circuit_breaker(key = "payment", fallback = queue)]
fn charge((amount, fee): (u64, u64)) -> Result<u64, ApiError> {
    Ok(amount + fee)
}

fn queue(pair: (u64, u64), cause: fusebox::Cause<ApiError>) -> Result<u64, ApiError> {
    let _ = cause;
    Ok(pair.0)
}

fn main() {}

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
fn charge(amount: u64, currency: &str) -> Result<u64, ApiError> {
    let _ = currency;
    Ok(amount)
}

// Forgets the `currency` parameter.
fn queue(amount: u64, cause: fusebox::Cause<ApiError>) -> Result<u64, ApiError> {
    let _ = cause;
    Ok(amount)
}

fn main() {}

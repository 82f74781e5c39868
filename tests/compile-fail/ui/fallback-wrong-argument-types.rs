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

// Takes `u32` and `String` where the function has `u64` and `&str`.
fn queue(amount: u32, currency: String, cause: fusebox::Cause<ApiError>) -> Result<u64, ApiError> {
    let _ = (currency, cause);
    Ok(amount.into())
}

fn main() {}

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

/// A window size, not a `fusebox::Policy`.
const PAYMENT: u32 = 20;

#[fusebox::circuit_breaker(key = "payment", policy = PAYMENT, failure_rate = 40)]
fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

fn main() {}

#[derive(Debug)]
pub enum ApiError {
    Timeout,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

/// Names other breakers give a setting get fusebox's name for it, not the closest spelling.
#[fusebox::circuit_breaker(key = "payment", wait_duration = "30s", failure_ratio = 0.5, timeout_ms = 800)]
async fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

fn main() {}

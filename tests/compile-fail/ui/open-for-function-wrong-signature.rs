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

use std::time::Duration;

/// Takes the failed recoveries alone, not a `&fusebox::OpenContext`.
fn wait_for(failed_recoveries: u32) -> Duration {
    Duration::from_secs(u64::from(failed_recoveries) + 1)
}

#[fusebox::circuit_breaker(key = "payment", open_for = wait_for)]
fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

fn main() {}

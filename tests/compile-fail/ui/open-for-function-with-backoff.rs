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

fn wait_for(open: &fusebox::OpenContext) -> Duration {
    Duration::from_secs(u64::from(open.failed_recoveries()) + 1)
}

#[fusebox::circuit_breaker(key = "payment", open_for = wait_for, open_backoff = 2)]
fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

fn main() {}

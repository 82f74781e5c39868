#[derive(Debug)]
pub enum ApiError {
    Connect(u16),
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

#[fusebox::circuit_breaker(key = "payment", failure = [Connect], retry = 3, retry_budget = "20, 10/s")]
async fn charge(amount: u64) -> Result<u64, ApiError> {
    Ok(amount)
}

fn main() {}

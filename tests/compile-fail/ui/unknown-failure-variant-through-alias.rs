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

type ApiResult<T> = Result<T, ApiError>;

#[fusebox::circuit_breaker(key = "payment", failure = [Timeoutt, Connect])]
fn charge(amount: u64) -> ApiResult<u64> {
    Ok(amount)
}

fn main() {}

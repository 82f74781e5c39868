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

#[fusebox::circuit_breaker(key = "payment")]
fn charge(amount: &u64) -> &u64 {
    amount
}

fn main() {}

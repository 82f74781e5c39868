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

pub struct Order {
    pub amount: u64,
}

fn submit(order: Order) -> Result<u64, ApiError> {
    Ok(order.amount)
}

/// With `retry`, every attempt borrows `order`: the body cannot consume it.
#[fusebox::circuit_breaker(key = "payment", failure = [Timeout], retry = 3)]
async fn charge(order: Order) -> Result<u64, ApiError> {
    submit(order)
}

fn main() {}

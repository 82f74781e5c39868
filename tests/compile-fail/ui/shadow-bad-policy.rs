#[derive(Debug)]
pub enum PaymentError {
    Timeout,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for PaymentError {
    fn from(error: fusebox::Error) -> Self {
        PaymentError::Rejected(error)
    }
}

#[fusebox::circuit_breaker(
    key = "payment",
    failure = [Timeout],
    shadow = "tight: window = 20, failure_rate = 300"
)]
async fn authorize(amount: u64) -> Result<u64, PaymentError> {
    Ok(amount)
}

fn main() {}

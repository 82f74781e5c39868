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

pub struct Client {
    sent: u64,
}

impl Client {
    #[fusebox::circuit_breaker(key = "payment", failure = [Timeout], retry = 3)]
    async fn charge(&mut self, amount: u64) -> Result<u64, ApiError> {
        self.sent += amount;
        Ok(self.sent)
    }
}

fn main() {}

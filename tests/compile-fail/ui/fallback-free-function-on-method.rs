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

pub struct Client;

impl Client {
    // On a method a bare name is `Self::queue`; the fallback here is a free function.
    #[fusebox::circuit_breaker(key = "payment", failure = [Timeout], fallback = queue)]
    pub fn charge(&self, amount: u64) -> Result<u64, ApiError> {
        Ok(amount)
    }
}

fn queue(_client: &Client, amount: u64, cause: fusebox::Cause<ApiError>) -> Result<u64, ApiError> {
    let _ = cause;
    Ok(amount)
}

fn main() {}

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

#[fusebox::circuit_breaker(key = host, group = search, failure = [Connect])]
async fn search(host: &str) -> Result<u64, ApiError> {
    Ok(host.len() as u64)
}

fn main() {}

#[derive(Debug)]
enum ApiError {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(e: fusebox::Error) -> Self {
        ApiError::Rejected(e)
    }
}

#[fusebox::circuit_breaker(key = "search", hedge = "p95", retry = 3)]
async fn search(query: &str) -> Result<usize, ApiError> {
    Ok(query.len())
}

fn main() {}

#[derive(Debug)]
pub enum ApiError {
    Refused(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Refused(error)
    }
}

fn is_unavailable(status: &u16) -> bool {
    *status == 503
}

#[fusebox::circuit_breaker(key = "status", failure_if = is_unavailable, retry = 3)]
async fn fetch(status: u16) -> Result<u16, ApiError> {
    Ok(status)
}

fn main() {}

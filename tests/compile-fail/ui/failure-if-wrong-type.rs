#[derive(Debug)]
pub struct Response {
    pub status: u16,
}

#[derive(Debug)]
pub enum ApiError {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

// Takes the error, not the `Ok` value.
fn is_unavailable(error: &ApiError) -> bool {
    matches!(error, ApiError::Rejected(_))
}

#[fusebox::circuit_breaker(key = "status", failure_if = is_unavailable)]
fn fetch(status: u16) -> Result<Response, ApiError> {
    Ok(Response { status })
}

fn main() {}

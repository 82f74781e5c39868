#[derive(Debug)]
enum ApiError {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(e: fusebox::Error) -> Self {
        ApiError::Rejected(e)
    }
}

#[fusebox::circuit_breaker(key = "a", hedge = "p100")]
async fn percentile_too_high() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "b", hedge = 50)]
async fn not_a_string() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "c", hedge = "p95", hedge_max = 9)]
async fn too_many_in_flight() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "d", hedge_max = 3)]
async fn max_without_hedge() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "e", hedge = "50ms")]
fn blocking() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "f", hedging = "50ms")]
async fn named_as_elsewhere() -> Result<u32, ApiError> {
    Ok(1)
}

fn main() {}

#[derive(Debug)]
enum ApiError {
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(e: fusebox::Error) -> Self {
        ApiError::Rejected(e)
    }
}

#[fusebox::circuit_breaker(key = "a", quorum = 1)]
async fn one_replica() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "b", quorum = 1001)]
async fn too_many_replicas() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "c", quorum = "150%")]
async fn share_above_all() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "d", quorum = "half")]
async fn share_in_words() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "e", quorum = true)]
async fn a_flag() -> Result<u32, ApiError> {
    Ok(1)
}

#[fusebox::circuit_breaker(key = "f", quorum = 2.5)]
async fn a_fraction() -> Result<u32, ApiError> {
    Ok(1)
}

fn main() {}

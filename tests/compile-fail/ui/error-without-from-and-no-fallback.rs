#[derive(Debug)]
pub enum PaymentError {
    Timeout,
    Declined,
}

#[fusebox::circuit_breaker(key = "payment", failure = [Timeout])]
fn charge(amount: u64) -> Result<u64, PaymentError> {
    if amount > 100 {
        return Err(PaymentError::Declined);
    }
    Ok(amount)
}

fn main() {}

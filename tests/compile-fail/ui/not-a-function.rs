#[fusebox::circuit_breaker(key = "payment")]
struct PaymentClient {
    endpoint: String,
}

fn main() {}

//! Fault injection through the middleware (feature `chaos`,
//! [`CircuitBreakerMiddleware::chaos`](crate::CircuitBreakerMiddleware::chaos)): after each
//! attempt's admission, what the key's fault does to it ([`Effect`]), and the attempt sent (or
//! answered) accordingly ([`run`]). Without the feature the effect is always none and [`run`]
//! is `Next::run`.

use reqwest::{Request, Response};
use reqwest_middleware::Next;

/// What an injection does to one attempt.
pub(crate) enum Effect {
    /// Nothing: the attempt is sent as written.
    None,
    /// The attempt is sent this late.
    #[cfg(feature = "chaos")]
    Delay(std::time::Duration),
    /// The attempt is not sent: this is its answer.
    #[cfg(feature = "chaos")]
    Answer(reqwest_middleware::Result<Response>),
}

/// Sends `req` down the chain, or answers it, as `effect` says.
#[inline]
pub(crate) fn run<'a>(
    effect: Effect,
    next: Next<'a>,
    req: Request,
    extensions: &'a mut http::Extensions,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = reqwest_middleware::Result<Response>> + Send + 'a>,
> {
    match effect {
        Effect::None => next.run(req, extensions),
        #[cfg(feature = "chaos")]
        Effect::Delay(delay) => Box::pin(async move {
            tokio::time::sleep(delay).await;
            next.run(req, extensions).await
        }),
        #[cfg(feature = "chaos")]
        Effect::Answer(answer) => Box::pin(std::future::ready(answer)),
    }
}

#[cfg(feature = "chaos")]
pub(crate) use on::effect;

#[cfg(feature = "chaos")]
mod on {
    use std::time::Duration;

    use fusebox::chaos::{FaultValue, Injected, Injections};
    use fusebox::{Error, OwnedPermit};
    use reqwest::Response;

    use super::Effect;

    /// What the fault of `permit`'s key does to this attempt: a rejection fault that hits
    /// rejects it as an open circuit would (`Err`, the permit given back uncounted), a latency
    /// fault delays it, a failure or `Retry-After` fault answers it with the value it built (see
    /// [`answer`]).
    ///
    /// # Errors
    /// The injected rejection.
    #[cold]
    #[inline(never)]
    pub(crate) fn effect(
        injections: &Injections,
        permit: &mut OwnedPermit,
    ) -> Result<Effect, Error> {
        Ok(match injections.hit(permit) {
            Some(Injected::Rejected) => {
                return Err(permit
                    .rejection()
                    .expect("an injected rejection rejects the permit"));
            }
            Some(Injected::Latency(delay)) => Effect::Delay(delay),
            Some(Injected::Failure(value)) => {
                answer(value, None).map_or(Effect::None, Effect::Answer)
            }
            Some(Injected::RetryAfter(value, wait)) => {
                answer(value, Some(wait)).map_or(Effect::None, Effect::Answer)
            }
            _ => Effect::None,
        })
    }

    /// The answer a fault's value makes: a `reqwest_middleware::Error` is the attempt's error
    /// (a failure, as a transport error is); a `reqwest::Response` its response; an
    /// `http::StatusCode` a response of that status with an empty body, and with `Retry-After`
    /// (the wait in whole seconds, rounded up) for a `Retry-After` fault. Another type is not
    /// injected: a WARN event `chaos_type_mismatch`, and the attempt is sent.
    fn answer(
        value: FaultValue,
        wait: Option<Duration>,
    ) -> Option<reqwest_middleware::Result<Response>> {
        let value = match value.take::<reqwest_middleware::Error>() {
            Ok(error) => return Some(Err(error)),
            Err(value) => value,
        };
        let value = match value.take::<Response>() {
            Ok(response) => return Some(Ok(response)),
            Err(value) => value,
        };
        match value.take::<http::StatusCode>() {
            Ok(status) => {
                let mut response = http::Response::new(String::new());
                *response.status_mut() = status;
                if let Some(wait) = wait {
                    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                    response
                        .headers_mut()
                        .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
                }
                Some(Ok(Response::from(response)))
            }
            Err(value) => {
                value.mismatch("reqwest_middleware::Error, reqwest::Response or http::StatusCode");
                None
            }
        }
    }
}

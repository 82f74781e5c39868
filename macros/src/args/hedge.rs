//! `hedge = "50ms"` or `hedge = "p95"` and `hedge_max = N`: when a hedged call sends its next
//! attempt, and how many it keeps in flight.

use syn::{Expr, Ident, Lit};

use super::Spanned;
use super::bounds::HEDGE_DELAY;
use super::values::{duration_arg, int_in_range, literal, narrow};
use fusebox_policy::limits::MAX_HEDGE;

/// When the next attempt of a hedged call starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HedgeArg {
    /// `hedge = "50ms"`, in nanoseconds.
    Fixed(u64),
    /// `hedge = "p95"`: the latency this percentile of the key's recent calls stayed under.
    Percentile(u8),
}

/// Reads `hedge`: a percentile `"p50"` to `"p99"`, or a duration.
pub(super) fn hedge_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<HedgeArg>> {
    let Some(Lit::Str(text)) = literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            "`hedge` takes a string: a delay like `hedge = \"50ms\"`, or a percentile of the \
             key's recent latencies like `hedge = \"p95\"`",
        ));
    };
    if let Some(percentile) = text.value().trim().strip_prefix('p') {
        return match percentile.parse::<u8>() {
            Ok(percentile @ 50..=99) => Ok(Spanned {
                value: HedgeArg::Percentile(percentile),
                span: text.span(),
            }),
            _ => Err(syn::Error::new(
                text.span(),
                format!(
                    "`hedge` takes a whole percentile from \"p50\" to \"p99\" (the latency that \
                     share of the key's recent calls stayed under), not \"{}\"; write \
                     `hedge = \"p95\"`, or a fixed delay like `hedge = \"50ms\"`",
                    text.value()
                ),
            )),
        };
    }
    let delay = duration_arg(name, value, "50ms", HEDGE_DELAY)?;
    Ok(Spanned {
        value: HedgeArg::Fixed(delay.value),
        span: delay.span,
    })
}

/// Reads `hedge_max`: attempts in flight at most, the first one included.
pub(super) fn hedge_max_arg(name: &Ident, value: &Expr) -> syn::Result<Spanned<u32>> {
    int_in_range(
        name,
        value,
        "2",
        2,
        u64::from(MAX_HEDGE),
        "attempts in flight at most, the first one included",
    )
    .map(narrow)
}

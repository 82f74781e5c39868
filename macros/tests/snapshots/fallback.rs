// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

#[inline]
fn stock(sku: u32) -> Result<u32, StockError> {
    static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::Site = ::fusebox::__private_0_1_0::Site::new(
        "stock",
        ::core::concat!(::core::module_path!(), "::", "stock"),
        ::fusebox::__private_0_1_0::Policy::DEFAULT,
    );
    ::fusebox::__private_0_1_0::inventory::submit! {
        ::fusebox::__private_0_1_0::Declared::new(& __FUSEBOX_SITE,
        ::fusebox::__private_0_1_0::in_global)
    }
    let mut __fusebox_permit = ::fusebox::__private_0_1_0::NamedPermit {
        raw: __FUSEBOX_SITE
            .enter::<
                false,
            >(&::fusebox::__private_0_1_0::GLOBAL, &__FUSEBOX_SITE.function),
        site: &__FUSEBOX_SITE.function,
    };
    if ::fusebox::__private_0_1_0::permit_rejected(&__fusebox_permit) {
        let __fusebox_rejected = ::fusebox::__private_0_1_0::rejection_error(
            &__fusebox_permit,
        );
        return ::fusebox::__private_0_1_0::call_fallback(
            (
                sku,
                ::fusebox::__private_0_1_0::Cause::<
                    <Result<
                        u32,
                        StockError,
                    > as ::fusebox::__private_0_1_0::Outcome>::Error,
                >::Rejected(__fusebox_rejected),
            ),
            cached_stock,
        );
    }
    match ::fusebox::__private_0_1_0::sync_body::<
        Result<u32, StockError>,
        _,
    >(|| { inventory::count(sku) }) {
        ::core::result::Result::Ok(__fusebox_value) => {
            ::fusebox::__private_0_1_0::permit_succeeded(
                &mut __fusebox_permit,
                &__FUSEBOX_SITE.function,
            );
            ::core::result::Result::Ok(__fusebox_value)
        }
        ::core::result::Result::Err(
            __fusebox_error,
        ) if ::core::matches!(
            & __fusebox_error, StockError::Timeout { .. } | StockError::Unavailable { ..
            }
        ) => {
            ::fusebox::__private_0_1_0::permit_failed_after(
                &mut __fusebox_permit,
                &__FUSEBOX_SITE.function,
                ::fusebox::__private_0_1_0::PushbackOf(&__fusebox_error).pushback(),
            );
            ::fusebox::__private_0_1_0::call_fallback(
                (
                    sku,
                    ::fusebox::__private_0_1_0::Cause::<
                        <Result<
                            u32,
                            StockError,
                        > as ::fusebox::__private_0_1_0::Outcome>::Error,
                    >::Failed(__fusebox_error),
                ),
                cached_stock,
            )
        }
        ::core::result::Result::Err(__fusebox_error) => {
            ::fusebox::__private_0_1_0::permit_ignored::<
                false,
            >(&mut __fusebox_permit, &__FUSEBOX_SITE.function);
            ::core::result::Result::Err(__fusebox_error)
        }
    }
}

// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

#[inline]
fn authorize(amount: u64) -> Result<u64, PaymentError> {
    static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::Site = ::fusebox::__private_0_1_0::Site::new(
        "payment",
        ::core::concat!(::core::module_path!(), "::", "authorize"),
        ::fusebox::__private_0_1_0::Policy::DEFAULT
            .window(20)
            .open_for(::core::time::Duration::from_nanos(30000000000)),
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
    if let ::core::option::Option::Some(__fusebox_rejected) = ::fusebox::__private_0_1_0::rejection(
        &__fusebox_permit,
    ) {
        return ::core::result::Result::Err(__fusebox_rejected);
    }
    match ::fusebox::__private_0_1_0::sync_body::<
        Result<u64, PaymentError>,
        _,
    >(move || { gateway::authorize(amount) }) {
        ::core::result::Result::Ok(__fusebox_value) => {
            ::fusebox::__private_0_1_0::permit_succeeded(
                &mut __fusebox_permit,
                &__FUSEBOX_SITE.function,
            );
            ::core::result::Result::Ok(__fusebox_value)
        }
        ::core::result::Result::Err(__fusebox_error) => {
            if ::core::matches!(& __fusebox_error, PaymentError::Timeout { .. }) {
                ::fusebox::__private_0_1_0::permit_failed_after(
                    &mut __fusebox_permit,
                    &__FUSEBOX_SITE.function,
                    ::fusebox::__private_0_1_0::PushbackOf(&__fusebox_error).pushback(),
                )
            } else {
                ::fusebox::__private_0_1_0::permit_ignored::<
                    false,
                >(&mut __fusebox_permit, &__FUSEBOX_SITE.function)
            }
            ::core::result::Result::Err(__fusebox_error)
        }
    }
}

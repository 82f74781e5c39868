// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

#[inline]
pub fn f(kind: Kind) -> ApiResult<u32> {
    type __FuseboxErrorOf<__R> = <__R as ::fusebox::__private_0_1_0::Outcome>::Error;
    static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::Site = ::fusebox::__private_0_1_0::Site::new(
        "k",
        ::core::concat!(::core::module_path!(), "::", "f"),
        ::fusebox::__private_0_1_0::Policy::DEFAULT.window(4),
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
        ApiResult<u32>,
        _,
    >(move || { respond(kind) }) {
        ::core::result::Result::Ok(__fusebox_value) => {
            ::fusebox::__private_0_1_0::permit_succeeded(
                &mut __fusebox_permit,
                &__FUSEBOX_SITE.function,
            );
            ::core::result::Result::Ok(__fusebox_value)
        }
        ::core::result::Result::Err(__fusebox_error) => {
            if ::core::matches!(
                & __fusebox_error, __FuseboxErrorOf:: < ApiResult < u32 > > ::Timeout {
                .. }
            ) {
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

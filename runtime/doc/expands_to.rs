// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

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
    #[derive(::core::clone::Clone, ::core::marker::Copy)]
    struct __FuseboxName;
    impl ::fusebox::__private_0_1_0::Named for __FuseboxName {
        #[inline(always)]
        fn name(self) -> &'static &'static str {
            __FUSEBOX_SITE.name()
        }
    }
    let mut __fusebox_permit = __FUSEBOX_SITE
        .enter::<false, _>(::fusebox::__private_0_1_0::global(), __FuseboxName);
    if ::fusebox::__private_0_1_0::permit_refused(&__fusebox_permit) {
        let __fusebox_refused = ::fusebox::__private_0_1_0::refusal_error(
            &__fusebox_permit,
        );
        return ::core::result::Result::Err(
            ::fusebox::__private_0_1_0::error_from_refusal(__fusebox_refused),
        );
    }
    match ::fusebox::__private_0_1_0::sync_body::<
        Result<u64, PaymentError>,
        _,
    >(move || { gateway::authorize(amount) }) {
        ::core::result::Result::Ok(__fusebox_value) => {
            ::fusebox::__private_0_1_0::permit_succeeded(&mut __fusebox_permit);
            ::core::result::Result::Ok(__fusebox_value)
        }
        ::core::result::Result::Err(__fusebox_error) => {
            if ::core::matches!(& __fusebox_error, PaymentError::Timeout { .. }) {
                ::fusebox::__private_0_1_0::permit_failed_after(
                    &mut __fusebox_permit,
                    {
                        #[allow(unused_imports)]
                        use ::fusebox::__private_0_1_0::{
                            NoRetryAfter as _, ReadsRetryAfter as _,
                        };
                        (&::fusebox::__private_0_1_0::PushbackOf(&__fusebox_error))
                            .pushback()
                    },
                )
            } else {
                ::fusebox::__private_0_1_0::permit_ignored::<
                    false,
                    _,
                >(&mut __fusebox_permit)
            }
            ::core::result::Result::Err(__fusebox_error)
        }
    }
}

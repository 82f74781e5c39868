// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

impl Client {
    async fn charge(order: u64) -> Result<u32, ApiError> {
        let __fusebox_cause = '__fusebox_settled: {
            static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::Site = ::fusebox::__private_0_1_0::Site::new(
                "charge",
                ::core::concat!(::core::module_path!(), "::", "charge"),
                ::fusebox::__private_0_1_0::Policy::DEFAULT,
            );
            ::fusebox::__private_0_1_0::inventory::submit! {
                ::fusebox::__private_0_1_0::Declared::new(& __FUSEBOX_SITE,
                ::fusebox::__private_0_1_0::in_global)
            }
            let mut __fusebox_permit = __FUSEBOX_SITE
                .enter_linked(
                    &::fusebox::__private_0_1_0::GLOBAL,
                    &__FUSEBOX_SITE.function,
                );
            if ::fusebox::__private_0_1_0::permit_rejected(&__fusebox_permit) {
                let __fusebox_rejected = ::fusebox::__private_0_1_0::rejection_error(
                    &__fusebox_permit,
                );
                break '__fusebox_settled ::fusebox::__private_0_1_0::Cause::<
                    <Result<u32, ApiError> as ::fusebox::__private_0_1_0::Outcome>::Error,
                >::Rejected(__fusebox_rejected);
            }
            match ::fusebox::__private_0_1_0::timeout_body(
                    ::core::time::Duration::from_nanos(300000000),
                    ::fusebox::__private_0_1_0::async_body::<
                        Result<u32, ApiError>,
                        _,
                    >(async { gateway::charge(order).await }),
                )
                .await
            {
                ::core::result::Result::Ok(__fusebox_result) => {
                    match __fusebox_result {
                        ::core::result::Result::Ok(__fusebox_value) => {
                            ::fusebox::__private_0_1_0::permit_succeeded(
                                &mut __fusebox_permit,
                                &__FUSEBOX_SITE.function,
                            );
                            return ::core::result::Result::Ok(__fusebox_value);
                        }
                        ::core::result::Result::Err(
                            __fusebox_error,
                        ) if ::core::matches!(
                            & __fusebox_error, ApiError::Timeout { .. }
                        ) => {
                            ::fusebox::__private_0_1_0::permit_failed_after(
                                &mut __fusebox_permit,
                                &__FUSEBOX_SITE.function,
                                ::fusebox::__private_0_1_0::PushbackOf(&__fusebox_error)
                                    .pushback(),
                            );
                            ::fusebox::__private_0_1_0::Cause::<
                                <Result<
                                    u32,
                                    ApiError,
                                > as ::fusebox::__private_0_1_0::Outcome>::Error,
                            >::Failed(__fusebox_error)
                        }
                        ::core::result::Result::Err(__fusebox_error) => {
                            ::fusebox::__private_0_1_0::permit_ignored::<
                                true,
                            >(&mut __fusebox_permit, &__FUSEBOX_SITE.function);
                            return ::core::result::Result::Err(__fusebox_error);
                        }
                    }
                }
                ::core::result::Result::Err(_) => {
                    let __fusebox_rejected = ::fusebox::__private_0_1_0::permit_timed_out(
                        &mut __fusebox_permit,
                        &__FUSEBOX_SITE.function,
                    );
                    ::fusebox::__private_0_1_0::Cause::<
                        <Result<
                            u32,
                            ApiError,
                        > as ::fusebox::__private_0_1_0::Outcome>::Error,
                    >::TimedOut(__fusebox_rejected)
                }
            }
        };
        {
            #[allow(unused_imports)]
            use ::fusebox::__private_0_1_0::{AwaitFallback as _, AwaitSyncFallback as _};
            ::fusebox::__private_0_1_0::FallbackReturn::<
                Result<u32, ApiError>,
                _,
            >::new(
                    ::fusebox::__private_0_1_0::call_fallback(
                        (order, __fusebox_cause),
                        charge_later,
                    ),
                )
                .fallback_future()
        }
            .await
    }
}

// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

impl Client {
    async fn send(&self, order: Order, id: &str) -> Result<u32, ApiError> {
        static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::Site = ::fusebox::__private_0_1_0::Site::new(
            "search",
            ::core::concat!(::core::module_path!(), "::", "send"),
            ::fusebox::__private_0_1_0::Policy::DEFAULT.consecutive(5),
        );
        ::fusebox::__private_0_1_0::inventory::submit! {
            ::fusebox::__private_0_1_0::Declared::new(& __FUSEBOX_SITE,
            ::fusebox::__private_0_1_0::in_global)
        }
        struct __FuseboxName;
        impl ::fusebox::__private_0_1_0::Named for __FuseboxName {
            #[inline(always)]
            fn name(&self) -> &'static &'static str {
                __FUSEBOX_NAME.cached()
            }
        }
        let __fusebox_registry = &::fusebox::__private_0_1_0::GLOBAL;
        static __FUSEBOX_NAME: ::fusebox::__private_0_1_0::MethodName = ::fusebox::__private_0_1_0::MethodName::new(
            "send",
        );
        __FUSEBOX_NAME.get(::core::any::type_name::<Self>);
        let __fusebox_admit = move || {
            __FUSEBOX_SITE.acquire(__fusebox_registry, __FuseboxName)
        };
        const __FUSEBOX_ATTEMPTS: ::fusebox::__private_0_1_0::Attempts<
            ::core::time::Duration,
            ::fusebox::__private_0_1_0::NoDeadline,
        > = ::fusebox::__private_0_1_0::Attempts {
            timeout: ::core::time::Duration::from_nanos(800000000),
            retry: 3,
            backoff: ::core::time::Duration::from_nanos(100000000),
            deadline: ::fusebox::__private_0_1_0::NoDeadline,
        };
        let __fusebox_settled = {
            ::fusebox::__private_0_1_0::run_attempts(
                    __fusebox_admit,
                    &__FUSEBOX_ATTEMPTS,
                    || ::fusebox::__private_0_1_0::async_body::<
                        Result<u32, ApiError>,
                        _,
                    >(async { self.transport.send(order, id).await }),
                    |
                        _: &<Result<
                            u32,
                            ApiError,
                        > as ::fusebox::__private_0_1_0::Outcome>::Error,
                    | -> bool { !::fusebox::__private_0_1_0::rejected_inside::<true>() },
                    |_: &_| -> bool { false },
                    |
                        __fusebox_error: &<Result<
                            u32,
                            ApiError,
                        > as ::fusebox::__private_0_1_0::Outcome>::Error,
                    | -> ::core::option::Option<::core::time::Duration> {
                        ::fusebox::__private_0_1_0::PushbackOf(__fusebox_error)
                            .pushback()
                    },
                )
                .await
        };
        match __fusebox_settled {
            ::fusebox::__private_0_1_0::Settled::Done(__fusebox_result) => {
                __fusebox_result
            }
            ::fusebox::__private_0_1_0::Settled::Failed(__fusebox_error) => {
                ::core::result::Result::Err(__fusebox_error)
            }
            ::fusebox::__private_0_1_0::Settled::Rejected(__fusebox_rejected) => {
                ::core::result::Result::Err(
                    ::fusebox::__private_0_1_0::error_from_rejection(__fusebox_rejected),
                )
            }
        }
    }
}

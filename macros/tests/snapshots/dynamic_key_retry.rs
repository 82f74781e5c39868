// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

impl Client {
    async fn fetch(&self, path: &str) -> Result<String, FetchError> {
        static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::DynSite = ::fusebox::__private_0_1_0::DynSite::new(
            ::core::concat!(::core::module_path!(), "::", "fetch"),
            ::fusebox::__private_0_1_0::Policy::DEFAULT,
        );
        let mut __fusebox_held = ::fusebox::__private_0_1_0::SiteBreaker::new();
        static __FUSEBOX_NAME: ::fusebox::__private_0_1_0::MethodName = ::fusebox::__private_0_1_0::MethodName::new(
            "fetch",
        );
        __FUSEBOX_NAME.get(::core::any::type_name::<Self>);
        struct __FuseboxName;
        impl ::fusebox::__private_0_1_0::Named for __FuseboxName {
            #[inline(always)]
            fn name(&self) -> &'static &'static str {
                __FUSEBOX_NAME.cached()
            }
        }
        let __fusebox_breaker = __FUSEBOX_SITE
            .breaker(
                ::fusebox::__private_0_1_0::registry_of(&REGISTRY),
                ::core::convert::AsRef::<str>::as_ref(&(self.host)),
                &mut __fusebox_held,
            );
        let __fusebox_admit = move || {
            __FUSEBOX_SITE.acquire(__fusebox_breaker, __FuseboxName)
        };
        const __FUSEBOX_ATTEMPTS: ::fusebox::__private_0_1_0::Attempts<
            ::fusebox::__private_0_1_0::Unbounded,
            ::fusebox::__private_0_1_0::NoDeadline,
        > = ::fusebox::__private_0_1_0::Attempts {
            timeout: ::fusebox::__private_0_1_0::Unbounded,
            retry: 3,
            backoff: ::core::time::Duration::ZERO,
            deadline: ::fusebox::__private_0_1_0::NoDeadline,
        };
        let __fusebox_settled = {
            ::fusebox::__private_0_1_0::run_attempts(
                    __fusebox_admit,
                    &__FUSEBOX_ATTEMPTS,
                    || ::fusebox::__private_0_1_0::async_body::<
                        Result<String, FetchError>,
                        _,
                    >(async { self.client.get(path).await }),
                    |
                        _: &<Result<
                            String,
                            FetchError,
                        > as ::fusebox::__private_0_1_0::Outcome>::Error,
                    | -> bool { !::fusebox::__private_0_1_0::rejected_inside::<true>() },
                    |_: &_| -> bool { false },
                    |
                        __fusebox_error: &<Result<
                            String,
                            FetchError,
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

// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

impl Client {
    async fn send(&self, order: u64) -> Result<u32, ApiError> {
        static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::Site = ::fusebox::__private_0_1_0::Site::new(
            "send",
            ::core::concat!(::core::module_path!(), "::", "send"),
            {
                let __fusebox_base: ::fusebox::__private_0_1_0::Policy = SEND_POLICY;
                __fusebox_base
            }
                .max_concurrent(8),
        );
        ::fusebox::__private_0_1_0::inventory::submit! {
            ::fusebox::__private_0_1_0::Declared::new(& __FUSEBOX_SITE,
            ::fusebox::__private_0_1_0::in_global)
        }
        static __FUSEBOX_NAME: ::fusebox::__private_0_1_0::MethodName = ::fusebox::__private_0_1_0::MethodName::new(
            "send",
        );
        __FUSEBOX_NAME.get(::core::any::type_name::<Self>);
        let mut __fusebox_permit = __FUSEBOX_SITE
            .enter_linked(&::fusebox::__private_0_1_0::GLOBAL, __FUSEBOX_NAME.cached());
        if let ::core::option::Option::Some(__fusebox_rejected) = ::fusebox::__private_0_1_0::rejection(
            &__fusebox_permit,
        ) {
            return ::core::result::Result::Err(__fusebox_rejected);
        }
        match ::fusebox::__private_0_1_0::in_place_body::<
            Result<u32, ApiError>,
        >({ self.transport.send(order).await }) {
            ::core::result::Result::Ok(__fusebox_value) => {
                ::fusebox::__private_0_1_0::permit_succeeded(
                    &mut __fusebox_permit,
                    __FUSEBOX_NAME.cached(),
                );
                ::core::result::Result::Ok(__fusebox_value)
            }
            ::core::result::Result::Err(
                __fusebox_error,
            ) if !::fusebox::__private_0_1_0::rejected_inside::<true>() => {
                ::fusebox::__private_0_1_0::permit_failed_after(
                    &mut __fusebox_permit,
                    __FUSEBOX_NAME.cached(),
                    ::fusebox::__private_0_1_0::PushbackOf(&__fusebox_error).pushback(),
                );
                ::core::result::Result::Err(__fusebox_error)
            }
            ::core::result::Result::Err(__fusebox_error) => {
                ::fusebox::__private_0_1_0::permit_ignored_outright(
                    &mut __fusebox_permit,
                    __FUSEBOX_NAME.cached(),
                );
                ::core::result::Result::Err(__fusebox_error)
            }
        }
    }
}

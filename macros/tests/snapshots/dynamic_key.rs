// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

#[inline]
fn fetch(host: &str, path: &str) -> Result<String, FetchError> {
    static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::DynSite = ::fusebox::__private_0_1_0::DynSite::new(
        ::core::concat!(::core::module_path!(), "::", "fetch"),
        ::fusebox::__private_0_1_0::Policy::DEFAULT,
    );
    let mut __fusebox_held = ::fusebox::__private_0_1_0::LocalBreaker::new();
    let mut __fusebox_permit = ::fusebox::__private_0_1_0::NamedPermit {
        raw: __FUSEBOX_SITE
            .enter_local(
                ::fusebox::__private_0_1_0::registry_of(&REGISTRY),
                ::core::convert::AsRef::<str>::as_ref(&(host)),
                &mut __fusebox_held,
                &__FUSEBOX_SITE.function,
            ),
        site: &__FUSEBOX_SITE.function,
    };
    if let ::core::option::Option::Some(__fusebox_rejected) = ::fusebox::__private_0_1_0::rejection(
        &__fusebox_permit,
    ) {
        return ::core::result::Result::Err(__fusebox_rejected);
    }
    match ::fusebox::__private_0_1_0::sync_body::<
        Result<String, FetchError>,
        _,
    >(move || { http::get(host, path) }) {
        ::core::result::Result::Ok(__fusebox_value) => {
            ::fusebox::__private_0_1_0::permit_succeeded(
                &mut __fusebox_permit,
                &__FUSEBOX_SITE.function,
            );
            ::core::result::Result::Ok(__fusebox_value)
        }
        ::core::result::Result::Err(__fusebox_error) => {
            if is_transient(&__fusebox_error) {
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

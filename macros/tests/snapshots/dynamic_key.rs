// The expansion of one representative function (macros/src/snapshots.rs).
// Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.

fn fetch(host: &str, path: &str) -> Result<String, FetchError> {
    static __FUSEBOX_SITE: ::fusebox::__private_0_1_0::DynSite = ::fusebox::__private_0_1_0::DynSite::new(
        ::core::concat!(::core::module_path!(), "::", "fetch"),
        ::fusebox::__private_0_1_0::Policy::DEFAULT,
    );
    let __fusebox_breaker = __FUSEBOX_SITE
        .breaker(
            ::fusebox::__private_0_1_0::registry_of(&REGISTRY),
            ::core::convert::AsRef::<str>::as_ref(&(host)),
        );
    let mut __fusebox_permit = __FUSEBOX_SITE.enter(&__fusebox_breaker);
    if let ::core::option::Option::Some(__fusebox_refused) = __fusebox_permit.refusal() {
        return ::core::result::Result::Err(
            ::fusebox::__private_0_1_0::reject(__fusebox_refused),
        );
    }
    match ::fusebox::__private_0_1_0::sync_body::<
        Result<String, FetchError>,
        _,
    >(move || { http::get(host, path) }) {
        ::core::result::Result::Ok(__fusebox_value) => {
            __fusebox_permit.succeeded();
            ::core::result::Result::Ok(__fusebox_value)
        }
        ::core::result::Result::Err(__fusebox_error) => {
            if is_transient(&__fusebox_error) {
                __fusebox_permit.failed()
            } else {
                __fusebox_permit.ignored()
            }
            ::core::result::Result::Err(__fusebox_error)
        }
    }
}

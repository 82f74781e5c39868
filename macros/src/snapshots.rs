//! Snapshot tests of whole expansions: a few representative functions, expanded and
//! pretty-printed, compared with the files committed under `macros/tests/snapshots/`, so a review
//! shows what a change does to the generated code. `FUSEBOX_SNAPSHOTS=overwrite cargo test -p
//! fusebox-macros snapshots` rewrites the files; read the diff before committing it.

use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use quote::quote;

use crate::attribute as circuit_breaker;

/// The expansion of `item` under `#[circuit_breaker(args)]`, pretty-printed; a method's
/// expansion is shown inside `impl Client`.
fn pretty(args: TokenStream, item: TokenStream, method: bool) -> String {
    let out = circuit_breaker(args, item);
    let out = if method {
        quote!(impl Client { #out })
    } else {
        out
    };
    let file: syn::File = syn::parse2(out).expect("the expansion parses as a file");
    prettyplease::unparse(&file)
}

/// Snapshots also shown elsewhere: the "Expands to" section of the `circuit_breaker` rustdoc
/// in the runtime crate includes this copy (a file inside that crate, so it is packaged with it).
const COPIES: [(&str, &str); 1] = [("literal_key", "../runtime/doc/expands_to.rs")];

/// Compares `actual` with the snapshot `name` (and its copies), or writes them with
/// `FUSEBOX_SNAPSHOTS=overwrite`.
fn check(name: &str, actual: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let snapshots = dir.join("tests/snapshots");
    let (snapshot, copies) = (snapshots.join(format!("{name}.rs")), &COPIES);
    let copies = copies
        .iter()
        .filter(|(snapshot, _)| *snapshot == name)
        .map(|(_, copy)| dir.join(copy));
    for path in std::iter::once(snapshot).chain(copies) {
        compare(&path, name, actual);
    }
}

/// Compares `actual` with the file at `path`, or writes it with `FUSEBOX_SNAPSHOTS=overwrite`.
fn compare(path: &Path, name: &str, actual: &str) {
    let header = "// The expansion of one representative function (macros/src/snapshots.rs).\n\
                  // Regenerate with `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros`.\n\n";
    let actual = format!("{header}{actual}");
    if std::env::var("FUSEBOX_SNAPSHOTS").as_deref() == Ok("overwrite") {
        std::fs::create_dir_all(path.parent().expect("a snapshot has a folder"))
            .expect("snapshot folder created");
        std::fs::write(path, &actual).expect("snapshot written");
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        expected == actual,
        "the expansion `{name}` differs from {}; if the change is intended, run \
         `FUSEBOX_SNAPSHOTS=overwrite cargo test -p fusebox-macros` and review the diff\n\
         --- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn literal_key() {
    let out = pretty(
        quote!(
            key = "payment",
            failure = [Timeout],
            window = 20,
            open_for = "30s"
        ),
        quote!(
            fn authorize(amount: u64) -> Result<u64, PaymentError> {
                gateway::authorize(amount)
            }
        ),
        false,
    );
    check("literal_key", &out);
}

#[test]
fn dynamic_key() {
    let out = pretty(
        quote!(key = host, failure = is_transient, registry = REGISTRY),
        quote!(
            fn fetch(host: &str, path: &str) -> Result<String, FetchError> {
                http::get(host, path)
            }
        ),
        false,
    );
    check("dynamic_key", &out);
}

#[test]
fn dynamic_key_async() {
    let out = pretty(
        quote!(key = host, registry = REGISTRY),
        quote!(
            async fn fetch(host: &str, path: &str) -> Result<String, FetchError> {
                http::get(host, path).await
            }
        ),
        true,
    );
    // An `async fn` owns the breaker it finds (its future may move between threads); a plain
    // `fn` borrows it under the map's guard (`dynamic_key`).
    check("dynamic_key_async", &out);
}

#[test]
fn dynamic_key_retry() {
    let out = pretty(
        quote!(key = self.host, retry = 3, registry = REGISTRY),
        quote!(
            async fn fetch(&self, path: &str) -> Result<String, FetchError> {
                self.client.get(path).await
            }
        ),
        true,
    );
    // The attempt driver: the key's breaker is found once, each attempt asks it for admission.
    check("dynamic_key_retry", &out);
}

#[test]
fn fallback() {
    let out = pretty(
        quote!(
            key = "stock",
            failure = [Timeout, Unavailable],
            fallback = cached_stock
        ),
        quote!(
            fn stock(sku: u32) -> Result<u32, StockError> {
                inventory::count(sku)
            }
        ),
        false,
    );
    check("fallback", &out);
}

#[test]
fn async_timeout_retry() {
    let out = pretty(
        quote!(
            key = "search",
            timeout = "800ms",
            retry = 3,
            backoff = "100ms",
            consecutive = 5
        ),
        quote!(
            async fn send(&self, order: Order, id: &str) -> Result<u32, ApiError> {
                self.transport.send(order, id).await
            }
        ),
        true,
    );
    // With `retry` the attempt borrows the parameters: no `move`, no re-binding.
    check("async_timeout_retry", &out);
}

#[test]
fn async_timeout_fallback() {
    let out = pretty(
        quote!(
            key = "charge",
            timeout = "300ms",
            failure = [Timeout],
            fallback = charge_later
        ),
        quote!(
            async fn charge(order: u64) -> Result<u32, ApiError> {
                gateway::charge(order).await
            }
        ),
        true,
    );
    // `timeout` alone: the plain expansion with the body's future awaited inside the timer's, no
    // attempt driver.
    check("async_timeout_fallback", &out);
}

#[test]
fn method() {
    let out = pretty(
        quote!(key = "send", policy = SEND_POLICY, max_concurrent = 8),
        quote!(
            async fn send(&self, order: u64) -> Result<u32, ApiError> {
                self.transport.send(order).await
            }
        ),
        true,
    );
    check("method", &out);
}

#[test]
fn error_alias() {
    // The error type is not written as `Result<T, E>`: a bare variant goes through the alias.
    let out = pretty(
        quote!(key = "k", window = 4, failure = [Timeout]),
        quote!(
            #[inline]
            pub fn f(kind: Kind) -> ApiResult<u32> {
                respond(kind)
            }
        ),
        false,
    );
    check("error_alias", &out);
}

#[test]
fn failure_if() {
    // An `Ok` value the predicate accepts is reported as a failure and returned as is.
    let out = pretty(
        quote!(
            key = "status",
            failure_if = http::is_unavailable,
            failure_count = 50,
            window = "1m"
        ),
        quote!(
            fn fetch(path: &str) -> Result<Response, FetchError> {
                http::get(path)
            }
        ),
        false,
    );
    check("failure_if", &out);
}

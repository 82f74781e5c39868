//! Unit tests of code generation details the snapshots do not show: the error path, the
//! unchanged item on error, the key-name check, method detection and which `async` bodies run
//! in place.

use super::names::error_path;
use super::once::awaits_in_place;
use crate::attribute as circuit_breaker;
use quote::{ToTokens, quote};

#[test]
fn error_type_of_a_written_result() {
    let path = |ty: proc_macro2::TokenStream| {
        error_path(&syn::parse2(ty).unwrap()).map(|p| p.to_token_stream().to_string())
    };
    assert_eq!(
        path(quote!(Result<u8, ApiError>)).as_deref(),
        Some("ApiError")
    );
    assert_eq!(
        path(quote!(std::result::Result<(), errors::Wrapped<T>>)).as_deref(),
        Some("errors :: Wrapped :: < T >")
    );
    assert_eq!(path(quote!(Result<u8, Self>)).as_deref(), Some("Self"));
    assert_eq!(path(quote!(ApiResult<u8>)), None);
    assert_eq!(path(quote!(io::Result<u8>)), None);
    assert_eq!(path(quote!(Result<u8, (A, B)>)), None);
    assert_eq!(path(quote!(u8)), None);
}

#[test]
fn on_error_the_item_is_unchanged() {
    let item = quote!(
        fn f(kind: Kind) -> ApiResult<u32> {
            respond(kind)
        }
    );
    let out = circuit_breaker(quote!(key = "k", window = 0, falure = []), item.clone());
    let out = out.to_string();
    assert!(out.starts_with(&item.to_string()), "{out}");
    assert_eq!(out.matches("compile_error").count(), 2, "{out}");
}

#[test]
fn a_bare_key_name_must_be_a_parameter_or_upper_case() {
    let item = quote!(
        fn charge(host: &str, (a, b): (u8, u8)) -> Result<u8, E> {
            Ok(a + b)
        }
    );
    let plain = quote!(
        fn charge(host: &str) -> Result<u8, E> {
            Ok(1)
        }
    );
    let errors = |args, item| circuit_breaker(args, item).to_string();
    let out = errors(quote!(key = payment), plain.clone());
    assert!(
        out.contains("`payment` is not a parameter of `charge`: a literal key is a string"),
        "{out}"
    );
    for args in [
        quote!(key = host),
        quote!(key = KEY),
        quote!(key = crate::payment),
        quote!(key = host.to_owned()),
    ] {
        let out = errors(args.clone(), plain.clone());
        assert!(!out.contains("compile_error"), "{args}: {out}");
    }
    // A pattern parameter may bind the name: rustc decides.
    let out = errors(quote!(key = a), item);
    assert!(!out.contains("compile_error"), "{out}");
}

#[test]
fn methods_name_their_type_and_free_functions_their_module() {
    let method = circuit_breaker(
        quote!(key = "k"),
        quote!(
            fn get(&self) -> Result<u8, E> {
                Ok(1)
            }
        ),
    )
    .to_string();
    assert!(
        method.contains("MethodName :: new (\"get\")")
            && method.contains("type_name :: < Self >")
            && method.contains("__FUSEBOX_NAME . cached ()")
            && method.contains("enter :: < false > ("),
        "{method}"
    );
    let associated = circuit_breaker(
        quote!(key = "k"),
        quote!(
            fn new() -> Result<Self, E> {
                todo!()
            }
        ),
    )
    .to_string();
    assert!(associated.contains("type_name :: < Self >"), "{associated}");
    let free = circuit_breaker(
        quote!(key = "k"),
        quote!(
            fn get() -> Result<u8, E> {
                Ok(1)
            }
        ),
    )
    .to_string();
    assert!(
        !free.contains("MethodName") && !free.contains("Self"),
        "{free}"
    );
    // A literal key's permit finds the name through a zero-sized type of the expansion.
    assert!(
        free.contains("__FUSEBOX_SITE . function") && free.contains("enter :: < false > ("),
        "{free}"
    );
}

#[test]
fn only_bodies_that_cannot_leave_the_function_run_in_place() {
    for body in [
        quote!({ backend(n).await }),
        quote!({
            let x = client.get(!ready).await;
            if x.is_ok() { x } else { other().await }
        }),
        quote!({
            loop {
                if done() {
                    break Ok(1);
                }
            }
        }),
    ] {
        assert!(awaits_in_place(&body), "{body}");
    }
    for body in [
        quote!({
            backend(n).await?;
            Ok(())
        }),
        quote!({
            if n == 0 {
                return Err(E::Zero);
            }
            backend(n).await
        }),
        // A macro may expand to `return` (`bail!`) or `?`.
        quote!({ anyhow::bail!("no") }),
        quote!({
            ensure![n > 0];
            backend(n).await
        }),
        quote!({
            m! { x }
        }),
        // On the safe side: a nested closure's `return`, a negated group.
        quote!({
            let f = || {
                return 1;
            };
            f()
        }),
        quote!({ if !(a && b) { x().await } else { y().await } }),
    ] {
        assert!(!awaits_in_place(&body), "{body}");
    }
}

#[test]
fn a_plain_fn_is_marked_inline_unless_its_attributes_say_otherwise() {
    let expand = |item| circuit_breaker(quote!(key = "k"), item).to_string();
    let plain = expand(quote!(
        fn f() -> Result<u8, E> {
            Ok(1)
        }
    ));
    assert!(plain.starts_with("# [inline] fn f"), "{plain}");
    let never = expand(quote!(
        #[inline(never)]
        fn f() -> Result<u8, E> {
            Ok(1)
        }
    ));
    assert_eq!(never.matches("inline").count(), 1, "{never}");
    let conditional = expand(quote!(
        #[cfg_attr(test, inline(never))]
        fn f() -> Result<u8, E> {
            Ok(1)
        }
    ));
    assert_eq!(conditional.matches("inline").count(), 1, "{conditional}");
    let asynchronous = expand(quote!(
        async fn f() -> Result<u8, E> {
            Ok(1)
        }
    ));
    assert!(!asynchronous.contains("inline"), "{asynchronous}");
}

//! Unit tests of the checks on the annotated function.

use super::*;
use quote::quote;

fn message(tokens: TokenStream, fallback: bool) -> String {
    match parse(tokens, fallback, &[]) {
        Ok(_) => String::new(),
        Err(error) => error.to_string(),
    }
}

#[test]
fn accepts_functions_and_methods() {
    for item in [
        quote!(
            fn f() -> Result<(), E> {
                Ok(())
            }
        ),
        quote!(
            pub async fn f<T: Send>(x: T) -> io::Result<T> {
                Ok(x)
            }
        ),
        quote!(
            fn f(&mut self, mut x: u8) -> Result<u8, E> {
                x += 1;
                Ok(x)
            }
        ),
        quote!(
            unsafe fn f(self) -> R {
                todo!()
            }
        ),
    ] {
        assert_eq!(message(item.clone(), true), "", "{item}");
    }
    let function = parse(
        quote!(
            fn f(&self, a: A, mut b: B) -> R {
                x
            }
        ),
        true,
        &[],
    )
    .unwrap();
    assert!(function.params.receiver.is_some());
    assert_eq!(function.params.names.len(), 2);
    assert_eq!(function.params.names[1], "b");
}

#[test]
fn refuses_other_items() {
    assert!(
        message(
            quote!(
                struct Client {
                    a: u8,
                }
            ),
            false
        )
        .starts_with("`#[circuit_breaker]` goes on a function, but `Client` is a struct")
    );
    assert!(
        message(quote!(impl Client {}), false)
            .starts_with("`#[circuit_breaker]` goes on a function;")
    );
    assert!(
        message(
            quote!(
                fn get(&self) -> Result<u8, E>;
            ),
            false
        )
        .starts_with("`#[circuit_breaker]` needs a function with a body")
    );
}

#[test]
fn refuses_unsupported_functions() {
    assert!(
        message(
            quote!(
                const fn f() -> R {
                    x
                }
            ),
            false
        )
        .contains("`const fn`")
    );
    assert!(
        message(
            quote!(
                extern "C" fn f() -> R {
                    x
                }
            ),
            false
        )
        .contains("`extern`")
    );
    assert!(
        message(
            quote!(
                fn f() {
                    x
                }
            ),
            false
        )
        .contains("but `f` returns `()`")
    );
}

#[test]
fn fallback_needs_plain_parameter_names() {
    let pattern = quote!(
        fn f((a, b): (u8, u8)) -> R {
            x
        }
    );
    assert_eq!(message(pattern.clone(), false), "");
    assert!(message(pattern, true).starts_with("with `fallback`, every parameter"));
    assert!(
        message(
            quote!(
                fn f(ref a: u8) -> R {
                    x
                }
            ),
            true
        )
        .starts_with("with `fallback`")
    );
    assert!(
        message(
            quote!(
                fn f(_: u8) -> R {
                    x
                }
            ),
            true
        )
        .starts_with("with `fallback`")
    );
}

fn attempts_with(tokens: TokenStream, name: &str) -> Result<(), Vec<String>> {
    let names = [Ident::new(name, Span::call_site())];
    match parse(tokens, false, &names) {
        Ok(_) => Ok(()),
        Err(error) => Err(error.into_iter().map(|e| e.to_string()).collect()),
    }
}

fn attempts(tokens: TokenStream) -> Result<(), Vec<String>> {
    attempts_with(tokens, "retry")
}

#[test]
fn retry_accepts_shared_and_owned_parameters() {
    assert_eq!(
        attempts(quote!(
            async fn f(&self, a: A, b: &B, _: C, d: impl Into<u8>, e: &'static str) -> R {
                x
            }
        )),
        Ok(())
    );
    assert_eq!(
        attempts(quote!(
            async fn f(self: &Self, a: (A)) -> R {
                x
            }
        )),
        Ok(())
    );
}

#[test]
fn timeout_alone_accepts_what_retry_refuses() {
    // The body runs once: `&mut self`, `mut` bindings and patterns are fine.
    let item = quote!(
        async fn f(&mut self, mut a: A, (b, c): (B, C), d: &mut D) -> R {
            x
        }
    );
    assert_eq!(attempts_with(item.clone(), "timeout"), Ok(()));
    assert_eq!(attempts_with(item, "retry").unwrap_err().len(), 4);
}

#[test]
fn a_visibly_non_result_return_type_is_refused_at_the_type() {
    for (ty, what) in [
        (quote!(u32), "returns a plain value"),
        (quote!(Option<u32>), "returns an `Option`"),
        (quote!(()), "returns `()`"),
        (quote!((u8, bool)), "returns a tuple"),
        (quote!(&'static str), "returns a reference"),
    ] {
        let found = message(quote!(fn f() -> #ty { x }), false);
        assert!(
            found.starts_with("`#[circuit_breaker]` needs a function returning `Result<T, E>`")
                && found.contains(what),
            "{ty}: {found}"
        );
    }
    for ty in [
        quote!(ApiResult<u32>),
        quote!(io::Result<u32>),
        quote!(Result<u32, E>),
        quote!(anyhow::Result<u32>),
    ] {
        assert_eq!(message(quote!(fn f() -> #ty { x }), false), "", "{ty}");
    }
}

#[test]
fn a_body_is_kept_as_written_even_when_it_does_not_parse() {
    let function = parse(
        quote!(
            fn f(a: u8) -> R {
                let b = a * ;
            }
        ),
        false,
        &[],
    )
    .expect("only the signature is parsed");
    assert_eq!(function.item.body.stream().to_string(), "let b = a * ;");
}

#[test]
fn attempts_need_an_async_fn() {
    let sync = attempts(quote!(
        fn f(a: A) -> R {
            x
        }
    ))
    .unwrap_err();
    assert_eq!(sync.len(), 1);
    assert!(
        sync[0].starts_with("`retry` needs an `async fn`"),
        "{sync:?}"
    );
}

#[test]
fn attempts_refuse_what_cannot_be_shared_between_attempts() {
    let errors = |tokens| attempts(tokens).unwrap_err();
    for (item, expected) in [
        (
            quote!(
                async fn f(&mut self) -> R {
                    x
                }
            ),
            "retrying needs the arguments again for every attempt, so `&mut self` cannot",
        ),
        (
            quote!(
                async fn f(self: &mut Self) -> R {
                    x
                }
            ),
            "retrying needs the arguments again for every attempt, so `&mut self` cannot",
        ),
        (
            quote!(
                async fn f(self) -> R {
                    x
                }
            ),
            "retrying needs the arguments again for every attempt, so `self` by value",
        ),
        (
            quote!(
                async fn f(self: Arc<Self>) -> R {
                    x
                }
            ),
            "retrying needs the arguments again for every attempt, so `self` by value",
        ),
        (
            quote!(
                async fn f(a: &mut A) -> R {
                    x
                }
            ),
            "retrying needs the arguments again for every attempt, and a `&mut` argument",
        ),
        (
            quote!(
                async fn f(mut a: A) -> R {
                    x
                }
            ),
            "with `retry`, every attempt borrows `a` again",
        ),
        (
            quote!(
                async fn f((a, b): (A, B)) -> R {
                    x
                }
            ),
            "with `retry`, every parameter must be a plain name",
        ),
        (
            quote!(
                async fn f(ref a: A) -> R {
                    x
                }
            ),
            "with `retry`, every parameter must be a plain name",
        ),
    ] {
        let found = errors(item.clone());
        assert!(
            found.len() == 1 && found[0].starts_with(expected),
            "{item}: {found:?}"
        );
    }
}

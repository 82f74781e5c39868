use proc_macro::TokenStream;
#[proc_macro_attribute]
pub fn circuit_breaker(_a: TokenStream, i: TokenStream) -> TokenStream {
    i
}

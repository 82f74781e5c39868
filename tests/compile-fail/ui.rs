//! Compile-fail suite of `#[circuit_breaker]`: one misuse per file in `ui/`, each with the
//! diagnostic it must produce checked in next to it (`*.stderr`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}

//! [`PolicyPatch`]: the fields an operator's override names, applied as the setters of
//! [`Policy`] apply them; generated from the knob table (`knobs.rs`).

use std::time::Duration;

use crate::{
    Knob, OpenContext, OpenForFn, Others, Policy, Quorum, Recovery, RetryBudget, Window,
    duration_to_nanos, factor_to_milli, throttle_to_milli,
};

/// Makes [`PolicyPatch`] from the knob table: a field of `Option`s per field of [`Policy`], the
/// setters of `Policy` (and the patch-only ones), `then`, `apply` and `From<Policy>`.
macro_rules! patch {
    ($(
        $(#[$doc:meta])*
        $name:ident {
            fields { $($field:ident: $fty:ty = $default:expr),+ }
            setting $setting:tt
            setters {
                $($(#[$sdoc:meta])* fn $setter:ident($($arg:ident: $aty:ty),*) {
                    $($sfield:ident: $sval:expr),+
                })*
            }
            $(patch {
                $($(#[$pdoc:meta])* fn $psetter:ident($($parg:ident: $paty:ty),*) {
                    $($pfield:ident: $pval:expr),+
                })*
            })?
            $(attr $attr:tt)?
            config $config:tt
        }
    )*) => {
        /// Changes to some fields of a [`Policy`]: what an operator's override names, and nothing else.
        ///
        /// It has the setters of [`Policy`]; [`apply`](PolicyPatch::apply) calls the same setters on a
        /// policy, so a field set through a patch follows the same rules as one set in code (see
        /// [`Policy`]). A [`Policy`] converts into the patch of the fields it set explicitly, so
        /// `registry.configure("payment", Policy::new().failure_rate(30))` changes `failure_rate` only.
        ///
        /// ```
        /// use std::time::Duration;
        /// # use fusebox_policy as fusebox;
        /// use fusebox::{Policy, PolicyPatch};
        ///
        /// let declared = Policy::new().window(20).open_for(Duration::from_secs(30));
        /// let patched = PolicyPatch::new().failure_rate(30).apply(declared);
        /// assert_eq!(patched.settings().failure_rate, Some(30));
        /// assert_eq!(patched.settings().open_for, Duration::from_secs(30), "fields not named are kept");
        /// ```
        ///
        /// A patch holds each field the way a `Policy` does (durations in nanoseconds, the
        /// backoff factor in thousandths), so applying one stores what the setters store.
        #[derive(Debug, Clone, Copy, Default, PartialEq)]
        pub struct PolicyPatch {
            $($($field: Option<$fty>,)+)*
        }

        impl PolicyPatch {
            /// A patch that changes nothing.
            #[must_use]
            pub const fn new() -> Self {
                PolicyPatch {
                    $($($field: None,)+)*
                }
            }

            $($(
                #[doc = concat!("See [`Policy::", stringify!($setter), "`].")]
                #[must_use = "a setter returns the changed patch and leaves `self` as it was"]
                pub const fn $setter(mut self, $($arg: $aty),*) -> Self {
                    $(self.$sfield = Some($sval);)+
                    self
                }
            )*)*

            $($($(
                $(#[$pdoc])*
                #[must_use = "a setter returns the changed patch and leaves `self` as it was"]
                pub const fn $psetter(mut self, $($parg: $paty),*) -> Self {
                    $(self.$pfield = Some($pval);)+
                    self
                }
            )*)?)*

            /// This patch with every field `later` names taken from `later`.
            #[must_use]
            pub fn then(self, later: PolicyPatch) -> PolicyPatch {
                PolicyPatch {
                    $($($field: later.$field.or(self.$field),)+)*
                }
            }

            /// `policy` with each field this patch names set as its [`Policy`] setter sets it,
            /// knob by knob in the order of the knob table.
            #[must_use]
            pub fn apply(&self, policy: Policy) -> Policy {
                let mut p = policy;
                $(
                    if false $(|| self.$field.is_some())+ {
                        $(if let Some(value) = self.$field {
                            p.$field = value;
                        })+
                        p = p.mark(Knob::$name);
                    }
                )*
                p
            }
        }

        impl From<Policy> for PolicyPatch {
            /// The fields `policy` set explicitly (see [`Policy`]).
            fn from(policy: Policy) -> Self {
                PolicyPatch {
                    $($($field: policy.is_explicit(Knob::$name).then_some(policy.$field),)+)*
                }
            }
        }
    };
}
crate::with_knobs!(patch);

impl PolicyPatch {
    /// True when the patch names no field.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == PolicyPatch::new()
    }
}

//! The policy types, defined once in the `fusebox-policy` crate (which the attribute validates
//! with too) and re-exported here under the paths the runtime and its users name.

pub(crate) use fusebox_policy::limits::TIME_BUCKETS;
pub use fusebox_policy::{Others, Policy, PolicyError, PolicyPatch, Recovery, Window};

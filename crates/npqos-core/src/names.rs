//! Names of configuration choices: one name per value of a closed enum (`Conformance`,
//! `Timer`, `Subsystem`, ...), used to read configuration files and to write results, so a
//! name is mapped to its value in exactly one place.
//!
//! [`Named`] lists the values and their names; [`named!`](crate::named) implements it with
//! `Display` and `FromStr` (whose error, [`UnknownName`], lists what was expected).

use std::fmt;

/// A closed set of values with one name each.
pub trait Named: Copy + Sized + 'static {
    /// What the values are, in messages ("conformance").
    const KIND: &'static str;
    /// Every value, in the order messages list them.
    const ALL: &'static [Self];
    /// The value's name in configuration files and results.
    fn name(self) -> &'static str;
    /// The value named `name`.
    fn named(name: &str) -> Result<Self, UnknownName> {
        Self::ALL.iter().copied().find(|v| v.name() == name).ok_or_else(|| UnknownName {
            kind: Self::KIND,
            value: name.to_string(),
            expected: Self::ALL.iter().map(|v| v.name()).collect(),
        })
    }
}

/// A name that is not one of a [`Named`] type's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct UnknownName {
    pub kind: &'static str,
    pub value: String,
    pub expected: Vec<&'static str>,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.expected.iter().map(|n| format!("{n:?}")).collect();
        write!(f, "{} {:?}: expected one of {}", self.kind, self.value, list.join(", "))
    }
}

/// Implements [`Named`], `Display` and `FromStr` for a fieldless enum:
/// `named!(Conformance, "conformance", { SendThenPay => "send-then-pay", ... });`
#[macro_export]
macro_rules! named {
    ($ty:ty, $kind:literal, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $crate::names::Named for $ty {
            const KIND: &'static str = $kind;
            const ALL: &'static [Self] = &[$(<$ty>::$variant),+];
            fn name(self) -> &'static str {
                match self {
                    $(<$ty>::$variant => $name),+
                }
            }
        }
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::names::Named::name(*self))
            }
        }
        impl ::std::str::FromStr for $ty {
            type Err = $crate::names::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$ty as $crate::names::Named>::named(s)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queues::timing::Subsystem;
    use crate::shaper::{Conformance, Timer};

    /// Every name reads back as its value, and an unknown name lists the known ones.
    #[test]
    fn names_round_trip() {
        fn check<T: Named + PartialEq + fmt::Debug + std::str::FromStr<Err = UnknownName> + fmt::Display>() {
            for &v in T::ALL {
                assert_eq!(v.to_string().parse::<T>(), Ok(v));
            }
            let e = "nonsense".parse::<T>().unwrap_err();
            assert_eq!(e.expected.len(), T::ALL.len());
            assert!(e.to_string().contains(T::ALL[0].name()), "{e}");
        }
        check::<Conformance>();
        check::<Timer>();
        check::<Subsystem>();
        check::<crate::sched::fq::Discipline>();
        check::<crate::alloc::PolicyKind>();
        for &k in <crate::alloc::PolicyKind as Named>::ALL {
            let q = crate::Duration::from_micros(100);
            assert_eq!(k.with_quantum(q).kind(), k, "a policy's kind names it back");
            assert_eq!(k.with_quantum(q).name(), k.name());
        }
        assert_eq!(Conformance::WaitForTokens.to_string(), "wait-for-tokens");
        assert_eq!("wheel".parse::<Timer>(), Ok(Timer::Wheel));
        assert_eq!(Subsystem::Sqc.to_string(), "sqc");
    }
}

//! Typed identifiers: small newtypes over `u32`, one per kind of thing a mechanism names.
//!
//! The same type means the same thing in every mechanism: a [`QueueId`] is a physical packet
//! queue (a dqs physical queue, a shaped queue of kim, a DRR queue, a qcache queue), a
//! [`FlowId`] a flow with its own reservation (predictive's fair queuing), a [`ServiceId`] a
//! service with its own processing and delay tolerance (everest), a [`ProcessorId`] one of the
//! processors the services share (everest, predictive), a [`CoreId`] the core whose heap holds a
//! queue's timer (kim), and an [`AppId`] an application whose state a processor caches (LAP).
//! Ids are dense: a mechanism built for `n` of a kind accepts `0..n` and answers anything else
//! with [`crate::Error::UnknownId`].

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// What the id names, for error messages.
            pub const KIND: &'static str = $kind;
            /// The id as an index into a flat array.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
            /// The id of array index `i` (callers hold `i < u32::MAX`).
            #[inline]
            pub const fn from_index(i: usize) -> Self {
                $name(i as u32)
            }
        }

        impl From<u32> for $name {
            #[inline]
            fn from(v: u32) -> Self {
                $name(v)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} {}", $kind, self.0)
            }
        }
    };
}

id_type!(
    /// A physical packet queue.
    QueueId,
    "queue"
);
id_type!(
    /// A flow with its own reservation (predictive section 4).
    FlowId,
    "flow"
);
id_type!(
    /// A service: its own processing, delay tolerance and guarantee (everest Table 1).
    ServiceId,
    "service"
);
id_type!(
    /// One of the processors the services share (everest N_p, predictive m).
    ProcessorId,
    "processor"
);
id_type!(
    /// A core with its own reschedule heap (kim).
    CoreId,
    "core"
);
id_type!(
    /// An application whose state a processor's cache holds (predictive section 5).
    AppId,
    "application"
);

id_type!(
    /// A packet buffer: what a queue in queue memory links (qcache section 2.1).
    BufferId,
    "buffer"
);
id_type!(
    /// One entry of a fully associative descriptor cache (qcache's sqc and qc).
    EntryId,
    "cache entry"
);

/// Checks `id < count` for an id of kind `kind`.
#[inline]
pub(crate) fn check(kind: &'static str, id: u32, count: usize) -> Result<usize, crate::Error> {
    if (id as usize) < count {
        Ok(id as usize)
    } else {
        Err(crate::Error::UnknownId { kind, id, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_index_display_and_check() {
        assert_eq!(QueueId(7).index(), 7);
        assert_eq!(ServiceId::from_index(3), ServiceId(3));
        assert_eq!(ProcessorId(2).to_string(), "processor 2");
        assert_eq!(check(QueueId::KIND, 3, 4), Ok(3));
        let e = check(QueueId::KIND, 4, 4).unwrap_err();
        assert_eq!(e.to_string(), "queue 4 does not exist (there are 4)");
    }
}

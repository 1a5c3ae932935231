//! Conservation at an element's ports: every packet an element took in has left it, been
//! dropped for a named reason, or is still held. An element counts its ports as packets pass
//! and its holdings in its own state, so a packet lost inside it shows as a difference here,
//! at the element that lost it.

use std::fmt;

/// Packets through one element: taken in, handed on, and dropped by reason (`R` reasons, in
/// the element's order of its reason names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports<const R: usize> {
    pub input: u64,
    pub output: u64,
    pub dropped: [u64; R],
}

impl<const R: usize> Default for Ports<R> {
    fn default() -> Self {
        Ports { input: 0, output: 0, dropped: [0; R] }
    }
}

impl<const R: usize> Ports<R> {
    /// Packets dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Checks in = out + dropped + `held`, where `held` is what the element's own state holds.
    pub fn check(&self, element: &'static str, held: u64) -> Result<(), ConservationError> {
        let accounted = self.output as u128 + self.dropped_total() as u128 + held as u128;
        if self.input as u128 == accounted {
            return Ok(());
        }
        Err(ConservationError { element, input: self.input, output: self.output, dropped: self.dropped_total(), held })
    }
}

/// An element whose ports do not add up: a defect of the element, not of its caller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConservationError {
    pub element: &'static str,
    pub input: u64,
    pub output: u64,
    pub dropped: u64,
    pub held: u64,
}

impl fmt::Display for ConservationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} packets in, but {} out + {} dropped + {} held",
            self.element, self.input, self.output, self.dropped, self.held
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_packet_is_named_at_its_element() {
        let mut p = Ports::<2> { input: 10, output: 6, dropped: [1, 2] };
        assert_eq!(p.check("ingress", 1), Ok(()));
        p.output += 1;
        let e = p.check("ingress", 1).unwrap_err();
        assert_eq!(e.to_string(), "ingress: 10 packets in, but 7 out + 3 dropped + 1 held");
    }
}

//! A forwarding thread's two sides on either kind of socket (`[live] io`, docs/live.md,
//! "AF_XDP"): packet rings ([`super::ring`], the default) or AF_XDP sockets ([`super::xsk`]).
//! The loop ([`super::worker`]) is the same for both: frames are taken a batch at a time and
//! handed over in place, and sent by copying them into the transmit side's slots.

use super::ring::{RxCounters, RxRing, TxCounters, TxRing};
use super::xsk::{XskRx, XskTx};
use std::io;
use std::os::fd::RawFd;

/// A receive side.
pub enum Rx {
    Ring(RxRing),
    Xdp(XskRx),
}

/// A transmit side.
pub enum Tx {
    Ring(TxRing),
    Xdp(XskTx),
}

macro_rules! both {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            Self::Ring($s) => $e,
            Self::Xdp($s) => $e,
        }
    };
}

impl Rx {
    pub fn fd(&self) -> RawFd {
        both!(self, r => r.fd())
    }
    pub fn index(&self) -> libc::c_int {
        both!(self, r => r.index())
    }
    pub fn take_error(&mut self) -> Option<io::Error> {
        both!(self, r => r.take_error())
    }
    pub fn ready(&self) -> bool {
        both!(self, r => r.ready())
    }
    /// The next batch of frames to `f(frame, timestamp, [next, after])`: a packet ring's
    /// block ([`RxRing::next_block`]) or up to 256 frames of an AF_XDP receive ring
    /// ([`XskRx::next_block`], no timestamp).
    #[inline]
    pub fn next_block(&mut self, f: impl FnMut(&[u8], u64, [&[u8]; 2])) -> usize {
        both!(self, r => r.next_block(f))
    }
    pub fn counters(&mut self) -> RxCounters {
        both!(self, r => r.counters())
    }
}

impl Tx {
    pub fn fd(&self) -> RawFd {
        both!(self, t => t.fd())
    }
    pub fn index(&self) -> libc::c_int {
        both!(self, t => t.index())
    }
    pub fn is_down(&self) -> bool {
        both!(self, t => t.is_down())
    }
    pub fn mtu(&self) -> u32 {
        both!(self, t => t.mtu())
    }
    pub fn max_frame(&self) -> u32 {
        both!(self, t => t.max_frame())
    }
    pub fn room(&mut self, max: usize) -> usize {
        both!(self, t => t.room(max))
    }
    #[inline]
    pub fn push(&mut self, frame: &[u8]) {
        both!(self, t => t.push(frame))
    }
    pub fn pending(&self) -> usize {
        both!(self, t => t.pending())
    }
    pub fn flush(&mut self) {
        both!(self, t => t.flush())
    }
    pub fn counters(&self) -> TxCounters {
        both!(self, t => t.counters())
    }
}

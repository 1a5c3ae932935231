//! Frames handed from one forwarding thread to another (docs/live.md, "Every core"): the
//! kernel spreads flows over the threads by a hash of their 5-tuple, and a frame whose bucket
//! several flows share (a service's rate per class, or per subscriber address) goes to the one
//! thread that owns that bucket, so that every bucket is one thread's and its rate holds
//! exactly. One single-producer single-consumer ring of fixed slots per ordered pair of
//! threads (a copy of the frame, two atomic stores per batch, no lock), and per thread an
//! eventfd that wakes it when it sleeps with frames handed to it.
//!
//! No crate fits: `rtrb` and `crossbeam`'s queues move typed values (a `Vec<u8>` per frame is
//! an allocation on each side); this is a byte ring of slots the size of a transmit slot.

use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};

/// Which pipeline of the owner a handed frame is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// The way in (input to output).
    In,
    /// The shaped way back (output to input).
    Back,
}

/// An index on a cache line of its own (the producer's and the consumer's apart).
#[repr(align(64))]
#[derive(Default)]
struct Index(AtomicUsize);

/// One thread's frames for another: a ring of `slots` slots of `slot` bytes, each a 4-byte
/// length (the top bit: the way back) and the frame.
struct Lane {
    /// Slots taken by the consumer up to here (written by the consumer).
    head: Index,
    /// Slots filled up to here (written by the producer).
    tail: Index,
    slot: usize,
    slots: usize,
    bytes: Box<[UnsafeCell<u8>]>,
}

// SAFETY: a slot's bytes are written only by the producer while it is free (between head and
// tail + slots) and read only by the consumer while it is filled (between head and tail); the
// indices hand slots over with release and acquire.
unsafe impl Sync for Lane {}

impl Lane {
    fn new(slot: usize, slots: usize) -> Lane {
        let bytes = (0..slot * slots).map(|_| UnsafeCell::new(0)).collect();
        Lane { head: Index::default(), tail: Index::default(), slot, slots, bytes }
    }

    fn ptr(&self, i: usize) -> *mut u8 {
        self.bytes[(i % self.slots) * self.slot].get()
    }

    /// Copies `frame` in (producer only); false when the lane is full or the frame too long.
    fn push(&self, frame: &[u8], way: Way) -> bool {
        let tail = self.tail.0.load(Ordering::Relaxed);
        if tail - self.head.0.load(Ordering::Acquire) == self.slots || frame.len() + 4 > self.slot {
            return false;
        }
        let len = frame.len() as u32 | if way == Way::Back { 1 << 31 } else { 0 };
        // SAFETY: slot `tail` is free (checked above) and only this producer writes it; the
        // frame fits (checked above).
        unsafe {
            let p = self.ptr(tail);
            std::ptr::copy_nonoverlapping(len.to_ne_bytes().as_ptr(), p, 4);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), p.add(4), frame.len());
        }
        self.tail.0.store(tail + 1, Ordering::Release);
        true
    }

    /// Hands every filled slot to `f` (consumer only), then frees them; the frames taken.
    fn drain(&self, mut f: impl FnMut(&[u8], Way)) -> usize {
        let head = self.head.0.load(Ordering::Relaxed);
        let tail = self.tail.0.load(Ordering::Acquire);
        for i in head..tail {
            // SAFETY: slot `i` is filled (before tail, acquired) and the producer does not
            // touch it until head passes it.
            let (len, frame) = unsafe {
                let p = self.ptr(i);
                let mut l = [0u8; 4];
                std::ptr::copy_nonoverlapping(p, l.as_mut_ptr(), 4);
                let len = u32::from_ne_bytes(l);
                (len, std::slice::from_raw_parts(p.add(4), (len & !(1 << 31)) as usize))
            };
            f(frame, if len >> 31 == 1 { Way::Back } else { Way::In });
        }
        self.head.0.store(tail, Ordering::Release);
        tail - head
    }

    fn is_empty(&self) -> bool {
        self.head.0.load(Ordering::Relaxed) == self.tail.0.load(Ordering::Acquire)
    }
}

/// The lanes between `n` threads and each thread's wake-up.
pub struct Lanes {
    n: usize,
    /// `lanes[from * n + to]` (the diagonal unused and empty).
    lanes: Vec<Lane>,
    asleep: Vec<AtomicBool>,
    wake: Vec<OwnedFd>,
}

/// Bytes of one lane at most: 2,048 slots of 2 KiB at the usual MTU.
const LANE_BYTES: usize = 8 << 20;

impl Lanes {
    /// Lanes between `n` threads for frames of up to `max_frame` bytes.
    ///
    /// Errors: an eventfd could not be made.
    pub fn new(n: usize, max_frame: u32) -> std::io::Result<Lanes> {
        let slot = (max_frame as usize + 4).next_multiple_of(64);
        let slots = (LANE_BYTES / slot).clamp(256, 4096);
        let lanes =
            (0..n * n).map(|i| if i / n == i % n { Lane::new(64, 1) } else { Lane::new(slot, slots) }).collect();
        let wake = (0..n)
            .map(|_| {
                // SAFETY: eventfd(2) with valid flags; the descriptor is owned from here on.
                let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // SAFETY: a fresh descriptor nobody else owns.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            })
            .collect::<Result<_, _>>()?;
        Ok(Lanes { n, lanes, asleep: (0..n).map(|_| AtomicBool::new(false)).collect(), wake })
    }

    pub fn threads(&self) -> usize {
        self.n
    }

    /// The thread that owns a shared bucket of hash `h`.
    pub fn owner(&self, h: u64) -> usize {
        ((h as u128 * self.n as u128) >> 64) as usize
    }

    /// Thread `from` hands `frame` to thread `to`; false when its lane is full (the frame is
    /// dropped, counted by the caller) or the frame longer than a slot.
    pub fn push(&self, from: usize, to: usize, frame: &[u8], way: Way) -> bool {
        self.lanes[from * self.n + to].push(frame, way)
    }

    /// Thread `from` has handed frames over: wakes each thread in `to` that sleeps.
    pub fn wake(&self, to: impl IntoIterator<Item = usize>) {
        fence(Ordering::SeqCst);
        for t in to {
            if self.asleep[t].load(Ordering::Relaxed) {
                let one = 1u64.to_ne_bytes();
                // SAFETY: writes 8 bytes from a valid buffer to our eventfd.
                unsafe { libc::write(self.wake[t].as_raw_fd(), one.as_ptr().cast(), 8) };
            }
        }
    }

    /// Every frame handed to thread `to`, oldest first from each thread, to `f`; the number.
    pub fn drain(&self, to: usize, mut f: impl FnMut(&[u8], Way)) -> usize {
        (0..self.n).filter(|&from| from != to).map(|from| self.lanes[from * self.n + to].drain(&mut f)).sum()
    }

    /// Thread `me` is about to sleep: true if it may (nothing was handed to it meanwhile).
    /// [`Self::awake`] after the sleep.
    pub fn may_sleep(&self, me: usize) -> bool {
        self.asleep[me].store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let empty = (0..self.n).filter(|&f| f != me).all(|from| self.lanes[from * self.n + me].is_empty());
        if !empty {
            self.asleep[me].store(false, Ordering::Relaxed);
        }
        empty
    }

    /// Thread `me` is awake again: its eventfd emptied.
    pub fn awake(&self, me: usize) {
        self.asleep[me].store(false, Ordering::Relaxed);
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a valid buffer from our non-blocking eventfd.
        unsafe { libc::read(self.wake[me].as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }

    /// Thread `me`'s eventfd, for its poll set.
    pub fn fd(&self, me: usize) -> RawFd {
        self.wake[me].as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_order_and_a_full_lane_refuses() {
        let lanes = Lanes::new(2, 1514).unwrap();
        let slots = (LANE_BYTES / 1536).clamp(256, 4096);
        for i in 0..slots {
            let f = [(i % 251) as u8; 100];
            assert!(lanes.push(0, 1, &f[..60 + i % 40], if i % 3 == 0 { Way::Back } else { Way::In }));
        }
        assert!(!lanes.push(0, 1, &[0; 60], Way::In), "a full lane refuses");
        assert!(!lanes.push(1, 0, &[0; 2000], Way::In), "a frame longer than a slot is refused");
        assert!(!lanes.may_sleep(1), "frames wait for thread 1");
        let mut seen = 0;
        let n = lanes.drain(1, |f, way| {
            assert_eq!(f.len(), 60 + seen % 40);
            assert!(f.iter().all(|&b| b == (seen % 251) as u8));
            assert_eq!(way, if seen % 3 == 0 { Way::Back } else { Way::In });
            seen += 1;
        });
        assert_eq!((n, seen), (slots, slots));
        assert!(lanes.may_sleep(1));
        lanes.awake(1);
        assert_eq!(lanes.drain(0, |_, _| panic!("nothing for thread 0")), 0);
    }

    #[test]
    fn a_producer_and_a_consumer_on_two_threads_lose_and_reorder_nothing() {
        let lanes = Lanes::new(2, 1514).unwrap();
        let total = 200_000u32;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0u32;
                while i < total {
                    if lanes.push(0, 1, &i.to_be_bytes(), Way::In) {
                        i += 1;
                    }
                }
            });
            let mut next = 0u32;
            while next < total {
                lanes.drain(1, |f, _| {
                    assert_eq!(u32::from_be_bytes(f.try_into().unwrap()), next);
                    next += 1;
                });
            }
        });
    }
}

//! A stream of model inputs made ahead of the model, in batches, inline or on a helper thread.
//!
//! A model whose input does not depend on its own state (the router's classified arrivals, the
//! link model's synthetic arrivals) can have that input made by an iterator: [`Feed::new`]
//! wraps it and [`Feed::spawn`] moves it to a thread of a scope. Either way the iterator fills
//! batches of [`BATCH`] items in the same order with the same draws, so the model sees the
//! same sequence and results are byte-identical for any `--threads`. Batching also lets the
//! model look a few items ahead ([`Feed::ahead`]) and prefetch the state they will touch.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Items handed over per batch.
pub const BATCH: usize = 8192;
/// Items ahead of the one taken whose lines are prefetched (the batch itself was written by
/// the other core).
const AHEAD: usize = 8;

enum Maker<G, T> {
    Inline(G),
    Thread {
        rx: Receiver<Vec<T>>,
        /// Emptied batches go back for reuse.
        back: SyncSender<Vec<T>>,
    },
    /// Between [`Feed::spawn`]'s taking the iterator and installing the receiver, and after
    /// [`Feed::stop`].
    Gone,
}

/// See the module documentation.
pub struct Feed<G, T> {
    maker: Maker<G, T>,
    batch: Vec<T>,
    pos: usize,
    /// The helper thread hands the iterator back here when it ends ([`Feed::into_maker`]).
    returned: Option<Receiver<G>>,
}

impl<T: Copy + Send, G: Iterator<Item = T> + Send> Feed<G, T> {
    pub fn new(maker: G) -> Self {
        Feed { maker: Maker::Inline(maker), batch: Vec::new(), pos: 0, returned: None }
    }

    /// Moves the iterator to a thread of `scope`; the thread ends when the iterator does or
    /// when this feed is stopped or dropped. Items already batched stay first.
    pub fn spawn<'s, 'e>(&mut self, scope: &'s std::thread::Scope<'s, 'e>)
    where
        G: 's,
        T: 's,
    {
        let Maker::Inline(mut maker) = std::mem::replace(&mut self.maker, Maker::Gone) else {
            panic!("spawn an inline feed once")
        };
        let (tx, rx) = sync_channel::<Vec<T>>(4);
        let (back, reuse) = sync_channel::<Vec<T>>(8);
        let (give, returned) = sync_channel::<G>(1);
        scope.spawn(move || {
            loop {
                let mut b = reuse.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
                b.clear();
                b.extend(maker.by_ref().take(BATCH));
                let last = b.len() < BATCH;
                // A closed channel means the model stopped early: nothing more is wanted.
                if (!b.is_empty() && tx.send(b).is_err()) || last {
                    break;
                }
            }
            // Room for one: this never blocks.
            let _ = give.send(maker);
        });
        self.maker = Maker::Thread { rx, back };
        self.returned = Some(returned);
    }

    /// Drops the iterator or the receiver (a helper thread then ends at its next batch).
    pub fn stop(&mut self) {
        self.maker = Maker::Gone;
    }

    /// The iterator itself, for what it learnt while making the items (the router's flow
    /// index): at once if it runs inline; from a helper thread once that thread has ended
    /// (this stops the feed and waits for it). `None` after [`Feed::stop`] of an inline feed.
    pub fn into_maker(&mut self) -> Option<G> {
        match std::mem::replace(&mut self.maker, Maker::Gone) {
            Maker::Inline(m) => Some(m),
            _ => self.returned.take()?.recv().ok(),
        }
    }

    /// Refills the batch when it is used up; false at the end of the stream.
    #[inline]
    fn fill(&mut self) -> bool {
        if self.pos < self.batch.len() {
            return true;
        }
        match &mut self.maker {
            Maker::Inline(m) => {
                self.batch.clear();
                self.batch.extend(m.by_ref().take(BATCH));
            }
            Maker::Thread { rx, back } => {
                let Ok(next) = rx.recv() else { return false };
                let old = std::mem::replace(&mut self.batch, next);
                let _ = back.try_send(old);
            }
            Maker::Gone => return false,
        }
        self.pos = 0;
        !self.batch.is_empty()
    }

    /// The next item, without taking it.
    #[inline]
    pub fn peek(&mut self) -> Option<&T> {
        if !self.fill() {
            return None;
        }
        self.batch.get(self.pos)
    }

    /// Takes the next item.
    #[inline]
    pub fn next_item(&mut self) -> Option<T> {
        if !self.fill() {
            return None;
        }
        let a = self.batch[self.pos];
        self.pos += 1;
        npqos_core::hint::prefetch(&self.batch, self.pos + AHEAD);
        npqos_core::hint::prefetch(&self.batch, self.pos + AHEAD + 1);
        Some(a)
    }

    /// The item `k` places after the next one, if it is already in this batch (for prefetch
    /// hints: near a batch's end this says `None` although the stream goes on).
    #[inline]
    pub fn ahead(&self, k: usize) -> Option<&T> {
        self.batch.get(self.pos + k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same items in the same order inline and from a helper thread, across batch
    /// boundaries, and a stopped feed ends its thread.
    #[test]
    fn inline_and_threaded_feeds_give_the_same_sequence() {
        let n = 3 * BATCH as u64 + 17;
        let mut inline = Feed::new(0..n);
        let a: Vec<u64> = std::iter::from_fn(|| inline.next_item()).collect();
        let b: Vec<u64> = std::thread::scope(|s| {
            let mut f = Feed::new(0..n);
            assert_eq!(f.peek(), Some(&0));
            f.spawn(s);
            let mut v = Vec::new();
            while let Some(x) = f.next_item() {
                if let Some(&y) = f.ahead(0) {
                    assert_eq!(y, x + 1, "ahead(0) is the next item");
                }
                v.push(x);
            }
            v
        });
        assert_eq!(a, (0..n).collect::<Vec<_>>());
        assert_eq!(a, b);
        std::thread::scope(|s| {
            let mut f = Feed::new(0u64..);
            f.spawn(s);
            assert_eq!(f.next_item(), Some(0));
            f.stop(); // the endless helper must end, or the scope would never close
        });
    }
}

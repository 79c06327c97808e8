//! Messages: counts, sizes, who sends and receives most, and wakeup latency (a message
//! arriving at a process that is not running, until that process is next scheduled in).

use hdrhistogram::Histogram;

use super::histogram::{add_histogram, histogram, record_ns};
use super::top::TopTable;

/// Message statistics.
pub struct Messages {
    /// `send` events.
    pub sent: u64,
    /// `'receive'` events of a message.
    pub received: u64,
    /// `'receive'` of `timeout`: a `receive ... after` that timed out.
    pub timeouts: u64,
    /// `send_to_non_existing_process` events (not counted in `sent`).
    pub to_dead: u64,
    /// Sizes in words of the messages sent.
    pub sent_words: Histogram<u64>,
    /// Sizes in words of the messages received (used when no send is traced).
    pub received_words: Histogram<u64>,
    /// Messages whose size is a lower bound (the walk was cut short).
    pub size_capped: u64,
    /// Per sender: messages and words.
    pub top_senders: TopTable<u64>,
    /// Per receiver: messages and words.
    pub top_receivers: TopTable<u64>,
    /// Wakeup latency, ns.
    pub wakeup: Histogram<u64>,
    /// Per receiver: wakeups and their total latency.
    pub wakeup_by_receiver: TopTable<u64>,
}

impl Default for Messages {
    fn default() -> Self {
        Messages {
            sent: 0,
            received: 0,
            timeouts: 0,
            to_dead: 0,
            sent_words: histogram(),
            received_words: histogram(),
            size_capped: 0,
            top_senders: TopTable::default(),
            top_receivers: TopTable::default(),
            wakeup: histogram(),
            wakeup_by_receiver: TopTable::default(),
        }
    }
}

impl Messages {
    /// A `send` (or, with `dead`, a send to a process that does not exist) of `words`.
    pub fn send(&mut self, sender: u64, words: u64, capped: bool, dead: bool) {
        if dead {
            self.to_dead += 1;
            return;
        }
        self.sent += 1;
        self.size_capped += u64::from(capped);
        let _ = self.sent_words.record(words);
        self.top_senders.add(sender, words);
    }

    /// A `'receive'` of `words`.
    pub fn receive(&mut self, receiver: u64, words: u64, capped: bool) {
        self.received += 1;
        if self.sent == 0 {
            self.size_capped += u64::from(capped);
        }
        let _ = self.received_words.record(words);
        self.top_receivers.add(receiver, words);
    }

    /// A process that got a message while not running was scheduled in `ns` later.
    pub fn wakeup(&mut self, receiver: u64, ns: u64) {
        record_ns(&mut self.wakeup, ns);
        self.wakeup_by_receiver.add(receiver, ns);
    }

    /// Adds `other`'s figures to these (`Aggregator::merged`). `size_capped` is summed:
    /// exact unless a capped receive came before the first send, which each aggregator
    /// judges by its own sends.
    pub fn merge_from(&mut self, other: &Messages) {
        self.sent += other.sent;
        self.received += other.received;
        self.timeouts += other.timeouts;
        self.to_dead += other.to_dead;
        add_histogram(&mut self.sent_words, &other.sent_words);
        add_histogram(&mut self.received_words, &other.received_words);
        self.size_capped += other.size_capped;
        self.top_senders.merge_from(&other.top_senders);
        self.top_receivers.merge_from(&other.top_receivers);
        add_histogram(&mut self.wakeup, &other.wakeup);
        self.wakeup_by_receiver.merge_from(&other.wakeup_by_receiver);
    }

    /// The size distribution to report: of sends, or of receives when no send was traced.
    pub fn size_words(&self) -> &Histogram<u64> {
        if self.sent > 0 { &self.sent_words } else { &self.received_words }
    }
}

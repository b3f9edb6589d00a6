//! Which finished background tasks keep their output in memory.
//!
//! A task's id stays valid for the daemon's life (`bash_output` on it answers with
//! its final status), but its output tails need not: without a bound, a daemon
//! running many chatty tasks grows by up to 2 x `max_output_bytes` per task,
//! forever. The rule, decided here and only here:
//!
//! * a finished task whose output has been read to its end gives its tails back at
//!   once: nothing in them can be delivered again (T8);
//! * the tails of finished tasks not yet read to their end are kept, oldest finish
//!   first out, while they fit in a byte budget; beyond it the oldest are released
//!   unread, and a later read says that output was dropped (T9).
//!
//! A byte budget rather than a count of tasks, because bytes are what grows: a
//! thousand tasks that print a line cost nothing, a hundred that each fill both
//! tails cost 12.8 MB at the default bound. Running tasks are not counted: their
//! number is bounded by what the machine can run, and each is bounded by E5.
//!
//! [`Retention`] only books task numbers and sizes; the engine frees the memory.

use std::collections::{BTreeMap, HashMap};

/// The book of finished tasks whose tails are still in memory.
#[derive(Debug)]
pub struct Retention {
    budget: usize,
    /// Held tails by finish order (oldest first): task number and bytes.
    held: BTreeMap<u64, (u64, usize)>,
    /// Task number -> its key in `held`, so a task read to its end is dropped from
    /// the book without a scan.
    order_of: HashMap<u64, u64>,
    next_order: u64,
    bytes: usize,
}

impl Retention {
    /// A book keeping at most `budget` bytes of finished tasks' tails.
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            held: BTreeMap::new(),
            order_of: HashMap::new(),
            next_order: 0,
            bytes: 0,
        }
    }

    /// Task `task` finished holding `bytes` of unread-or-not output. Returns the
    /// tasks whose tails are to be released now, oldest first; it may include
    /// `task` itself when it alone is over the budget.
    pub fn finished(&mut self, task: u64, bytes: usize) -> Vec<u64> {
        if bytes == 0 {
            // Nothing to release later: keep the book small.
            return Vec::new();
        }
        let order = self.next_order;
        self.next_order += 1;
        self.held.insert(order, (task, bytes));
        self.order_of.insert(task, order);
        self.bytes += bytes;
        let mut release = Vec::new();
        while self.bytes > self.budget {
            let Some((_, (old, size))) = self.held.pop_first() else {
                break;
            };
            self.order_of.remove(&old);
            self.bytes -= size;
            release.push(old);
        }
        release
    }

    /// Task `task` was read to its end after it finished and its tails are being
    /// released by the caller: it no longer counts against the budget.
    pub fn drained(&mut self, task: u64) {
        if let Some(order) = self.order_of.remove(&task)
            && let Some((_, size)) = self.held.remove(&order)
        {
            self.bytes -= size;
        }
    }

    /// Bytes of finished tasks' tails held now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_budget_nothing_is_released() {
        let mut r = Retention::new(100);
        assert!(r.finished(1, 40).is_empty());
        assert!(r.finished(2, 60).is_empty());
        assert_eq!(r.bytes(), 100);
    }

    #[test]
    fn over_budget_the_oldest_finished_go_first() {
        let mut r = Retention::new(100);
        r.finished(7, 40);
        r.finished(3, 40); // finished later, though started earlier
        r.finished(9, 10);
        // 90 + 60: 7 goes (110 left), then 3 (70 left).
        assert_eq!(r.finished(4, 60), vec![7, 3]);
        assert_eq!(r.bytes(), 70);
    }

    #[test]
    fn a_task_alone_over_the_budget_is_released_at_once() {
        let mut r = Retention::new(100);
        r.finished(1, 10);
        assert_eq!(r.finished(2, 500), vec![1, 2]);
        assert_eq!(r.bytes(), 0);
        assert_eq!(Retention::new(0).finished(5, 1), vec![5]);
    }

    #[test]
    fn drained_tasks_stop_counting_and_are_not_released_again() {
        let mut r = Retention::new(100);
        r.finished(1, 60);
        r.finished(2, 30);
        r.drained(1);
        r.drained(1); // twice, or for a task never booked: no effect
        r.drained(42);
        assert_eq!(r.bytes(), 30);
        assert!(r.finished(3, 70).is_empty());
        assert_eq!(r.finished(4, 1), vec![2]);
    }

    #[test]
    fn tasks_without_output_are_not_booked() {
        let mut r = Retention::new(0);
        assert!(r.finished(1, 0).is_empty());
        assert_eq!(r.bytes(), 0);
    }
}

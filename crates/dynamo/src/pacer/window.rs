//! Units admitted per tick over the last second.

use super::{SLOTS, TICK};
use tokio::time::Instant;

/// Units admitted in each of the last [`SLOTS`] ticks.
#[derive(Debug, Clone, Default)]
pub(super) struct Window {
    slots: [u64; SLOTS],
    /// The tick of the newest slot.
    tick: u64,
}

impl Window {
    /// The tick `now` falls in, counted from `origin`.
    pub fn tick_of(origin: Instant, now: Instant) -> u64 {
        ((now - origin).as_nanos() / TICK.as_nanos()) as u64
    }

    /// Adds `units` admitted in tick `tick`.
    pub fn add(&mut self, tick: u64, units: u64) {
        self.roll(tick);
        self.slots[(tick % SLOTS as u64) as usize] += units;
    }

    /// The units admitted over the last [`SLOTS`] ticks up to `tick`.
    pub fn sum(&mut self, tick: u64) -> u64 {
        self.roll(tick);
        self.slots.iter().sum()
    }

    /// Moves the window to `tick`, emptying the slots of the ticks passed.
    fn roll(&mut self, tick: u64) {
        if tick <= self.tick {
            return;
        }
        for t in (self.tick + 1)..=tick.min(self.tick + SLOTS as u64) {
            self.slots[(t % SLOTS as u64) as usize] = 0;
        }
        self.tick = tick;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_sums_the_last_second_only() {
        let mut w = Window::default();
        w.add(0, 5);
        w.add(3, 7);
        assert_eq!(w.sum(9), 12);
        assert_eq!(w.sum(10), 7, "tick 0 left the window");
        w.add(12, 1);
        assert_eq!(w.sum(12), 8, "ticks 3 to 12");
        assert_eq!(w.sum(13), 1);
        assert_eq!(w.sum(40), 0);
    }
}

//! The progress display on stderr: a redrawn bar on a terminal, plain lines otherwise.
//! Pure: it is told the elapsed time and returns the text to write.

use std::time::Duration;

use crate::limits::PROGRESS_INTERVAL;

/// How a campaign shows progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressStyle {
    /// Nothing (tests, scripts).
    Off,
    /// A bar redrawn in place with `\r` (stderr is a terminal).
    Bar,
    /// A plain line at every tenth of the way (logs, CI).
    Lines,
}

const BAR_WIDTH: u64 = 30;

pub(crate) struct Progress {
    style: ProgressStyle,
    total: u64,
    last_draw: Option<Duration>,
    last_tenth: u64,
}

impl Progress {
    pub(crate) fn new(style: ProgressStyle, total: u64) -> Self {
        Progress {
            style,
            total,
            last_draw: None,
            last_tenth: 0,
        }
    }

    /// Text to write after `done` runs (`failed` of them failing), or `None` to stay quiet.
    pub(crate) fn update(&mut self, done: u64, failed: u64, elapsed: Duration) -> Option<String> {
        if self
            .last_draw
            .is_some_and(|t| elapsed.saturating_sub(t) < PROGRESS_INTERVAL)
        {
            return None;
        }
        match self.style {
            ProgressStyle::Off => None,
            ProgressStyle::Bar => {
                self.last_draw = Some(elapsed);
                Some(format!("\r{}", self.bar(done, failed, elapsed)))
            }
            ProgressStyle::Lines => {
                let tenth = done.saturating_mul(10) / self.total.max(1);
                if tenth <= self.last_tenth || done >= self.total {
                    return None;
                }
                self.last_tenth = tenth;
                self.last_draw = Some(elapsed);
                Some(format!("{}\n", self.line(done, failed, elapsed)))
            }
        }
    }

    /// The final text, always written (except when off).
    pub(crate) fn finish(&mut self, done: u64, failed: u64, elapsed: Duration) -> Option<String> {
        match self.style {
            ProgressStyle::Off => None,
            ProgressStyle::Bar => Some(format!("\r{}\n", self.bar(done, failed, elapsed))),
            ProgressStyle::Lines => Some(format!("{}\n", self.line(done, failed, elapsed))),
        }
    }

    fn bar(&self, done: u64, failed: u64, elapsed: Duration) -> String {
        let filled = (done.saturating_mul(BAR_WIDTH) / self.total.max(1)).min(BAR_WIDTH);
        let mut bar = String::with_capacity(BAR_WIDTH as usize);
        for i in 0..BAR_WIDTH {
            bar.push(if i < filled { '#' } else { '.' });
        }
        format!(
            "[{bar}] {done}/{} runs  {failed} failed  {:.1}s",
            self.total,
            elapsed.as_secs_f64()
        )
    }

    fn line(&self, done: u64, failed: u64, elapsed: Duration) -> String {
        format!(
            "keel-sim: {done}/{} runs, {failed} failed, {:.1}s",
            self.total,
            elapsed.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn bar_redraws_at_most_every_interval() {
        let mut p = Progress::new(ProgressStyle::Bar, 10);
        let first = p.update(1, 0, ms(0)).unwrap();
        assert!(first.starts_with('\r'));
        assert!(first.contains("[###...........................] 1/10 runs  0 failed"));
        assert_eq!(p.update(2, 0, ms(50)), None);
        assert!(p
            .update(3, 1, ms(100))
            .unwrap()
            .contains("3/10 runs  1 failed"));
        let end = p.finish(10, 1, ms(120)).unwrap();
        assert!(end.ends_with('\n'));
        assert!(end.contains(&"#".repeat(30)));
    }

    #[test]
    fn lines_appear_once_per_tenth() {
        let mut p = Progress::new(ProgressStyle::Lines, 100);
        let mut lines = Vec::new();
        for done in 1..=100 {
            if let Some(l) = p.update(done, 0, ms(done * 1000)) {
                lines.push(l);
            }
        }
        assert_eq!(lines.len(), 9);
        assert_eq!(lines[0], "keel-sim: 10/100 runs, 0 failed, 10.0s\n");
        assert_eq!(
            p.finish(100, 0, ms(100_000)).unwrap(),
            "keel-sim: 100/100 runs, 0 failed, 100.0s\n"
        );
    }

    #[test]
    fn off_says_nothing() {
        let mut p = Progress::new(ProgressStyle::Off, 5);
        assert_eq!(p.update(1, 0, ms(500)), None);
        assert_eq!(p.finish(5, 0, ms(900)), None);
    }
}

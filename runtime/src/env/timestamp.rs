//! A UTC instant with millisecond precision, and its one text form.
//!
//! The text form is RFC 3339 with exactly three fractional digits and `Z`:
//! `2026-12-02T13:11:06.123Z`. It is the only form [`Timestamp::parse`] accepts, so a
//! timestamp has exactly one spelling in snapshots and digests.
//!
//! ```
//! use keel::env::Timestamp;
//! let t = Timestamp::parse("2026-12-02T13:11:06.123Z").unwrap();
//! assert_eq!(t.as_millis(), 1_796_217_066_123);
//! assert_eq!(t.to_string(), "2026-12-02T13:11:06.123Z");
//! assert!(Timestamp::parse("2026-12-02T13:11:06Z").is_err());
//! ```

use std::time::{Duration, SystemTime};

use crate::json::{DecodeError, FromJson, Json, ToJson};

const MILLIS_PER_SECOND: u64 = 1_000;
const MILLIS_PER_DAY: u64 = 86_400_000;
const MIN_YEAR: u64 = 1970;
const MAX_YEAR: u64 = 9999;
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`
const TEXT_LEN: usize = 24;

/// Milliseconds since 1970-01-01T00:00:00.000Z (UTC, no leap seconds), at most
/// [`Timestamp::MAX_REPRESENTABLE`]. Every value therefore has a text form.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

/// Why a millisecond count or a text was not a [`Timestamp`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// Not of the shape `YYYY-MM-DDTHH:MM:SS.mmmZ` (the input is not echoed: it may be large).
    #[error("timestamp must have the form YYYY-MM-DDTHH:MM:SS.mmmZ ({reason})")]
    Malformed { reason: &'static str },
    /// The shape is right but a field is out of its range (e.g. month 13, Feb 30, year 1969).
    #[error("timestamp {field} {value} is out of range")]
    FieldOutOfRange { field: &'static str, value: u64 },
    /// More milliseconds than 9999-12-31T23:59:59.999Z.
    #[error("{millis} ms since the epoch is after 9999-12-31T23:59:59.999Z")]
    BeyondMax { millis: u64 },
}

impl Timestamp {
    /// 1970-01-01T00:00:00.000Z.
    pub const UNIX_EPOCH: Timestamp = Timestamp(0);

    /// 9999-12-31T23:59:59.999Z, the last instant with a four-digit year.
    pub const MAX_REPRESENTABLE: Timestamp = Timestamp(253_402_300_799_999);

    /// The instant `millis` ms after the epoch.
    pub fn from_millis(millis: u64) -> Result<Timestamp, TimestampError> {
        if millis > Timestamp::MAX_REPRESENTABLE.0 {
            return Err(TimestampError::BeyondMax { millis });
        }
        Ok(Timestamp(millis))
    }

    /// Like [`Timestamp::from_millis`], clamping to [`Timestamp::MAX_REPRESENTABLE`].
    pub fn saturating_from_millis(millis: u64) -> Timestamp {
        Timestamp(millis.min(Timestamp::MAX_REPRESENTABLE.0))
    }

    /// Converts a system time (truncating to whole milliseconds), clamping to
    /// `[UNIX_EPOCH, MAX_REPRESENTABLE]`. Pure: it does not read any clock.
    pub fn from_system_time(time: SystemTime) -> Timestamp {
        match time.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => Timestamp::saturating_from_millis(
                u64::try_from(since.as_millis()).unwrap_or(u64::MAX),
            ),
            Err(_) => Timestamp::UNIX_EPOCH,
        }
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, or `None` past [`Timestamp::MAX_REPRESENTABLE`].
    pub fn checked_add(self, d: Duration) -> Option<Timestamp> {
        let add = u64::try_from(d.as_millis()).ok()?;
        Timestamp::from_millis(self.0.checked_add(add)?).ok()
    }

    /// `self + d`, clamped to [`Timestamp::MAX_REPRESENTABLE`].
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        let add = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timestamp::saturating_from_millis(self.0.saturating_add(add))
    }

    /// How long after `earlier` this is; zero if it is not after it.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SS.mmmZ` (uppercase `T` and `Z`, years 1970–9999,
    /// no leap second, no offset other than `Z`).
    pub fn parse(text: &str) -> Result<Timestamp, TimestampError> {
        let b = text.as_bytes();
        if b.len() != TEXT_LEN {
            return Err(TimestampError::Malformed { reason: "wrong length" });
        }
        for (index, expected) in
            [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (23, b'Z')]
        {
            if b[index] != expected {
                return Err(TimestampError::Malformed { reason: "wrong separator" });
            }
        }
        let year = digits(&b[0..4])?;
        let month = digits(&b[5..7])?;
        let day = digits(&b[8..10])?;
        let hour = digits(&b[11..13])?;
        let minute = digits(&b[14..16])?;
        let second = digits(&b[17..19])?;
        let milli = digits(&b[20..23])?;

        if !(MIN_YEAR..=MAX_YEAR).contains(&year) {
            return Err(TimestampError::FieldOutOfRange { field: "year", value: year });
        }
        if !(1..=12).contains(&month) {
            return Err(TimestampError::FieldOutOfRange { field: "month", value: month });
        }
        if day < 1 || day > days_in_month(year, month) {
            return Err(TimestampError::FieldOutOfRange { field: "day", value: day });
        }
        if hour > 23 {
            return Err(TimestampError::FieldOutOfRange { field: "hour", value: hour });
        }
        if minute > 59 {
            return Err(TimestampError::FieldOutOfRange { field: "minute", value: minute });
        }
        if second > 59 {
            return Err(TimestampError::FieldOutOfRange { field: "second", value: second });
        }
        let days = days_from_civil(year, month, day);
        let seconds = hour * 3_600 + minute * 60 + second;
        // Year ≤ 9999 keeps this far below u64::MAX and at most MAX_REPRESENTABLE.
        Ok(Timestamp(days * MILLIS_PER_DAY + seconds * MILLIS_PER_SECOND + milli))
    }

    /// The text form, e.g. `2026-12-02T13:11:06.123Z`.
    pub fn to_rfc3339(self) -> String {
        self.to_string()
    }
}

fn digits(field: &[u8]) -> Result<u64, TimestampError> {
    field.iter().try_fold(0u64, |acc, &c| {
        if c.is_ascii_digit() {
            Ok(acc * 10 + u64::from(c - b'0'))
        } else {
            Err(TimestampError::Malformed { reason: "expected a digit" })
        }
    })
}

fn is_leap_year(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's `days_from_civil`, restricted to years ≥ 1970 so everything is unsigned:
// the year is shifted to start in March, making the leap day the last day of the year.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// Inverse of `days_from_civil` (Hinnant's `civil_from_days`): (year, month, day).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (year, month, day) = civil_from_days(self.0 / MILLIS_PER_DAY);
        let in_day = self.0 % MILLIS_PER_DAY;
        let seconds = in_day / MILLIS_PER_SECOND;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            seconds / 3_600,
            seconds / 60 % 60,
            seconds % 60,
            in_day % MILLIS_PER_SECOND
        )
    }
}

impl std::fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Timestamp, TimestampError> {
        Timestamp::parse(s)
    }
}

impl ToJson for Timestamp {
    fn to_json(&self) -> Json {
        Json::String(self.to_string())
    }
}

/// The `Display` text as a JSON string, written without the formatting machinery (every
/// record of every cut carries one; a unit test compares the two).
impl crate::json::WriteJson for Timestamp {
    fn write_json(&self, out: &mut String) {
        let (year, month, day) = civil_from_days(self.0 / MILLIS_PER_DAY);
        let in_day = self.0 % MILLIS_PER_DAY;
        let seconds = in_day / MILLIS_PER_SECOND;
        let mut text = [0u8; 24];
        let fields = [
            (year, 4, b'-'),
            (month, 2, b'-'),
            (day, 2, b'T'),
            (seconds / 3_600, 2, b':'),
            (seconds / 60 % 60, 2, b':'),
            (seconds % 60, 2, b'.'),
            (in_day % MILLIS_PER_SECOND, 3, b'Z'),
        ];
        let mut at = 0;
        for (value, width, separator) in fields {
            let mut v = value;
            for i in (0..width).rev() {
                text[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
            text[at + width] = separator;
            at += width + 1;
        }
        out.push('"');
        out.push_str(std::str::from_utf8(&text[..at]).unwrap_or_default());
        out.push('"');
    }
}

impl FromJson for Timestamp {
    fn from_json(value: &Json) -> Result<Self, DecodeError> {
        let text = value.as_str().ok_or_else(|| DecodeError::wrong_type("string", value))?;
        Timestamp::parse(text).map_err(|e| DecodeError::invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(text: &str) -> Timestamp {
        Timestamp::parse(text).unwrap()
    }

    #[test]
    fn written_json_is_the_display_text() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut millis = vec![0, 1, 999, 1_000, 86_399_999, 86_400_000, 1_700_000_000_000, Timestamp::MAX_REPRESENTABLE.0];
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            millis.push(x % (Timestamp::MAX_REPRESENTABLE.0 + 1));
        }
        for m in millis {
            let t = Timestamp::from_millis(m).unwrap();
            let mut out = String::new();
            crate::json::WriteJson::write_json(&t, &mut out);
            assert_eq!(out, t.to_json().to_canonical_string(), "{m}");
        }
    }

    #[test]
    fn known_instants() {
        for (text, millis) in [
            ("1970-01-01T00:00:00.000Z", 0),
            ("1970-01-01T00:00:00.001Z", 1),
            ("2000-02-29T00:00:00.000Z", 951_782_400_000),
            ("2024-02-29T23:59:59.999Z", 1_709_251_199_999),
            ("2026-12-02T13:11:06.123Z", 1_796_217_066_123),
            ("2100-03-01T00:00:00.000Z", 4_107_542_400_000),
            ("9999-12-31T23:59:59.999Z", 253_402_300_799_999),
        ] {
            assert_eq!(ts(text).as_millis(), millis, "{text}");
            assert_eq!(Timestamp::from_millis(millis).unwrap().to_string(), text);
        }
        assert_eq!(Timestamp::MAX_REPRESENTABLE, ts("9999-12-31T23:59:59.999Z"));
        assert_eq!(Timestamp::UNIX_EPOCH, ts("1970-01-01T00:00:00.000Z"));
    }

    // Independent, obviously-correct day count to check the closed-form conversion.
    fn naive_days(year: u64, month: u64, day: u64) -> u64 {
        let mut days = 0;
        for y in MIN_YEAR..year {
            days += if is_leap_year(y) { 366 } else { 365 };
        }
        for m in 1..month {
            days += days_in_month(year, m);
        }
        days + day - 1
    }

    #[test]
    fn civil_conversion_matches_naive_count_on_month_boundaries() {
        for year in (MIN_YEAR..=2500).chain([2800, 3000, 4000, 9999]) {
            for month in 1..=12 {
                for day in [1, days_in_month(year, month)] {
                    let days = naive_days(year, month, day);
                    assert_eq!(days_from_civil(year, month, day), days, "{year}-{month}-{day}");
                    assert_eq!(civil_from_days(days), (year, month, day));
                }
            }
        }
    }

    #[test]
    fn every_day_round_trips_through_text() {
        let last_day = Timestamp::MAX_REPRESENTABLE.as_millis() / MILLIS_PER_DAY;
        let mut previous = None;
        // Stride keeps the test fast while hitting every day-of-month and month over time.
        for day in (0..=last_day).step_by(37).chain([last_day]) {
            let t = Timestamp::from_millis(day * MILLIS_PER_DAY + 45_296_789).unwrap();
            let text = t.to_string();
            assert_eq!(ts(&text), t, "{text}");
            if let Some(p) = previous {
                assert!(text > p, "text order follows time order: {p} then {text}");
            }
            previous = Some(text);
        }
    }

    #[test]
    fn leap_years() {
        assert!(Timestamp::parse("2000-02-29T00:00:00.000Z").is_ok(), "divisible by 400");
        assert!(Timestamp::parse("2024-02-29T00:00:00.000Z").is_ok(), "divisible by 4");
        assert_eq!(
            Timestamp::parse("1900-02-29T00:00:00.000Z"),
            Err(TimestampError::FieldOutOfRange { field: "year", value: 1900 })
        );
        for not_leap in ["2100-02-29T00:00:00.000Z", "2023-02-29T00:00:00.000Z"] {
            assert_eq!(
                Timestamp::parse(not_leap),
                Err(TimestampError::FieldOutOfRange { field: "day", value: 29 }),
                "{not_leap}"
            );
        }
        assert_eq!(
            ts("2024-03-01T00:00:00.000Z").as_millis() - ts("2024-02-28T00:00:00.000Z").as_millis(),
            2 * MILLIS_PER_DAY
        );
        assert_eq!(
            ts("2100-03-01T00:00:00.000Z").as_millis() - ts("2100-02-28T00:00:00.000Z").as_millis(),
            MILLIS_PER_DAY
        );
    }

    #[test]
    fn rejects_other_shapes() {
        for bad in [
            "",
            "2026-12-02T13:11:06Z",          // no fraction
            "2026-12-02T13:11:06.12Z",       // two digits
            "2026-12-02T13:11:06.1234Z",     // four digits
            "2026-12-02t13:11:06.123Z",      // lowercase t
            "2026-12-02T13:11:06.123z",      // lowercase z
            "2026-12-02 13:11:06.123Z",      // space separator
            "2026-12-02T13:11:06.123+00:00", // offset
            "2026-12-02T13:11:06.123",       // no zone
            "2026/12/02T13:11:06.123Z",
            "2026-12-02T13-11-06.123Z",
            "2026-12-02T13:11:06,123Z",
            "+026-12-02T13:11:06.123Z",
            "2026-1a-02T13:11:06.123Z",
            "2026-12-02T13:11:06.12aZ",
            "2026-12-02T13:11:06.123Z ",
            " 2026-12-02T13:11:06.123Z",
            "２026-12-02T13:11:06.123Z", // non-ASCII digit (also wrong byte length)
        ] {
            assert!(
                matches!(Timestamp::parse(bad), Err(TimestampError::Malformed { .. })),
                "{bad:?} must be malformed, got {:?}",
                Timestamp::parse(bad)
            );
        }
    }

    #[test]
    fn rejects_out_of_range_fields() {
        for (bad, field, value) in [
            ("1969-12-31T23:59:59.999Z", "year", 1969),
            ("0000-01-01T00:00:00.000Z", "year", 0),
            ("2026-00-01T00:00:00.000Z", "month", 0),
            ("2026-13-01T00:00:00.000Z", "month", 13),
            ("2026-01-00T00:00:00.000Z", "day", 0),
            ("2026-01-32T00:00:00.000Z", "day", 32),
            ("2026-04-31T00:00:00.000Z", "day", 31),
            ("2026-01-01T24:00:00.000Z", "hour", 24),
            ("2026-01-01T00:60:00.000Z", "minute", 60),
            ("2026-12-31T23:59:60.000Z", "second", 60), // no leap seconds
        ] {
            assert_eq!(
                Timestamp::parse(bad),
                Err(TimestampError::FieldOutOfRange { field, value }),
                "{bad}"
            );
        }
    }

    #[test]
    fn bounds() {
        let max = Timestamp::MAX_REPRESENTABLE.as_millis();
        assert!(Timestamp::from_millis(max).is_ok());
        assert_eq!(
            Timestamp::from_millis(max + 1),
            Err(TimestampError::BeyondMax { millis: max + 1 })
        );
        assert_eq!(Timestamp::saturating_from_millis(u64::MAX), Timestamp::MAX_REPRESENTABLE);
        let t = ts("2026-01-01T00:00:00.000Z");
        assert_eq!(
            t.checked_add(Duration::from_millis(1500)),
            Some(ts("2026-01-01T00:00:01.500Z"))
        );
        assert_eq!(Timestamp::MAX_REPRESENTABLE.checked_add(Duration::from_millis(1)), None);
        assert_eq!(t.checked_add(Duration::MAX), None);
        assert_eq!(t.saturating_add(Duration::MAX), Timestamp::MAX_REPRESENTABLE);
        assert_eq!(t.saturating_add(Duration::from_micros(999)), t, "sub-millisecond truncates");
        assert_eq!(
            t.saturating_duration_since(Timestamp::UNIX_EPOCH),
            Duration::from_millis(t.as_millis())
        );
        assert_eq!(Timestamp::UNIX_EPOCH.saturating_duration_since(t), Duration::ZERO);
    }

    #[test]
    fn from_system_time_clamps_and_truncates() {
        let epoch = SystemTime::UNIX_EPOCH;
        assert_eq!(Timestamp::from_system_time(epoch), Timestamp::UNIX_EPOCH);
        assert_eq!(
            Timestamp::from_system_time(epoch + Duration::from_micros(1_999)).as_millis(),
            1
        );
        if let Some(before) = epoch.checked_sub(Duration::from_secs(1)) {
            assert_eq!(Timestamp::from_system_time(before), Timestamp::UNIX_EPOCH);
        }
        if let Some(far) = epoch.checked_add(Duration::from_secs(400_000_000_000)) {
            assert_eq!(Timestamp::from_system_time(far), Timestamp::MAX_REPRESENTABLE);
        }
    }

    #[test]
    fn json_is_the_text_form() {
        let t = ts("2026-12-02T13:11:06.123Z");
        assert_eq!(t.to_json(), Json::str("2026-12-02T13:11:06.123Z"));
        assert_eq!(Timestamp::from_json(&t.to_json()), Ok(t));
        assert!(
            Timestamp::from_json(&Json::u64(t.as_millis())).is_err(),
            "numbers are not timestamps"
        );
        assert!(Timestamp::from_json(&Json::Null).is_err());
        assert!(Timestamp::from_json(&Json::str("2026-12-02T13:11:06Z")).is_err());
        assert!(Timestamp::from_json(&Json::str("2026-02-30T00:00:00.000Z")).is_err());
    }

    #[test]
    fn from_str_and_debug() {
        let t: Timestamp = "2026-12-02T13:11:06.123Z".parse().unwrap();
        assert_eq!(format!("{t:?}"), "Timestamp(2026-12-02T13:11:06.123Z)");
        assert_eq!(t.to_rfc3339(), "2026-12-02T13:11:06.123Z");
    }
}

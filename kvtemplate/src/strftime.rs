//! `strftime_now` under clock policy `utc-date`: Python/glibc `strftime` codes over a UTC instant.

/// A broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// Year (proleptic Gregorian).
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    /// 0..=23
    pub hour: u32,
    /// 0..=59
    pub minute: u32,
    /// 0..=59
    pub second: u32,
    /// 0 = Monday .. 6 = Sunday (Python `weekday()`).
    pub weekday: u32,
    /// 1..=366
    pub yday: u32,
}

impl UtcTime {
    /// Breaks down milliseconds since the Unix epoch (floor division, so negative values work).
    pub fn from_unix_ms(ms: i64) -> UtcTime {
        let secs = ms.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let yday = days - days_from_civil(year, 1, 1) + 1;
        UtcTime {
            year,
            month,
            day,
            hour: u32::try_from(sod / 3600).unwrap_or(0),
            minute: u32::try_from(sod % 3600 / 60).unwrap_or(0),
            second: u32::try_from(sod % 60).unwrap_or(0),
            // 1970-01-01 was a Thursday (Python weekday 3).
            weekday: u32::try_from((days + 3).rem_euclid(7)).unwrap_or(0),
            yday: u32::try_from(yday).unwrap_or(1),
        }
    }
}

// Howard Hinnant's civil-date algorithms.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an RFC 3339 timestamp (`2024-07-26T12:34:56Z`, `…56.789+02:00`) into milliseconds
/// since the Unix epoch; `None` when malformed.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = s.get(from..from + len)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T') | Some(b't') | Some(b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = s.get(start..i)?;
        if frac.is_empty() {
            return None;
        }
        let mut ms = String::from(frac.get(..frac.len().min(3))?);
        while ms.len() < 3 {
            ms.push('0');
        }
        millis = ms.parse().ok()?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b.get(i + 3) == Some(&b':') => {
            let m = num(i + 1, 2)? * 60 + num(i + 4, 2)?;
            if sign == b'+' {
                m
            } else {
                -m
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    secs.checked_mul(1000)?.checked_add(millis)
}

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Formats `t` like Python's `datetime.strftime(fmt)` on glibc in the C locale, for the codes
/// chat templates use (`%d %b %Y`, `%-d`, `%B`, `%A`, `%H:%M:%S` …). Unknown codes are copied.
pub fn strftime(t: &UtcTime, fmt: &str) -> String {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut chars = fmt.chars().peekable();
    let day_name = DAYS.get(t.weekday as usize).copied().unwrap_or("");
    let month_name = MONTHS
        .get((t.month as usize).wrapping_sub(1))
        .copied()
        .unwrap_or("");
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut pad = true;
        if chars.peek() == Some(&'-') {
            pad = false;
            chars.next();
        }
        let num = |out: &mut String, v: i64, width: usize| {
            if pad {
                out.push_str(&format!("{v:0width$}"));
            } else {
                out.push_str(&v.to_string());
            }
        };
        let hour12 = match t.hour % 12 {
            0 => 12,
            h => h,
        };
        match chars.next() {
            Some('d') => num(&mut out, t.day.into(), 2),
            Some('e') => out.push_str(&format!("{:>2}", t.day)),
            Some('m') => num(&mut out, t.month.into(), 2),
            Some('Y') => out.push_str(&t.year.to_string()),
            Some('y') => num(&mut out, t.year.rem_euclid(100), 2),
            Some('H') => num(&mut out, t.hour.into(), 2),
            Some('I') => num(&mut out, hour12.into(), 2),
            Some('M') => num(&mut out, t.minute.into(), 2),
            Some('S') => num(&mut out, t.second.into(), 2),
            Some('j') => num(&mut out, t.yday.into(), 3),
            Some('p') => out.push_str(if t.hour < 12 { "AM" } else { "PM" }),
            Some('a') => out.push_str(day_name.get(..3).unwrap_or("")),
            Some('A') => out.push_str(day_name),
            Some('b') | Some('h') => out.push_str(month_name.get(..3).unwrap_or("")),
            Some('B') => out.push_str(month_name),
            Some('w') => out.push_str(&((t.weekday + 1) % 7).to_string()),
            Some('u') => out.push_str(&(t.weekday + 1).to_string()),
            Some('F') => out.push_str(&format!("{}-{:02}-{:02}", t.year, t.month, t.day)),
            Some('T') => out.push_str(&format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second)),
            Some('Z') => out.push_str("UTC"),
            Some('z') => out.push_str("+0000"),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if !pad {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2024-07-26T12:34:56Z"),
            Some(1_721_997_296_000)
        );
        assert_eq!(
            parse_rfc3339("2024-07-26T14:34:56.5+02:00"),
            Some(1_721_997_296_500)
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(parse_rfc3339("2024-07-26"), None);
        assert_eq!(parse_rfc3339("2024-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2024-07-26T12:34:56"), None);
    }

    #[test]
    fn known_dates() {
        // 2024-07-26 12:34:56 UTC, a Friday, day 208.
        let t = UtcTime::from_unix_ms(1_721_997_296_000);
        assert_eq!(strftime(&t, "%d %b %Y"), "26 Jul 2024");
        assert_eq!(
            strftime(&t, "%A %B %-d, %Y %H:%M:%S %j %p %I"),
            "Friday July 26, 2024 12:34:56 208 PM 12"
        );
        let t = UtcTime::from_unix_ms(0);
        assert_eq!(strftime(&t, "%Y-%m-%d %a %y"), "1970-01-01 Thu 70");
        let t = UtcTime::from_unix_ms(-1);
        assert_eq!(strftime(&t, "%F %T"), "1969-12-31 23:59:59");
        let t = UtcTime::from_unix_ms(951_782_400_000); // 2000-02-29
        assert_eq!(strftime(&t, "%d %m %Y %j %%"), "29 02 2000 060 %");
    }
}

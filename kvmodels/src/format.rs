//! The small formatters the page, `kvexact models list` and the installer's lines share.

use kvprofile_core::Api;

use crate::catalog::TupleState;

/// `validated`, `candidate`, `blocked`.
pub fn state_str(s: TupleState) -> &'static str {
    match s {
        TupleState::Validated => "validated",
        TupleState::Candidate => "candidate",
        TupleState::Blocked => "blocked",
    }
}

/// `chat` / `completions`.
pub fn api_str(a: Api) -> &'static str {
    match a {
        Api::Chat => "chat",
        Api::Completions => "completions",
    }
}

/// `yes`/`no` as the page and `--list` print a bool.
pub fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The first 12 characters of a (40-hex, validated) revision.
pub fn rev12(rev: &str) -> &str {
    rev.get(..12).unwrap_or(rev)
}

/// `<n / 1e9>` with one decimal and ` GB`, as the page prints sizes.
pub fn gb(nbytes: u64) -> String {
    format!("{:.1} GB", nbytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_formatters() {
        assert_eq!(rev12("0123456789abcdef"), "0123456789ab");
        assert_eq!(rev12("short"), "short");
        assert_eq!(gb(1_549_000_000), "1.5 GB");
        assert_eq!(gb(0), "0.0 GB");
        assert_eq!(yes_no(true), "yes");
        assert_eq!(state_str(TupleState::Blocked), "blocked");
        assert_eq!(api_str(Api::Completions), "completions");
    }
}

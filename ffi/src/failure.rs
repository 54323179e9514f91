//! [`Failure`]: what a failing entry point reports — its status and the contents of the error
//! object it hands to C — and `hash_failure`, kvhash's errors as failures (for the hasher
//! and the contract modules alike). A leaf: it depends on nothing in the crate but
//! [`crate::status`], so the handle helpers, the panic boundary, the error object and every
//! handle module can build on it without importing one another.

use std::borrow::Cow;

use crate::status::{
    self, kvexact_status, KVEXACT_ERR_HASH_RULE_UNSUPPORTED, KVEXACT_ERR_INVALID_ARGUMENT,
    KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE, KVEXACT_ERR_OVERFLOW, KVEXACT_ERR_PICKLE_TOO_LARGE,
};

/// What a failing entry point reports: the status it returns and the contents of the error
/// object it writes when the caller asked for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The negative status the entry point returns.
    pub status: kvexact_status,
    /// The machine code, stable across releases (`"null_argument"`, `"INSECURE_MODE"` …).
    pub code: Cow<'static, str>,
    /// A message for operators.
    pub message: String,
    /// The file concerned, relative to the registry root, when there is one.
    pub path: Option<String>,
}

impl Failure {
    /// A failure whose code is the status's own name.
    pub fn new(status: kvexact_status, message: impl Into<String>) -> Self {
        Failure {
            status,
            code: Cow::Borrowed(status::name(status)),
            message: message.into(),
            path: None,
        }
    }

    /// A failure with a finer machine code than the status name.
    pub fn with_code(
        status: kvexact_status,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> Self {
        Failure {
            status,
            code: code.into(),
            message: message.into(),
            path: None,
        }
    }

    /// Attaches the registry-relative path of the file concerned.
    pub fn at_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// A required pointer argument named `arg` was NULL.
    pub fn null(arg: &str) -> Self {
        Failure::new(
            status::KVEXACT_ERR_NULL_ARGUMENT,
            format!("argument `{arg}` is NULL"),
        )
    }

    /// The argument named `arg` is out of range; `why` says how.
    pub fn invalid(arg: &str, why: impl std::fmt::Display) -> Self {
        Failure::new(
            status::KVEXACT_ERR_INVALID_ARGUMENT,
            format!("argument `{arg}`: {why}"),
        )
    }

    /// A panic was caught; `payload` is the panic payload, used for the message when it is a
    /// string.
    pub fn panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".to_string());
        Failure::new(
            status::KVEXACT_ERR_PANIC,
            format!("internal error (caught panic): {what}"),
        )
    }
}

/// Maps a kvhash hashing error to a failure, keeping kvhash's message. Each error a caller
/// acts on differently has its own status (the error code is the status name):
///
/// | kvhash error | status |
/// |---|---|
/// | `UnreproducibleNoneHash` | `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE` |
/// | `PickleTooLarge` | `KVEXACT_ERR_PICKLE_TOO_LARGE` |
/// | `RuleNotSupported` | `KVEXACT_ERR_HASH_RULE_UNSUPPORTED` |
/// | `PositionOverflow` | `KVEXACT_ERR_OVERFLOW` |
/// | any other (block size 0, token id out of range, bad extra keys, …) | `KVEXACT_ERR_INVALID_ARGUMENT` |
pub(crate) fn hash_failure(e: kvhash::Error) -> Failure {
    use kvhash::Error as E;
    let status = match &e {
        E::UnreproducibleNoneHash { .. } => KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE,
        E::PickleTooLarge { .. } => KVEXACT_ERR_PICKLE_TOO_LARGE,
        E::RuleNotSupported { .. } => KVEXACT_ERR_HASH_RULE_UNSUPPORTED,
        E::PositionOverflow => KVEXACT_ERR_OVERFLOW,
        _ => KVEXACT_ERR_INVALID_ARGUMENT,
    };
    Failure::new(status, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kvhash_error_keeps_its_message_under_its_status() {
        let cases = [
            (
                kvhash::Error::UnreproducibleNoneHash {
                    algo: "xxhash_cbor",
                    why: "rule B",
                },
                KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE,
            ),
            (
                kvhash::Error::PickleTooLarge { len: 70_000 },
                KVEXACT_ERR_PICKLE_TOO_LARGE,
            ),
            (
                kvhash::Error::RuleNotSupported { what: "look-ahead" },
                KVEXACT_ERR_HASH_RULE_UNSUPPORTED,
            ),
            (kvhash::Error::PositionOverflow, KVEXACT_ERR_OVERFLOW),
            (kvhash::Error::ZeroBlockSize, KVEXACT_ERR_INVALID_ARGUMENT),
        ];
        for (e, want) in cases {
            let f = hash_failure(e.clone());
            assert_eq!(f.status, want, "{e}");
            assert_eq!(f.code, status::name(want));
            assert_eq!(f.message, e.to_string());
        }
    }
}

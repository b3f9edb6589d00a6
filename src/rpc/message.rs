//! The shapes of JSON-RPC messages: classifying an incoming line, and writing the
//! lines we send.
//!
//! Incoming lines are read into an envelope of borrowed raw values, so nothing is
//! copied or re-encoded until we know what the message is. Ids in particular stay
//! raw: the peer's id is echoed byte for byte, whatever integer or string form it
//! used (jsonrpsee itself only accepts unsigned integer ids, which is one reason
//! the connection hands it a request under an id of its own; see `connection`).

use super::error::RpcError;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// What an incoming line turned out to be.
#[derive(Debug)]
pub(crate) enum Incoming<'a> {
    /// A call that wants an answer.
    Request {
        /// The id exactly as the peer wrote it.
        id: &'a RawValue,
        method: String,
        params: Option<&'a RawValue>,
    },
    /// A call that wants no answer.
    Notification {
        method: String,
        params: Option<&'a RawValue>,
    },
    /// An answer to one of our outgoing requests.
    Response {
        id: &'a RawValue,
        outcome: Result<&'a RawValue, &'a RawValue>,
    },
    /// Not acceptable: answer with this error, under `id` (or `null` when the id
    /// could not be read).
    Invalid {
        id: Option<&'a RawValue>,
        error: RpcError,
    },
}

/// The members of a message object we look at, each kept raw.
///
/// `Option<&RawValue>` alone would read a `null` member as absent; the
/// `present` deserializer keeps "absent" (`None`) and "null" (`Some("null")`)
/// apart, which matters for `"id": null` and `"result": null`.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The first byte of a raw JSON value (raw values carry no leading whitespace).
fn first_byte(raw: &RawValue) -> u8 {
    raw.get().as_bytes().first().copied().unwrap_or(b' ')
}

/// JSON-RPC ids are `null`, numbers or strings; anything else cannot be echoed
/// back as an id.
fn is_valid_id(raw: &RawValue) -> bool {
    matches!(first_byte(raw), b'n' | b'"' | b'-' | b'0'..=b'9')
}

/// Reads one line (already known to be UTF-8 and not blank).
pub(crate) fn classify(line: &str) -> Incoming<'_> {
    let invalid = |id, msg: &str| Incoming::Invalid {
        id,
        error: RpcError::invalid_request(msg),
    };
    let raw: &RawValue = match serde_json::from_str(line) {
        Ok(raw) => raw,
        Err(e) => {
            return Incoming::Invalid {
                id: None,
                error: RpcError::parse_error(format!("parse error: {e}")),
            };
        }
    };
    match first_byte(raw) {
        b'{' => {}
        b'[' => return invalid(None, "batches are not supported"),
        _ => return invalid(None, "a message must be a JSON object"),
    }
    let env: Envelope<'_> = match serde_json::from_str(raw.get()) {
        Ok(env) => env,
        // Valid JSON that still fails here has e.g. a duplicate member.
        Err(e) => return invalid(None, &format!("invalid message: {e}")),
    };

    // The id, if it can be echoed. Only requests get their id back: the id of a
    // (malformed) response is one of ours, and echoing it would look to the peer
    // like an answer to a request of its own.
    let readable_id = env.id.filter(|id| is_valid_id(id));
    let reply_id = if env.method.is_some() {
        readable_id
    } else {
        None
    };
    if env.id.is_some() && readable_id.is_none() {
        return invalid(None, "id must be a string, a number or null");
    }
    let version_ok = env
        .jsonrpc
        .and_then(|v| serde_json::from_str::<&str>(v.get()).ok())
        == Some("2.0");
    if !version_ok {
        return invalid(reply_id, r#"jsonrpc must be "2.0""#);
    }

    match (env.method, env.id) {
        (Some(method), id) => {
            let Ok(method) = serde_json::from_str::<String>(method.get()) else {
                return invalid(reply_id, "method must be a string");
            };
            match id {
                Some(id) => Incoming::Request {
                    id,
                    method,
                    params: env.params,
                },
                None => Incoming::Notification {
                    method,
                    params: env.params,
                },
            }
        }
        (None, Some(id)) => match (env.result, env.error) {
            // An error wins if a confused peer sent both.
            (_, Some(error)) => Incoming::Response {
                id,
                outcome: Err(error),
            },
            (Some(result), None) => Incoming::Response {
                id,
                outcome: Ok(result),
            },
            (None, None) => invalid(None, "a message needs a method, a result or an error"),
        },
        (None, None) => invalid(None, "a message needs a method, a result or an error"),
    }
}

/// A request or notification we send (`id` absent for a notification).
#[derive(Serialize)]
struct OutgoingCall<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    method: &'a str,
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    params: &'a serde_json::Value,
}

/// A response we send: exactly one of `result` and `error` is set.
#[derive(Serialize)]
struct OutgoingResponse<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RawValue>,
}

/// An error response we build ourselves.
#[derive(Serialize)]
struct OutgoingError<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    error: &'a RpcError,
}

/// The part of jsonrpsee's response we keep (we put our own id on it).
#[derive(Deserialize)]
struct DispatchedResponse<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// What we hand jsonrpsee: the peer's method and params under a fixed id.
#[derive(Serialize)]
struct DispatchRequest<'a> {
    jsonrpc: &'static str,
    id: u8,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
}

/// A request line for jsonrpsee's `raw_json_request`.
pub(crate) fn dispatch_request(
    method: &str,
    params: Option<&RawValue>,
) -> serde_json::Result<String> {
    serde_json::to_string(&DispatchRequest {
        jsonrpc: "2.0",
        id: 0,
        method,
        params,
    })
}

/// jsonrpsee's response, re-addressed to the peer's original `id`.
pub(crate) fn readdress_response(id: &RawValue, dispatched: &str) -> serde_json::Result<String> {
    let d: DispatchedResponse<'_> = serde_json::from_str(dispatched)?;
    let (result, error) = match (d.result, d.error) {
        (_, Some(error)) => (None, Some(error)),
        (result, None) => (Some(result.unwrap_or(RawValue::NULL)), None),
    };
    serde_json::to_string(&OutgoingResponse {
        jsonrpc: "2.0",
        id,
        result,
        error,
    })
}

/// An error response; `id` None means `null` (the id could not be read).
pub(crate) fn error_response(id: Option<&RawValue>, error: &RpcError) -> String {
    let response = OutgoingError {
        jsonrpc: "2.0",
        id: id.unwrap_or(RawValue::NULL),
        error,
    };
    // Serializing a raw id, an i32, a String and a Value cannot fail; should it
    // ever, the peer still gets an answer rather than silence.
    serde_json::to_string(&response).unwrap_or_else(|_| {
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
            .to_string()
    })
}

/// A request line (`id` Some) or notification line (`id` None) we send. A `null`
/// `params` is left out: JSON-RPC params are an object or an array when present.
pub(crate) fn call(
    id: Option<&str>,
    method: &str,
    params: &serde_json::Value,
) -> serde_json::Result<String> {
    serde_json::to_string(&OutgoingCall {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_absent_members_are_told_apart() {
        match classify(r#" {"jsonrpc":"2.0","id":null,"method":"m"} "#) {
            Incoming::Request { id, method, params } => {
                assert_eq!(id.get(), "null");
                assert_eq!(method, "m");
                assert!(params.is_none());
            }
            other => panic!("{other:?}"),
        }
        match classify(r#"{"jsonrpc":"2.0","method":"m","params":{}}"#) {
            Incoming::Notification { params, .. } => assert_eq!(params.unwrap().get(), "{}"),
            other => panic!("{other:?}"),
        }
        match classify(r#"{"jsonrpc":"2.0","id":"dsh-1","result":null}"#) {
            Incoming::Response { id, outcome } => {
                assert_eq!(id.get(), r#""dsh-1""#);
                assert_eq!(outcome.unwrap().get(), "null");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_responses_never_echo_our_id() {
        for line in [
            r#"{"jsonrpc":"1.0","id":"dsh-1","result":1}"#,
            r#"{"jsonrpc":"2.0","id":"dsh-1"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
        ] {
            match classify(line) {
                Incoming::Invalid { id, error } => {
                    assert!(id.is_none(), "{line}");
                    assert_eq!(error.code, crate::rpc::INVALID_REQUEST);
                }
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn responses_are_readdressed_and_errors_built() {
        let id = RawValue::from_string("-1.5".into()).unwrap();
        let line = readdress_response(&id, r#"{"jsonrpc":"2.0","id":0,"result":null}"#).unwrap();
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":-1.5,"result":null}"#);
        let line = readdress_response(
            &id,
            r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}"#,
        )
        .unwrap();
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":-1.5,"error":{"code":-32601,"message":"Method not found"}}"#
        );
        assert_eq!(
            error_response(None, &RpcError::parse_error("bad")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#
        );
        assert_eq!(
            call(Some("dsh-1"), "m", &serde_json::Value::Null).unwrap(),
            r#"{"jsonrpc":"2.0","id":"dsh-1","method":"m"}"#
        );
    }
}

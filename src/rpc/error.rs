//! The two error types of the connection layer.
//!
//! [`RpcError`] is a JSON-RPC error object as it travels on the wire: handlers
//! return it, the connection layer answers with it, and an outgoing request
//! resolves to it when the peer answers with an error. It converts into
//! jsonrpsee's `ErrorObjectOwned` so that methods registered on an `RpcModule`
//! can return `Result<_, RpcError>` directly.
//!
//! [`Closed`] is the one way sending can fail: the connection has ended. It
//! carries nothing because there is nothing a caller can do but stop.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// JSON-RPC 2.0 "Parse error": the line is not JSON (or not UTF-8).
pub const PARSE_ERROR: i32 = -32700;
/// JSON-RPC 2.0 "Invalid Request": JSON, but not a valid request object.
pub const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC 2.0 "Method not found".
pub const METHOD_NOT_FOUND: i32 = -32601;
/// JSON-RPC 2.0 "Invalid params".
pub const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC 2.0 "Internal error".
pub const INTERNAL_ERROR: i32 = -32603;
/// ACP: the request was cancelled (`$/cancel_request`).
pub const REQUEST_CANCELLED: i32 = -32800;
/// ACP: a resource (e.g. a session) does not exist, or may not be addressed.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// ACP: the request needs credentials the agent does not have (`authenticate` first).
pub const AUTH_REQUIRED: i32 = -32000;

/// A JSON-RPC error object (code, message, optional data) that handlers return.
///
/// The same type describes an error the peer answered to one of our requests,
/// so it deserializes from the wire form as well.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code})")]
pub struct RpcError {
    /// The error code; see the constants in this module for the ones dsh uses.
    pub code: i32,
    /// A short human-readable description, shown to users by some editors.
    pub message: String,
    /// Optional structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    /// An error with the given code and message and no data.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data` attached.
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32700: the message could not be parsed.
    pub fn parse_error(msg: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, msg)
    }

    /// -32600: the message is JSON but not an acceptable request.
    pub fn invalid_request(msg: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, msg)
    }

    /// -32601: nothing handles `method`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    /// -32602: the params do not fit the method.
    pub fn invalid_params(msg: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, msg)
    }

    /// -32603: something went wrong on our side.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, msg)
    }

    /// -32800: the request was cancelled before it completed.
    pub fn cancelled() -> Self {
        Self::new(REQUEST_CANCELLED, "request cancelled")
    }

    /// -32002: the thing named does not exist (or, per ACP, may not be addressed
    /// from this connection; the message must not reveal which).
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self::new(RESOURCE_NOT_FOUND, msg)
    }

    /// -32000: the agent lacks the credentials this request needs; the message says how
    /// to provide them (ACP's auth-required, which clients answer with their login UI).
    pub fn auth_required(msg: impl Into<String>) -> Self {
        Self::new(AUTH_REQUIRED, msg)
    }

    /// What an outgoing request resolves to when the connection ends first.
    pub(crate) fn connection_closed() -> Self {
        Self::internal("connection closed before the peer answered")
    }

    /// What an outgoing request resolves to when `Options::request_timeout` elapses.
    /// An internal error rather than -32800: nobody asked to cancel, the peer was
    /// simply too slow, and callers may want to tell the two apart.
    pub(crate) fn timed_out(method: &str, after: Duration) -> Self {
        Self::internal(format!(
            "the peer did not answer `{method}` within {} ms",
            after.as_millis()
        ))
    }
}

impl From<RpcError> for jsonrpsee::types::ErrorObjectOwned {
    fn from(e: RpcError) -> Self {
        jsonrpsee::types::ErrorObjectOwned::owned(e.code, e.message, e.data)
    }
}

/// The connection has ended; nothing more can be sent on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("connection closed")]
pub struct Closed;

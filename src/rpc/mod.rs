//! The JSON-RPC connection layer: one editor connection, both directions.
//!
//! Being built up: error types, line framing and message shapes.

mod codec;
mod error;
mod message;

pub use error::{
    Closed, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
    REQUEST_CANCELLED, RESOURCE_NOT_FOUND, RpcError,
};

//! HTTP hooks (`url = "https://..."`): the event's input is POSTed as JSON and the
//! response body is the answer, read as a program's stdout would be. TLS and proxies go
//! through the model client's stack (src/llm/http.rs: hyper with rustls). A header's
//! value comes only from the environment variable the config names for it. Anything but
//! a 2xx answer in time fails (and so denies), as a program that exits non-zero does.

use super::protocol::Reply;
use crate::config::ExternalHookConfig;
use crate::llm::http::{self, Client};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Uri;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue, PROXY_AUTHORIZATION};
use std::time::Duration;

/// The most of an answer read; an answer is a short JSON object.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// One HTTP hook's endpoint and client.
pub struct HttpHook {
    url: Uri,
    client: Client,
    proxy_auth: Option<HeaderValue>,
    /// (header, the environment variable its value is read from), read at each call.
    headers: Vec<(HeaderName, String)>,
}

impl HttpHook {
    /// The hook `config` describes (its `url` and `headers`).
    pub fn new(config: &ExternalHookConfig) -> Result<Self, String> {
        let url: Uri = config
            .url
            .as_deref()
            .unwrap_or_default()
            .parse()
            .map_err(|e| format!("the url is not a URL: {e}"))?;
        let headers = config
            .headers
            .iter()
            .map(|(name, var)| {
                HeaderName::try_from(name.as_str())
                    .map(|h| (h, var.clone()))
                    .map_err(|_| format!("{name:?} is not a header name"))
            })
            .collect::<Result<_, _>>()?;
        let connect = Duration::from_millis(config.timeout_ms);
        let (client, proxy_auth) = http::client(&url, connect, |name| std::env::var(name).ok())?;
        Ok(Self {
            url,
            client,
            proxy_auth,
            headers,
        })
    }

    /// POSTs `input` and reads the answer within `timeout`; `Err` says what went wrong.
    pub async fn call(&self, input: Vec<u8>, timeout: Duration) -> Result<Reply, String> {
        let mut post =
            hyper::Request::post(self.url.clone()).header(CONTENT_TYPE, "application/json");
        for (header, var) in &self.headers {
            let value = std::env::var(var).map_err(|_| {
                format!("header {header}: the environment variable {var} is not set")
            })?;
            let mut value = HeaderValue::try_from(value)
                .map_err(|_| format!("header {header}: {var} holds no valid header value"))?;
            value.set_sensitive(true);
            post = post.header(header, value);
        }
        if let Some(auth) = &self.proxy_auth {
            post = post.header(PROXY_AUTHORIZATION, auth.clone());
        }
        let request = post
            .body(Full::new(Bytes::from(input)))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let exchange = async {
            let answer = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("cannot reach {}: {}", self.url, http::error_text(&e)))?;
            let status = answer.status();
            let body = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| {
                    format!("the answer broke off or is over {MAX_ANSWER_BYTES} bytes: {e}")
                })?
                .to_bytes();
            if !status.is_success() {
                let shown: String = String::from_utf8_lossy(&body).chars().take(200).collect();
                return Err(format!("answered HTTP {}: {shown}", status.as_u16()));
            }
            Ok(Reply::Output(body.to_vec()))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("did not answer within {}ms", timeout.as_millis())))
    }
}

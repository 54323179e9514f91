//! The hub's HTTP client for `kvexact models install`: one blocking GET per
//! [`kvmodels::hub::Fetch::get`] (resume, retries and status handling are the
//! library's). HTTPS with rustls; ureq never forwards `Authorization` on a redirect to another
//! host (e.g. the hub's CDN).

use std::time::Duration;

use kvmodels::hub::{Fetch, FetchResponse};

/// A ureq agent: 30 s connect, 120 s to the response head, up to 10 redirects, every status
/// returned as an answer.
pub struct UreqFetch {
    agent: ureq::Agent,
}

impl UreqFetch {
    /// The agent the installer uses.
    pub fn new() -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(120)))
            .max_redirects(10)
            .user_agent(concat!("kvexact/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        UreqFetch { agent }
    }
}

impl Fetch for UreqFetch {
    fn get(
        &self,
        url: &str,
        range_from: Option<u64>,
        token: Option<&str>,
    ) -> Result<FetchResponse, String> {
        let mut req = self.agent.get(url);
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        if let Some(start) = range_from {
            req = req.header("Range", &format!("bytes={start}-"));
        }
        let resp = req.call().map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let content_range = resp
            .headers()
            .get("content-range")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok(FetchResponse {
            status,
            content_range,
            body: Box::new(resp.into_body().into_reader()),
        })
    }
}

//! A remote-store repository's transfer rates, as OpenSearch names its repository settings:
//! `max_remote_upload_bytes_per_sec` paces this node's uploads of segment files and
//! `max_remote_download_bytes_per_sec` its downloads (replicas' copy rounds, new copies'
//! hydration, `_remotestore/_restore`). Both are unlimited by default (`0`). Translog uploads
//! are never paced: every acknowledgment waits for one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::error::{ApiError, ApiResult};
use crate::recovery::throttle::{parse_rate, RateLimiter};
use crate::transfer::ByteStream;

pub const MAX_UPLOAD: &str = "max_remote_upload_bytes_per_sec";
pub const MAX_DOWNLOAD: &str = "max_remote_download_bytes_per_sec";

/// One direction's rate (`None`: unlimited) and the limiter every transfer of this node in
/// that direction shares.
#[derive(Default)]
pub struct Rate {
    pub bytes_per_sec: Option<u64>,
    limiter: RateLimiter,
}

impl Rate {
    /// How long to wait before moving `bytes`.
    pub fn delay(&self, bytes: u64) -> Duration {
        self.limiter.delay(bytes, self.bytes_per_sec)
    }
}

#[derive(Default)]
pub struct RemoteRates {
    pub upload: Rate,
    pub download: Arc<Rate>,
}

impl RemoteRates {
    /// The rates of repository `name`, taken out of its node attributes (`prefix<name>.settings.*`).
    pub fn take(
        prefix: &str,
        name: &str,
        attributes: &mut BTreeMap<String, String>,
    ) -> ApiResult<RemoteRates> {
        let mut rate = |setting: &str| -> ApiResult<Rate> {
            let key = format!("{prefix}{name}.settings.{setting}");
            let bytes_per_sec = match attributes.remove(&key) {
                None => None,
                Some(text) => parse_rate(&text).map_err(|_| {
                    ApiError::bad_request(format!(
                        "failed to parse [{key}] with value [{text}]: give a byte size per second such as [100mb], or [0] for no limit"
                    ))
                })?,
            };
            Ok(Rate {
                bytes_per_sec,
                limiter: RateLimiter::default(),
            })
        };
        Ok(RemoteRates {
            upload: rate(MAX_UPLOAD)?,
            download: Arc::new(rate(MAX_DOWNLOAD)?),
        })
    }
}

/// `stream`, each chunk let through at `rate`.
pub fn paced(stream: ByteStream, rate: Arc<Rate>) -> ByteStream {
    stream
        .then(move |chunk| {
            let wait = chunk
                .as_ref()
                .map_or(Duration::ZERO, |c| rate.delay(c.len() as u64));
            async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                chunk
            }
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_taken_out_of_the_attributes_and_default_to_unlimited() {
        let prefix = "node.attr.remote_store.repository.";
        let mut attributes: BTreeMap<String, String> = [
            ("node.attr.remote_store.repository.r1.type", "fs"),
            (
                "node.attr.remote_store.repository.r1.settings.location",
                "/x",
            ),
            (
                "node.attr.remote_store.repository.r1.settings.max_remote_download_bytes_per_sec",
                "10mb",
            ),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        let rates = RemoteRates::take(prefix, "r1", &mut attributes).unwrap();
        assert_eq!(rates.download.bytes_per_sec, Some(10 << 20));
        assert_eq!(rates.upload.bytes_per_sec, None);
        assert_eq!(attributes.len(), 2, "{attributes:?}");
        attributes.insert(format!("{prefix}r1.settings.{MAX_UPLOAD}"), "fast".into());
        let error = RemoteRates::take(prefix, "r1", &mut attributes)
            .err()
            .unwrap();
        assert!(error.reason.contains(MAX_UPLOAD), "{}", error.reason);
    }
}

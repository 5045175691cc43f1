//! A remote-store repository's transfer rates, as OpenSearch names its repository settings:
//! `max_remote_upload_bytes_per_sec` paces this node's uploads of segment files and
//! `max_remote_download_bytes_per_sec` its downloads (replicas' copy rounds, new copies'
//! hydration, `_remotestore/_restore`). Both are unlimited by default (`0`). Translog uploads
//! are never paced: every acknowledgment waits for one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::error::ApiResult;
use crate::recovery::throttle::Rate;
use crate::transfer::ByteStream;

pub const MAX_UPLOAD: &str = "max_remote_upload_bytes_per_sec";
pub const MAX_DOWNLOAD: &str = "max_remote_download_bytes_per_sec";

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
        let mut rate = |setting: &str| {
            let key = format!("{prefix}{name}.settings.{setting}");
            Rate::take(name, attributes, &key, None)
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

//! Fetching URL attachments for providers that cannot
//! (`[providers.NAME] fetch_urls = false`): once per run, before any model
//! is called, under the rules of provider calls — https only, redirects
//! within one origin (at most 5), the extra CAs of `[tls] ca_files` — and
//! the attachment limits: a size cut off while streaming (never read whole
//! and then checked), counted against the run's total, a timeout. The
//! type comes from the bytes (`attach::sniff`). A host that resolves to an
//! address inside a network (loopback, private, link-local, unique-local…)
//! is refused unless `[limits] fetch_private_urls = true`: checked by the
//! client's own resolver, so every redirect's target is held to it too,
//! and for IP literals before anything is sent — a shared chorus must not
//! be usable to reach the services beside it.
//!
//! The same rule holds for URLs chorus passes on: a provider inside a
//! network (a company's model server on a private or loopback address)
//! that fetches URL attachments itself would fetch a tenant's
//! `https://10.0.0.5/…` from beside it, so such a URL is refused before
//! any model is asked ([`Urls::forwarded`]). A host *name* is resolved by
//! that provider, not here: `fetch_urls = false` on it puts names under
//! the rule too (`chorus check` says so).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use super::http::{host_port, same_origin_redirects, trusting};
use crate::attach::{self, Attachments, Body};
use crate::config::{ConfigError, Loaded};
use crate::text::show_bytes;

/// The longest one fetch may take, connecting and reading included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The key that lets chorus fetch from addresses inside a network.
pub const PRIVATE_KEY: &str = "limits.fetch_private_urls";

/// Whom URL attachments are fetched for, and how.
pub(super) struct Urls {
    /// Built only when some provider needs it: a client (and its TLS
    /// roots) is milliseconds of every start otherwise.
    fetcher: Option<Fetcher>,
    /// `providers.NAME.fetch_urls` of those set to `false`.
    keys: Vec<String>,
    /// Providers inside a network that fetch URLs themselves, with where
    /// they are, when addresses inside a network are not to be fetched
    /// (`limits.fetch_private_urls = false`).
    inside: Vec<(String, String)>,
}

impl Urls {
    pub(super) fn new(
        loaded: &Loaded,
        roots: &[reqwest::Certificate],
    ) -> Result<Self, ConfigError> {
        let keys: Vec<String> = loaded
            .config
            .providers
            .iter()
            .filter(|(_, p)| !p.fetch_urls)
            .map(|(name, _)| format!("providers.{name}.fetch_urls"))
            .collect();
        let fetcher = if keys.is_empty() {
            None
        } else {
            let fetcher =
                Fetcher::new(roots, loaded.config.limits.fetch_private_urls).map_err(|e| {
                    loaded.error(
                        "tls.ca_files",
                        format!("cannot build the HTTP client for URL attachments: {e}"),
                    )
                })?;
            Some(fetcher)
        };
        let inside = if loaded.config.limits.fetch_private_urls {
            Vec::new()
        } else {
            loaded
                .config
                .providers
                .iter()
                .filter(|(_, p)| p.fetch_urls)
                .filter_map(|(name, p)| {
                    let why = inside_host(&p.base_url)?;
                    Some((name.clone(), format!("{} is {why}", host_port(&p.base_url))))
                })
                .collect()
        };
        Ok(Self {
            fetcher,
            keys,
            inside,
        })
    }

    /// Refuses a URL in `attachments` that a provider inside a network
    /// would fetch from beside itself: one whose host is an address inside
    /// a network (or `localhost`), when such a provider fetches URLs.
    fn forwarded(&self, attachments: &Attachments) -> Result<(), String> {
        let Some((provider, where_)) = self.inside.first() else {
            return Ok(());
        };
        for a in attachments.iter() {
            let Body::Url(url) = &a.body else { continue };
            let Ok(parsed) = Url::parse(url) else {
                continue;
            };
            if let Some(why) = inside_host(&parsed) {
                return Err(format!(
                    "attachment {} ({}): {} is {why}, inside a network, and provider `{provider}` ({where_}) would fetch it from beside itself: refused, so that a shared server cannot be made to reach the services beside its providers; send the file's bytes, or set {PRIVATE_KEY} = true to allow it",
                    a.id,
                    a.name,
                    host_port(&parsed)
                ));
            }
        }
        Ok(())
    }

    /// Each provider inside a network that fetches URL attachments itself,
    /// and where it is (for `chorus check`).
    pub(super) fn inside(&self) -> &[(String, String)] {
        &self.inside
    }
}

/// What kind of address inside a network `url`'s host is, if it is one:
/// an IP literal in such a range, or `localhost` (and its subdomains).
fn inside_host(url: &Url) -> Option<&'static str> {
    match url.host()? {
        Host::Ipv4(ip) => inside(IpAddr::V4(ip)),
        Host::Ipv6(ip) => inside(IpAddr::V6(ip)),
        Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            (name == "localhost" || name.ends_with(".localhost")).then_some("a loopback name")
        }
    }
}

impl super::Llm {
    /// `attachments` with each URL fetched into bytes, once, when a
    /// provider cannot fetch URLs itself (`fetch_urls = false`; then every
    /// model of the run gets the bytes), with notes saying so; as they
    /// are otherwise. `Err` names the attachment that cannot be fetched.
    pub async fn fetch_urls(
        &self,
        attachments: Attachments,
        limits: &attach::Limits,
    ) -> Result<(Attachments, Vec<String>), String> {
        let by_url = attachments.iter().any(|a| matches!(a.body, Body::Url(_)));
        let Some(fetcher) = self.urls.fetcher.as_ref().filter(|_| by_url) else {
            // Passed on as URLs: held to the rule where they are fetched.
            self.urls.forwarded(&attachments)?;
            return Ok((attachments, Vec::new()));
        };
        let why = format!("{} = false", self.urls.keys.join(", "));
        fetcher.fetch_all(attachments, limits, &why).await
    }
}

impl super::Llm {
    /// Each provider inside a network that fetches URL attachments itself
    /// while tenants' URLs to addresses inside a network are refused, and
    /// where it is.
    pub fn providers_inside(&self) -> &[(String, String)] {
        self.urls.inside()
    }
}

/// The client URL attachments are fetched with.
pub struct Fetcher {
    client: reqwest::Client,
    private: bool,
}

impl Fetcher {
    /// `roots`: trusted besides the built-in ones; `private`: whether
    /// addresses inside a network may be fetched from.
    pub fn new(roots: &[reqwest::Certificate], private: bool) -> reqwest::Result<Self> {
        let builder = trusting(reqwest::Client::builder(), roots)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(FETCH_TIMEOUT)
            .redirect(same_origin_redirects())
            .https_only(true)
            .user_agent(concat!("chorus/", env!("CARGO_PKG_VERSION")));
        let builder = if private {
            builder
        } else {
            // Through a proxy (HTTPS_PROXY…) the proxy resolves the name and
            // the check below never sees the address: not used here.
            builder.dns_resolver(Arc::new(PublicOnly)).no_proxy()
        };
        Ok(Self {
            client: builder.build()?,
            private,
        })
    }

    /// `all` with each URL attachment replaced by its bytes, fetched in
    /// order and held to `limits`; the notes say what was fetched and
    /// `why` (who cannot fetch URLs). `Err` names the attachment and what
    /// went wrong.
    pub async fn fetch_all(
        &self,
        all: Attachments,
        limits: &attach::Limits,
        why: &str,
    ) -> Result<(Attachments, Vec<String>), String> {
        let mut total: usize = all.iter().map(|a| a.bytes).sum();
        let mut list = Vec::with_capacity(all.len());
        let mut notes = Vec::new();
        for a in all.iter() {
            let Body::Url(url) = &a.body else {
                list.push(a.clone());
                continue;
            };
            let context = |e: String| format!("attachment {} ({}): {e}", a.id, a.name);
            let left = limits.max_attachments_bytes.saturating_sub(total);
            let (max, key) = if left < limits.max_attachment_bytes {
                (
                    left,
                    "limits.max_attachments_bytes, with the run's other attachments",
                )
            } else {
                (limits.max_attachment_bytes, "limits.max_attachment_bytes")
            };
            let (bytes, from) = self.get(url, max, key).await.map_err(context)?;
            let fetched = attach::accept(a.id, bytes, Some(a.name.clone())).map_err(context)?;
            total += fetched.bytes;
            notes.push(format!(
                "Attachment {} was fetched by chorus from {from} ({why}); the models got its bytes.",
                fetched.label()
            ));
            list.push(fetched);
        }
        Ok((Attachments::new(list), notes))
    }

    /// The body at `url`, at most `max` bytes (`key` names the limit), and
    /// the host it came from.
    async fn get(&self, url: &str, max: usize, key: &str) -> Result<(Vec<u8>, String), String> {
        let url = Url::parse(url).map_err(|e| format!("`{url}` is not a URL ({e})"))?;
        let from = host_port(&url);
        if url.scheme() != "https" {
            return Err(format!(
                "`{from}` is not an https URL; chorus fetches https only"
            ));
        }
        if !self.private {
            let literal = match url.host() {
                Some(Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
                Some(Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
                _ => None,
            };
            if let Some(why) = literal.and_then(inside) {
                return Err(refused(&from, literal.map(|ip| ip.to_string()), why));
            }
        }
        let too_big = |size: String| {
            format!(
                "{from} sent {size}, over the limit of {} ({key})",
                show_bytes(max as u64)
            )
        };
        let mut response = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| failed(&from, &e))?;
        let status = response.status();
        if status.is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| response.url().join(l).ok());
            let to = to.map_or_else(
                || "an unreadable address".to_owned(),
                |u| format!("{}://{}", u.scheme(), host_port(&u)),
            );
            return Err(format!(
                "{from} redirects to {to}: chorus follows a URL's redirects within its origin (https, the same host and port) only, as for provider calls; give the final URL"
            ));
        }
        if !status.is_success() {
            return Err(format!("{from} answered HTTP {status}"));
        }
        if let Some(length) = response.content_length()
            && length > max as u64
        {
            return Err(too_big(show_bytes(length)));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| failed(&from, &e))? {
            if bytes.len() + chunk.len() > max {
                return Err(too_big(format!("more than {}", show_bytes(max as u64))));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((bytes, from))
    }
}

/// Why fetching from `from` failed, with the causes reqwest wraps (the
/// resolver's refusal, a certificate chorus does not trust).
fn failed(from: &str, error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!("{from} did not answer within {}s", FETCH_TIMEOUT.as_secs());
    }
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !causes.iter().any(|c: &String| c.contains(&text)) {
            causes.push(text);
        }
        source = std::error::Error::source(cause);
    }
    if let Some(refusal) = causes.iter().find(|c| c.contains(PRIVATE_KEY)) {
        return refusal.clone();
    }
    let mut message = format!("cannot fetch from {from}: {}", causes.join(": "));
    if causes.iter().any(|c| c.contains("certificate")) {
        message.push_str(
            "; if the server's certificate comes from a private CA (or a TLS-inspecting proxy), add its CA's PEM file to [tls] ca_files",
        );
    }
    message
}

fn refused(from: &str, address: Option<String>, why: &str) -> String {
    let address = address.map(|a| format!(" ({a})")).unwrap_or_default();
    format!(
        "{from}{address} is {why}, inside a network: chorus does not fetch from such addresses, so that a shared server cannot be made to reach the services beside it; set {PRIVATE_KEY} = true to allow it"
    )
}

/// What kind of address inside a network `ip` is, if it is one.
fn inside(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_private() {
                Some("a private address")
            } else if v4.is_link_local() {
                Some("a link-local address")
            } else if a == 100 && (64..128).contains(&b) {
                Some("a shared (carrier-grade NAT) address")
            } else if a == 198 && (b == 18 || b == 19) {
                Some("a benchmarking network's address")
            } else if v4.is_unspecified()
                || v4.is_broadcast()
                || a == 0
                || v4.is_multicast()
                || a >= 240
            {
                Some("not a host's address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return inside(IpAddr::V4(v4));
            }
            let s = v6.segments();
            let embedded =
                |hi: u16, lo: u16| std::net::Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
            // Addresses that carry an IPv4 address a gateway or the stack
            // reaches: NAT64 (64:ff9b::/96), 6to4 (2002::/16) and the
            // deprecated IPv4-compatible ::a.b.c.d.
            let carried = if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
                || (s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified())
            {
                Some(embedded(s[6], s[7]))
            } else if s[0] == 0x2002 {
                Some(embedded(s[1], s[2]))
            } else {
                None
            };
            if let Some(v4) = carried
                && let Some(why) = inside(IpAddr::V4(v4))
            {
                return Some(why);
            }
            let first = s[0];
            if v6.is_loopback() {
                Some("a loopback address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("a unique-local address")
            } else if first & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_unspecified() || v6.is_multicast() {
                Some("not a host's address")
            } else {
                None
            }
        }
    }
}

/// Resolves names as the system does, and refuses any whose addresses
/// include one inside a network.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some((ip, why)) = addrs
                .iter()
                .find_map(|a| inside(a.ip()).map(|why| (a.ip(), why)))
            {
                return Err(refused(&host, Some(ip.to_string()), why).into());
            }
            Ok::<Addrs, Box<dyn std::error::Error + Send + Sync>>(Box::new(addrs.into_iter()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_a_host_inside_a_network_by_its_literal_or_as_localhost() {
        let kind = |url: &str| inside_host(&Url::parse(url).unwrap());
        assert_eq!(
            kind("https://169.254.169.254/x"),
            Some("a link-local address")
        );
        assert_eq!(kind("https://[::1]:8443/x"), Some("a loopback address"));
        assert_eq!(kind("https://LocalHost./x"), Some("a loopback name"));
        assert_eq!(kind("https://api.localhost/x"), Some("a loopback name"));
        assert_eq!(kind("https://example.com/x"), None);
        assert_eq!(kind("https://8.8.8.8/x"), None);
    }

    #[test]
    fn addresses_inside_a_network_are_named() {
        let kind = |ip: &str| inside(ip.parse().unwrap());
        assert_eq!(kind("127.0.0.1"), Some("a loopback address"));
        assert_eq!(kind("10.1.2.3"), Some("a private address"));
        assert_eq!(kind("192.168.0.1"), Some("a private address"));
        assert_eq!(kind("172.16.0.1"), Some("a private address"));
        assert_eq!(kind("169.254.169.254"), Some("a link-local address"));
        assert_eq!(
            kind("100.64.0.1"),
            Some("a shared (carrier-grade NAT) address")
        );
        assert_eq!(kind("0.0.0.0"), Some("not a host's address"));
        assert_eq!(kind("::1"), Some("a loopback address"));
        assert_eq!(kind("fd00::1"), Some("a unique-local address"));
        assert_eq!(kind("fe80::1"), Some("a link-local address"));
        assert_eq!(kind("::ffff:10.0.0.1"), Some("a private address"));
        assert_eq!(kind("93.184.215.14"), None);
        assert_eq!(kind("2606:4700::1111"), None);
        // IPv6 that carries a private IPv4, and the ranges no host has.
        assert_eq!(kind("64:ff9b::10.0.0.1"), Some("a private address"));
        assert_eq!(
            kind("64:ff9b::169.254.169.254"),
            Some("a link-local address")
        );
        assert_eq!(kind("2002:a00:1::"), Some("a private address"));
        assert_eq!(kind("::10.0.0.1"), Some("a private address"));
        assert_eq!(kind("::127.0.0.1"), Some("a loopback address"));
        assert_eq!(kind("198.18.0.1"), Some("a benchmarking network's address"));
        assert_eq!(kind("240.0.0.1"), Some("not a host's address"));
        assert_eq!(
            kind("64:ff9b::93.184.215.14"),
            None,
            "a public one stays public"
        );
    }

    #[tokio::test]
    async fn an_ip_literal_inside_a_network_is_refused_before_anything_is_sent() {
        let fetcher = Fetcher::new(&[], false).unwrap();
        let err = fetcher
            .get("https://169.254.169.254/latest/meta-data", 100, "k")
            .await
            .unwrap_err();
        assert!(
            err.contains("a link-local address") && err.contains(PRIVATE_KEY),
            "{err}"
        );
    }
}

//! What `serve --http` is asked to do, checked before anything listens:
//! the address (`127.0.0.1:8080`, `0.0.0.0:8080`, `chorus.lan:8080`, or a
//! bare port for loopback), the tokens (`CHORUS_TOKEN` and each
//! `[[http.clients]]` entry's; at least one is required anywhere but
//! loopback: whoever reaches the port would spend the API keys' credit),
//! and the Host names and browser origins accepted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use super::access::{Access, Hosts, Origins};
use super::clients::Clients;
use crate::client::Client;
use crate::config::HttpClient;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("`--http {given}`: {reason}")]
    Address { given: String, reason: String },
    #[error(
        "refusing to serve on {addr} without a token: anyone who can reach it could run pipelines on your API keys. \
         Give each person a token in [[http.clients]], or set CHORUS_TOKEN to a long random secret (e.g. `export CHORUS_TOKEN=$(openssl rand -hex 32)`) and give it \
         to your clients as `Authorization: Bearer <token>`; or listen on 127.0.0.1 only."
    )]
    Unprotected { addr: SocketAddr },
    #[error("{0}")]
    Token(String),
    #[error("--allow-host {0}")]
    Host(String),
    #[error("--allow-origin {0}")]
    Origin(String),
}

/// A checked `serve --http` setup.
#[derive(Debug)]
pub struct Options {
    pub addr: SocketAddr,
    access: Arc<Access>,
}

impl Options {
    /// `listen` as given to `--http`; `token` from `CHORUS_TOKEN`.
    pub fn new(
        listen: &str,
        token: Option<&str>,
        allow_hosts: &[String],
        allow_origins: &[String],
    ) -> Result<Self, SetupError> {
        Self::with_clients(listen, token, &[], allow_hosts, allow_origins)
    }

    /// As `new`, with the clients of `[[http.clients]]` (their `token_env`
    /// read from the environment now).
    pub fn with_clients(
        listen: &str,
        token: Option<&str>,
        clients: &[HttpClient],
        allow_hosts: &[String],
        allow_origins: &[String],
    ) -> Result<Self, SetupError> {
        let (addr, name) = parse_listen(listen).map_err(|reason| SetupError::Address {
            given: listen.to_owned(),
            reason,
        })?;
        let clients = Clients::new(clients, token, |var| std::env::var(var).ok())
            .map_err(SetupError::Token)?;
        if !clients.any() && !addr.ip().is_loopback() {
            return Err(SetupError::Unprotected { addr });
        }
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".into(), "::1".into()];
        if addr.ip().is_unspecified() {
            // Every interface: the machine's own name is one clients use.
            names.extend(machine_name());
        } else {
            names.push(name);
        }
        let hosts = Hosts::new(names.iter().chain(allow_hosts).map(String::as_str))
            .map_err(SetupError::Host)?;
        if hosts.any() && !clients.any() {
            // Any Host is what a DNS-rebinding page sends: without a token
            // it would get the local user's viewer and runs.
            return Err(SetupError::Host(
                "`*` accepts any Host, and this server has no token: a web page could reach it by DNS rebinding and act as you. \
                 Set CHORUS_TOKEN (or [[http.clients]]) to allow any Host, or name the hosts clients use (`--allow-host chorus.internal`)."
                    .into(),
            ));
        }
        let origins =
            Origins::new(allow_origins.iter().map(String::as_str)).map_err(SetupError::Origin)?;
        Ok(Self {
            addr,
            access: Arc::new(Access {
                clients,
                hosts,
                origins,
                open: Client::local(),
            }),
        })
    }

    /// Who may use the server: the MCP routes and the run viewer alike.
    pub fn access(&self) -> Arc<Access> {
        self.access.clone()
    }

    pub(super) fn origins(&self) -> &[String] {
        self.access.origins.list()
    }

    /// Who may use the server, for the startup message.
    pub fn describe(&self) -> String {
        let clients;
        let who = if self.access.needs_token() {
            clients = format!(
                "requests need `Authorization: Bearer <token>` (clients: {})",
                self.access.clients.describe()
            );
            clients.as_str()
        } else {
            "no CHORUS_TOKEN: any program on this machine may use it"
        };
        let origins = match self.origins() {
            [] => "none (--allow-origin adds one)".to_owned(),
            list => list.join(", "),
        };
        format!(
            "{who}; Host names accepted: {} (--allow-host adds one); browser origins: {origins}",
            self.access.hosts.describe()
        )
    }
}

/// The address to bind, and the host name it was given as.
fn parse_listen(text: &str) -> Result<(SocketAddr, String), String> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        return Ok((SocketAddr::new(ip, port), ip.to_string()));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok((addr, addr.ip().to_string()));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err("expected ADDRESS:PORT, e.g. 127.0.0.1:8080 (this machine only) or 0.0.0.0:8080 (every interface)".into());
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{port}` is not a port number (0-65535)"))?;
    if host.is_empty() {
        return Err(format!(
            "no address: write 127.0.0.1:{port} for this machine only, or 0.0.0.0:{port} for every interface"
        ));
    }
    let addresses: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
        .collect();
    // One listener: IPv4 when the name has both, which every client reaches.
    let addr = addresses
        .iter()
        .find(|a| a.is_ipv4())
        .or(addresses.first())
        .copied()
        .ok_or_else(|| format!("`{host}` resolves to no address"))?;
    Ok((addr, host.to_ascii_lowercase()))
}

/// The Host names the `--metrics` listener answers to: loopback's names,
/// the machine's own, any IP address (no DNS rebinding sends one) and
/// `allow_hosts`.
pub fn metrics_hosts(
    allow_hosts: &[String],
) -> Result<impl Fn(&str) -> bool + Clone + Send + Sync + use<>, SetupError> {
    let names = ["localhost".to_owned(), "127.0.0.1".into(), "::1".into()];
    let hosts = Hosts::new(
        names
            .iter()
            .cloned()
            .chain(machine_name())
            .chain(allow_hosts.iter().cloned())
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str),
    )
    .map_err(SetupError::Host)?;
    Ok(move |host: &str| hosts.allows(host) || Hosts::is_address(host))
}

#[cfg(unix)]
fn machine_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the pointer and length describe `buffer`, which gethostname
    // fills with at most that many bytes.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if status != 0 {
        return None;
    }
    let end = buffer.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&buffer[..end]).ok()?;
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

#[cfg(not(unix))]
fn machine_name() -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(listen: &str, token: Option<&str>) -> Result<Options, SetupError> {
        Options::new(listen, token, &[], &[])
    }

    #[test]
    fn any_host_needs_a_token() {
        let any = ["*".to_owned()];
        let refused = Options::new("127.0.0.1:0", None, &any, &[]).unwrap_err();
        assert!(refused.to_string().contains("DNS rebinding"), "{refused}");
        assert!(Options::new("127.0.0.1:0", Some("a-long-token-1234"), &any, &[]).is_ok());
    }

    #[test]
    fn the_metrics_listener_answers_its_names_and_addresses_only() {
        let allows = metrics_hosts(&["prom.internal".to_owned()]).unwrap();
        for host in [
            "localhost:9464",
            "127.0.0.1:9464",
            "[::1]:9464",
            "10.0.0.7:9464",
            "prom.internal",
        ] {
            assert!(allows(host), "{host}");
        }
        assert!(!allows("rebind.attacker.example:9464"));
    }

    #[test]
    fn addresses_are_read_as_people_write_them() {
        assert_eq!(
            parse_listen("8080").unwrap().0,
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            parse_listen("[::1]:9").unwrap().0,
            "[::1]:9".parse().unwrap()
        );
        let (addr, name) = parse_listen("localhost:7000").unwrap();
        assert!(addr.ip().is_loopback() && addr.port() == 7000);
        assert_eq!(name, "localhost");
        for bad in [
            "",
            "localhost",
            ":8080",
            "127.0.0.1:http",
            "127.0.0.1:70000",
        ] {
            let error = parse_listen(bad).unwrap_err();
            assert!(!error.is_empty(), "{bad}");
        }
    }

    #[test]
    fn only_loopback_may_go_without_a_token() {
        assert!(options("127.0.0.1:0", None).is_ok());
        assert!(options("[::1]:0", None).is_ok());
        let refused = options("0.0.0.0:8080", None).unwrap_err();
        assert!(matches!(refused, SetupError::Unprotected { .. }));
        assert!(refused.to_string().contains("CHORUS_TOKEN"), "{refused}");
        assert!(options("0.0.0.0:8080", Some("a-long-secret")).is_ok());
        assert!(matches!(
            options("0.0.0.0:8080", Some("")).unwrap_err(),
            SetupError::Token(_)
        ));
    }

    #[test]
    fn the_listen_address_is_one_of_the_accepted_host_names() {
        let specific = options("10.1.2.3:8080", Some("t")).unwrap();
        assert!(specific.access.hosts.allows("10.1.2.3:8080"));
        assert!(specific.access.hosts.allows("localhost:8080"));
        assert!(!specific.access.hosts.allows("chorus.example.com"));
        let extended = Options::new(
            "0.0.0.0:8080",
            Some("t"),
            &["chorus.example.com".into()],
            &["https://app.example.com".into()],
        )
        .unwrap();
        assert!(extended.access.hosts.allows("chorus.example.com:8080"));
        assert!(extended.access.origins.allows("https://app.example.com"));
        assert!(Options::new("8080", None, &["a b".into()], &[]).is_err());
        assert!(Options::new("8080", None, &[], &["app.example.com".into()]).is_err());
    }
}

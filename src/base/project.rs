//! `runbook.toml`: what a team decides once for every run from its repository: who may
//! approve plans and how many must (`[policy]`), and where run records are shipped as
//! they happen (`[[sink]]`). Found as `./runbook.toml`, or the file `$RUNBOOK_CONFIG`
//! names; none is the same as an empty one.
//!
//! ```toml
//! [policy]
//! allowed_signers = "allowed_signers"   # OpenSSH's format, relative to this file
//! approvers = 1                         # distinct approvers besides the author, every plan
//!
//! [[policy.rule]]                       # more for some plans: the most any rule asks wins
//! group = "gpu"                         # a change on a target of this inventory group
//! deletes = true                        # ... that deletes, rebuilds or restores something
//! approvers = 2
//!
//! [[sink]]
//! kind = "syslog"                       # RFC 5424 over TCP, octet-counted (RFC 6587)
//! address = "127.0.0.1:6514"
//! facility = "local0"                   # default "user"
//!
//! [[sink]]
//! kind = "webhook"                      # POST, a body of JSON lines, retried
//! url = "http://127.0.0.1:8080/events"
//!
//! [[sink]]
//! kind = "dir"                          # one JSONL file per run, appended and fsynced
//! path = "/mnt/audit"                   # relative: to this file's directory
//! ```

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    #[serde(default)]
    pub policy: Option<Policy>,
    /// Where real runs' events are shipped as they happen (`run/sinks/ship/`).
    #[serde(default)]
    pub sink: Vec<Sink>,
    /// The file it was read from, for messages and relative paths.
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// `[policy]`: plans must be signed by their author and approved before `apply`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// OpenSSH's allowed-signers file (`ssh-keygen(1)`, ALLOWED SIGNERS): who is who.
    pub allowed_signers: PathBuf,
    /// Distinct approvers other than the author every plan needs (default 1).
    #[serde(default = "one")]
    pub approvers: u32,
    /// How long an approval counts when `approve` is given no `--ttl` (default 24h).
    pub ttl: Option<String>,
    #[serde(default)]
    pub rule: Vec<Rule>,
}

fn one() -> u32 {
    1
}

/// `[[policy.rule]]`: plans it matches need `approvers` at least. A rule with neither
/// `group` nor `deletes` matches every plan.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A change on a target of this inventory group.
    pub group: Option<String>,
    /// `true`: only a change that deletes, rebuilds or restores something (`[deletes]`).
    #[serde(default)]
    pub deletes: bool,
    pub approvers: u32,
}

/// `[[sink]]`: one place a real run's events are shipped to, by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "SinkTable")]
pub enum Sink {
    Syslog(Syslog),
    Webhook(Webhook),
    Dir(Dir),
}

/// `kind = "syslog"`: RFC 5424 messages over TCP, octet-counted (RFC 6587), which
/// rsyslog's imtcp, syslog-ng's `syslog()` source and most SIEMs take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Syslog {
    /// `HOST:PORT`.
    pub address: Address,
    /// The syslog facility of every message (default `user`).
    pub facility: Facility,
}

/// `kind = "webhook"`: each batch of events POSTed as JSON lines, retried until a 2xx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: HttpUrl,
}

/// `kind = "dir"`: `PATH/RUN_ID.jsonl`, appended and fsynced (an NFS mount, say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dir {
    pub path: PathBuf,
}

/// A `[[sink]]` table as written. Read as one flat struct, not as a serde-tagged enum:
/// a tagged enum reads the table whole first, and toml then places every mistake in it
/// at the table's first line; this way a wrong key or value is named at its own line,
/// and only what needs the whole table (a key of another kind, one missing) at the
/// table's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SinkTable {
    kind: Kind,
    address: Option<Address>,
    facility: Option<Facility>,
    url: Option<HttpUrl>,
    path: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Syslog,
    Webhook,
    Dir,
}

impl TryFrom<SinkTable> for Sink {
    type Error = String;

    fn try_from(t: SinkTable) -> Result<Sink, String> {
        let (kind, keys) = match t.kind {
            Kind::Syslog => ("syslog", "address (and facility)"),
            Kind::Webhook => ("webhook", "url"),
            Kind::Dir => ("dir", "path"),
        };
        let other = [
            ("address", t.address.is_some() && kind != "syslog"),
            ("facility", t.facility.is_some() && kind != "syslog"),
            ("url", t.url.is_some() && kind != "webhook"),
            ("path", t.path.is_some() && kind != "dir"),
        ];
        if let Some((key, _)) = other.iter().find(|(_, there)| *there) {
            return Err(format!("a {kind} sink takes no `{key}` (it takes {keys})"));
        }
        let missing = |key: &str| format!("a {kind} sink needs `{key}`");
        Ok(match t.kind {
            Kind::Syslog => Sink::Syslog(Syslog {
                address: t.address.ok_or_else(|| missing("address"))?,
                facility: t.facility.unwrap_or_default(),
            }),
            Kind::Webhook => Sink::Webhook(Webhook {
                url: t.url.ok_or_else(|| missing("url"))?,
            }),
            Kind::Dir => Sink::Dir(Dir {
                path: t.path.ok_or_else(|| missing("path"))?,
            }),
        })
    }
}

impl Sink {
    /// What it ships to, in messages: `syslog 127.0.0.1:6514`.
    pub fn describe(&self) -> String {
        match self {
            Sink::Syslog(s) => format!("syslog {}", s.address.0),
            Sink::Webhook(w) => format!("webhook {}", w.url.text),
            Sink::Dir(d) => format!("dir {}", d.path.display()),
        }
    }

    /// The word of `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Sink::Syslog(_) => "syslog",
            Sink::Webhook(_) => "webhook",
            Sink::Dir(_) => "dir",
        }
    }
}

/// A syslog receiver's `HOST:PORT` (resolved when it is connected to, so a name may
/// move).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address(pub String);

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let port = text
            .rsplit_once(':')
            .filter(|(host, _)| !host.is_empty())
            .and_then(|(_, port)| port.parse::<u16>().ok());
        match port {
            Some(p) if p > 0 => Ok(Address(text)),
            _ => Err(serde::de::Error::custom(format!(
                "address {text:?} is not HOST:PORT (e.g. \"127.0.0.1:6514\")"
            ))),
        }
    }
}

/// An `http://HOST:PORT/PATH` URL, split. `https://` is refused: runbook carries no TLS
/// stack (a local relay, or a receiver on loopback, takes plain HTTP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub text: String,
    /// `HOST:PORT` to connect to (port 80 when the URL names none).
    pub authority: String,
    /// What the `Host` header says: the URL's own `HOST[:PORT]`.
    pub host: String,
    /// From the first `/` on; `/` when the URL has none.
    pub path: String,
}

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        HttpUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl HttpUrl {
    pub fn parse(text: &str) -> Result<HttpUrl, String> {
        if text
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        {
            return Err(format!(
                "url {text:?}: https is not supported (runbook has no TLS stack): use http:// to a receiver or relay this machine trusts, e.g. on 127.0.0.1"
            ));
        }
        let rest = match text.get(..7) {
            Some(s) if s.eq_ignore_ascii_case("http://") => &text[7..],
            _ => return Err(format!("url {text:?} must start with http://")),
        };
        let (host, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('/') => (&rest[..i], &rest[i..]),
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        let bad = |c: char| c.is_whitespace() || c.is_control();
        if host.is_empty() || host.contains('@') || host.contains(bad) || path.contains(bad) {
            return Err(format!(
                "url {text:?} is not http://HOST[:PORT]/PATH (no user, spaces or control characters)"
            ));
        }
        // An IPv6 literal is `[::1]:8080`: its port comes after the bracket.
        let port_at = match host.rfind(']') {
            Some(b) => host[b..].find(':').map(|i| b + i),
            None => host.rfind(':'),
        };
        let authority = match port_at {
            Some(i) => match host[i + 1..].parse::<u16>() {
                Ok(p) if p > 0 => host.to_string(),
                _ => return Err(format!("url {text:?}: bad port")),
            },
            None => format!("{host}:80"),
        };
        Ok(HttpUrl {
            text: text.to_string(),
            authority,
            host: host.to_string(),
            path,
        })
    }
}

/// RFC 5424's facilities, by the names syslog.conf gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Facility {
    Kern,
    #[default]
    User,
    Mail,
    Daemon,
    Auth,
    Syslog,
    Lpr,
    News,
    Uucp,
    Cron,
    Authpriv,
    Ftp,
    Local0,
    Local1,
    Local2,
    Local3,
    Local4,
    Local5,
    Local6,
    Local7,
}

impl Facility {
    /// Its number (RFC 5424, 6.2.1).
    pub fn code(self) -> u8 {
        use Facility::*;
        match self {
            Kern => 0,
            User => 1,
            Mail => 2,
            Daemon => 3,
            Auth => 4,
            Syslog => 5,
            Lpr => 6,
            News => 7,
            Uucp => 8,
            Cron => 9,
            Authpriv => 10,
            Ftp => 11,
            Local0 => 16,
            Local1 => 17,
            Local2 => 18,
            Local3 => 19,
            Local4 => 20,
            Local5 => 21,
            Local6 => 22,
            Local7 => 23,
        }
    }
}

impl Project {
    /// `./runbook.toml` or `$RUNBOOK_CONFIG`; the default when there is neither. A file
    /// that cannot be read or parsed is an error naming it (and the line).
    pub fn load() -> Result<Project, String> {
        let named = std::env::var_os("RUNBOOK_CONFIG").filter(|v| !v.is_empty());
        let path = match &named {
            Some(p) => PathBuf::from(p),
            None => PathBuf::from("runbook.toml"),
        };
        if named.is_none() && !path.is_file() {
            return Ok(Project::default());
        }
        Project::read(&path)
    }

    pub fn read(path: &Path) -> Result<Project, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut project: Project = toml::from_str(&text).map_err(|e| {
            let at = e
                .span()
                .map(|s| text[..s.start].matches('\n').count() + 1)
                .map_or(String::new(), |l| format!(":{l}"));
            format!("{}{at}: {}", path.display(), e.message().trim())
        })?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        if let Some(policy) = &mut project.policy {
            if policy.allowed_signers.is_relative() {
                policy.allowed_signers = dir.join(&policy.allowed_signers);
            }
        }
        for sink in &mut project.sink {
            if let Sink::Dir(d) = sink {
                if d.path.is_relative() {
                    d.path = dir.join(&d.path);
                }
            }
        }
        project.path = Some(path);
        Ok(project)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_policy_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("runbook.toml");
        std::fs::write(
            &p,
            "[policy]\nallowed_signers = \"signers\"\napprovers = 1\n\n[[policy.rule]]\ngroup = \"gpu\"\ndeletes = true\napprovers = 2\n",
        )
        .unwrap();
        let project = Project::read(&p).unwrap();
        let policy = project.policy.unwrap();
        assert!(policy.allowed_signers.ends_with("signers"));
        assert!(policy.allowed_signers.is_absolute());
        assert_eq!(policy.rule[0].approvers, 2);
        std::fs::write(&p, "[policy]\nallowed_signers = \"s\"\naprovers = 2\n").unwrap();
        let err = Project::read(&p).unwrap_err();
        assert!(err.contains("runbook.toml:3"), "{err}");
        assert!(err.contains("aprovers"), "{err}");
    }

    #[test]
    fn reads_sinks_and_names_the_line_of_a_wrong_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("runbook.toml");
        std::fs::write(
            &p,
            "[policy]\nallowed_signers = \"s\"\n\n[[sink]]\nkind = \"syslog\"\naddress = \"127.0.0.1:6514\"\nfacility = \"local3\"\n\n[[sink]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:8080/in?x=1\"\n\n[[sink]]\nkind = \"dir\"\npath = \"audit\"\n",
        )
        .unwrap();
        let project = Project::read(&p).unwrap();
        assert!(project.policy.is_some());
        let Sink::Syslog(s) = &project.sink[0] else {
            panic!("{:?}", project.sink)
        };
        assert_eq!(
            (s.address.0.as_str(), s.facility.code()),
            ("127.0.0.1:6514", 19)
        );
        let Sink::Webhook(w) = &project.sink[1] else {
            panic!()
        };
        assert_eq!(w.url.authority, "127.0.0.1:8080");
        assert_eq!(w.url.path, "/in?x=1");
        let Sink::Dir(d) = &project.sink[2] else {
            panic!()
        };
        assert!(d.path.is_absolute() && d.path.ends_with("audit"));
        let wrong = [
            (
                "[[sink]]\nkind = \"syslog\"\nadress = \"h:1\"\n",
                ":3",
                "adress",
            ),
            (
                "[[sink]]\nkind = \"dir\"\npath = \"a\"\nurl = \"http://h/\"\n",
                ":1",
                "takes no `url`",
            ),
            ("\n[[sink]]\nkind = \"sislog\"\n", ":3", "sislog"),
            (
                "[[sink]]\nkind = \"syslog\"\naddress = \"nohost\"\n",
                ":3",
                "HOST:PORT",
            ),
            (
                "[[sink]]\nkind = \"webhook\"\nurl = \"https://siem.example/in\"\n",
                ":3",
                "https",
            ),
            ("[[sink]]\nkind = \"dir\"\n", ":1", "needs `path`"),
            (
                "[[sink]]\nkind = \"syslog\"\naddress = \"h:1\"\nfacility = \"local9\"\n",
                ":4",
                "local9",
            ),
        ];
        for (text, line, word) in wrong {
            std::fs::write(&p, text).unwrap();
            let err = Project::read(&p).unwrap_err();
            assert!(
                err.contains(&format!("runbook.toml{line}:")),
                "{text}: {err}"
            );
            assert!(err.contains(word), "{text}: {err}");
        }
    }

    #[test]
    fn urls() {
        let u = HttpUrl::parse("http://[::1]:9000").unwrap();
        assert_eq!((u.authority.as_str(), u.path.as_str()), ("[::1]:9000", "/"));
        let u = HttpUrl::parse("http://collector.example/a/b").unwrap();
        assert_eq!(
            (u.authority.as_str(), u.host.as_str()),
            ("collector.example:80", "collector.example")
        );
        for bad in [
            "ftp://x/",
            "http://",
            "http://u@h/",
            "http://h:0/",
            "http://h:x/",
            "http://h/a b",
        ] {
            assert!(HttpUrl::parse(bad).is_err(), "{bad}");
        }
    }
}

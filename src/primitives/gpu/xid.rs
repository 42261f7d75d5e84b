//! NVIDIA's Xid catalog: what each Xid number means, how bad it is and what recovers
//! from it. The catalog is data (`xid_catalog.toml`, which names its sources), read once.

use super::finding::{Action, Verdict};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::LazyLock;

/// One Xid as the catalog describes it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub xid: u32,
    pub name: String,
    pub severity: Verdict,
    pub action: Action,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    xid: Vec<Entry>,
}

static CATALOG: LazyLock<HashMap<u32, Entry>> = LazyLock::new(|| {
    // The file ships in the binary; a mistake in it is caught by the test below.
    let file: File = toml::from_str(include_str!("xid_catalog.toml"))
        .expect("xid_catalog.toml is valid (tested)");
    file.xid.into_iter().map(|e| (e.xid, e)).collect()
});

/// What the catalog says of `xid`; `None` for one it does not know.
pub fn lookup(xid: u32) -> Option<&'static Entry> {
    CATALOG.get(&xid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_reads_and_knows_the_common_xids() {
        let file: File = toml::from_str(include_str!("xid_catalog.toml")).unwrap();
        let mut seen = std::collections::HashSet::new();
        for e in &file.xid {
            assert!(seen.insert(e.xid), "Xid {} is listed twice", e.xid);
            assert!(!e.name.trim().is_empty(), "Xid {} has no name", e.xid);
            assert_ne!(e.severity, Verdict::Ok, "Xid {}: an Xid is never ok", e.xid);
        }
        let fell_off = lookup(79).unwrap();
        assert_eq!(fell_off.severity, Verdict::Critical);
        assert_eq!(fell_off.action, Action::NodeReboot);
        for xid in [13, 31, 43, 45, 48, 63, 64, 74, 79, 92, 94, 95, 119] {
            assert!(
                lookup(xid).is_some(),
                "Xid {xid} is missing from the catalog"
            );
        }
        assert!(lookup(999_999).is_none());
    }
}

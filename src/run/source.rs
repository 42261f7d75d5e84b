//! Finding the runbook a user named: a path, or a bare name looked up in `./NAME.lua`,
//! `./runbooks/NAME.lua`, then the runbooks shipped inside the binary.

use crate::base::embedded;
use crate::base::error::{Error, Result};
use crate::base::suggest;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Source {
    /// How messages name it: the path as given, or `<shipped>/NAME.lua`.
    pub label: String,
    /// Where `require` looks for modules beside it.
    pub dir: Option<PathBuf>,
    pub bytes: Vec<u8>,
}

impl Source {
    fn from_file(path: &Path) -> Result<Source> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::NoRunbook(format!("cannot read runbook {}: {e}", path.display()))
        })?;
        // Beside the file itself, a symlink to it resolved (as Python and Node find a
        // script's modules): a plan records the resolved file, so its apply finds the
        // same modules as the plan did.
        let dir = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        Ok(Source {
            label: path.display().to_string(),
            dir,
            bytes,
        })
    }

    pub fn shipped(name: &str) -> Option<Source> {
        embedded::shipped(name).map(|src| Source {
            label: format!("<shipped>/{name}.lua"),
            dir: None,
            bytes: src.as_bytes().to_vec(),
        })
    }

    /// A sha256 of the runbook's bytes: `--resume` refuses a runbook that changed.
    pub fn content_hash(&self) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(&self.bytes);
        crate::base::hex::hex(&digest)
    }
}

pub fn locate(arg: &str) -> Result<Source> {
    let looks_like_path = arg.contains('/') || arg.ends_with(".lua");
    if looks_like_path {
        let path = Path::new(arg);
        if path.is_file() {
            return Source::from_file(path);
        }
        if path.is_dir() {
            return Err(Error::NoRunbook(format!(
                "{arg} is a directory; give a runbook file (see `runbook list {arg}`)"
            )));
        }
        return Err(Error::NoRunbook(format!("no such runbook file: {arg}")));
    }
    for candidate in [format!("{arg}.lua"), format!("runbooks/{arg}.lua")] {
        let p = Path::new(&candidate);
        if p.is_file() {
            return Source::from_file(p);
        }
    }
    if let Some(src) = Source::shipped(arg) {
        return Ok(src);
    }
    let shipped: Vec<&str> = embedded::SHIPPED.iter().map(|(n, _)| *n).collect();
    Err(Error::NoRunbook(format!(
        "no runbook '{arg}': looked for ./{arg}.lua, ./runbooks/{arg}.lua and the shipped runbooks ({}){}",
        if shipped.is_empty() { "none".to_string() } else { shipped.join(", ") },
        suggest::hint(arg, shipped.iter().copied())
    )))
}

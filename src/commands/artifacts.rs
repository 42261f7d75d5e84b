//! `artifacts list|show|verify|prune`: the store `artifact.capture` writes, read and
//! tidied from the command line.

use crate::cli::ArtifactsAction;
use crate::error::{Error, Result};
use crate::primitives::artifact::check_archive;
use crate::primitives::human_bytes;
use crate::primitives::store::Store;
use crate::state;
use std::path::PathBuf;

pub fn artifacts(
    action: ArtifactsAction,
    store: Option<PathBuf>,
    state_dir: Option<PathBuf>,
) -> Result<()> {
    let store = match store {
        Some(dir) => Store {
            dir: std::path::absolute(&dir).map_err(|e| Error::io(&dir, e))?,
        },
        None => Store {
            dir: state::state_dir(state_dir).join("artifacts"),
        },
    };
    match action {
        ArtifactsAction::List => list(&store),
        ArtifactsAction::Show { id } => {
            let m = store.get(&id).map_err(Error::Store)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&m).expect("a manifest serialises")
            );
            Ok(())
        }
        ArtifactsAction::Verify { id } => verify(&store, id.as_deref()),
        ArtifactsAction::Prune { keep } => {
            if keep == 0 {
                return Err(Error::Usage(
                    "--keep 0 would delete every artifact; give at least 1".into(),
                ));
            }
            let gone = store.prune(keep).map_err(Error::Store)?;
            println!(
                "deleted {} artifact(s) from {}{}",
                gone.len(),
                store.dir.display(),
                if gone.is_empty() {
                    String::new()
                } else {
                    format!(": {}", gone.join(", "))
                }
            );
            Ok(())
        }
    }
}

fn list(store: &Store) -> Result<()> {
    let all = store.list().map_err(Error::Store)?;
    if all.is_empty() {
        println!("no artifacts in {}", store.dir.display());
        return Ok(());
    }
    println!(
        "{:<16}  {:<20}  {:>10}  {:>8}  {:<14}  {:<20}  PATHS",
        "ID", "NAME", "SIZE", "FILES", "AGE", "MADE ON"
    );
    for m in &all {
        println!(
            "{:<16}  {:<20}  {:>10}  {:>8}  {:<14}  {:<20}  {}",
            m.id,
            m.name,
            human_bytes(m.bytes),
            m.files,
            m.age(),
            m.source,
            m.paths.join(", ")
        );
    }
    Ok(())
}

/// What a restore checks, for every artifact (or one): each object's sha256, then every
/// entry of it.
fn verify(store: &Store, id: Option<&str>) -> Result<()> {
    let all = match id {
        Some(id) => vec![store.get(id).map_err(Error::Store)?],
        None => store.list().map_err(Error::Store)?,
    };
    let mut bad = Vec::new();
    for m in &all {
        for part in &m.parts {
            let problem = match store.read_object(part) {
                Err(e) => Some(e),
                Ok(bytes) => check_archive(&bytes).err().map(|r| r.join("; ")),
            };
            match problem {
                Some(p) => {
                    println!("{} {} ({}): refused: {p}", m.id, m.name, part.path);
                    bad.push(m.id.clone());
                }
                None => println!("{} {} ({}): ok", m.id, m.name, part.path),
            }
        }
    }
    if bad.is_empty() {
        println!(
            "{} artifact(s) verified in {}",
            all.len(),
            store.dir.display()
        );
        return Ok(());
    }
    Err(Error::ArtifactsDamaged(format!(
        "{} of {} artifact(s) in {} would be refused by a restore: {}",
        bad.len(),
        all.len(),
        store.dir.display(),
        bad.join(", ")
    )))
}
